// Package data turns text into masked-language-model batches: it reads a
// corpus, packs token ids into fixed-length [CLS] … [SEP] sequences, holds
// out an evaluation split, masks tokens dynamically and serves shuffled
// batches whose position and random state can be saved and restored, so
// that a resumed training run sees exactly the batches an uninterrupted run
// would have seen.
//
// The package does not know any tokenizer: callers pass an Encoder and a
// Vocab with the special ids. Masking follows Hugging Face's
// DataCollatorForLanguageModeling (BERT, Devlin et al. 2019, §3.1): each
// non-special token is selected with probability 0.15; a selected token is
// replaced by [MASK] with probability 0.8, by a uniformly random vocabulary
// id with probability 0.1, and left unchanged otherwise; labels are the
// original ids at selected positions and -100 (ignored) elsewhere. Whole-word
// masking (DataCollatorForWholeWordMask) selects words instead of tokens.
//
// Every random choice comes from math/rand/v2's PCG generator, whose state
// is serialisable; no map order or clock enters any result.
//
// The built-in English corpus lives in the sub-package corpus.
package data
