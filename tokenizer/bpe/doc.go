// Package bpe is a byte-pair-encoding subword tokenizer (Sennrich, Haddow
// and Birch 2016, "Neural Machine Translation of Rare Words with Subword
// Units", ACL, §3.2 and algorithm 1), trained on the text of both languages
// of a translation pair so that source and target share one vocabulary.
//
// # Normalization and words
//
// Normalize replaces invalid UTF-8 with U+FFFD and collapses white space:
// the words are the text's white-space-separated fields, joined by single
// spaces. Case, accents and Unicode composition are kept as they are. A word
// is cut into pieces before BPE sees it: each punctuation mark or symbol
// (Unicode categories P and S) is a piece of its own, and each run of other
// characters is one piece, so "earth," is "earth" and ",". The last
// character of a word carries the end-of-word mark, written "</w>" in the
// files: "earth" + ",</w>". Merges never cross pieces.
//
// # Training
//
// Train counts the pieces of the texts and starts from their characters
// (with and without the end-of-word mark, as seen: the alphabet). Each step
// merges the most frequent adjacent pair of symbols, counted over the
// pieces weighted by their frequency, into a new symbol; ties go to the
// pair whose left symbol, then right symbol, sorts first as a string (the
// end-of-word mark written "</w>"). Training stops when the vocabulary
// holds vocabSize tokens or no pair occurs twice. The merges are run by the
// engine that the WordPiece trainer of package tokenizer runs too
// (tokenizer/internal/merge): the pair counts are kept up to date
// incrementally (only the pieces that hold the merged pair are rewritten,
// and a heap with lazy deletion gives the best pair); the unexported
// trainNaive recounts everything at every step and is the reference the
// tests compare it with, merge by merge.
//
// # Ids
//
//	0 <pad>  1 <s> (beginning of sentence)  2 </s> (end)  3 <unk>
//	4–259    the bytes 0x00–0xFF, <0x00> … <0xFF>
//	260      </w> alone
//	261…     the alphabet in sorted order, then the symbols made by the
//	         merges in the order they were learned (a merge whose symbol
//	         exists already, "ab"+"c" after "a"+"bc", adds no token)
//
// Encode falls back to the UTF-8 bytes of a character that is not in the
// alphabet (followed by </w> when it ended its word), so every string
// encodes without <unk> and Decode(Encode(s)) == Normalize(s) for every s.
// Encode adds neither <s> nor </s>. Decode skips <pad>, <s> and </s> and
// writes <unk> as U+FFFD.
//
// # Files
//
// Save writes bpe.json into a folder (created if missing) atomically; Load
// reads it back and checks it: the alphabet and each merge, in order, must
// make a vocabulary of distinct symbols whose parts exist.
package bpe
