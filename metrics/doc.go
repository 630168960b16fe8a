// Package metrics computes the evaluation scores that GLUE reports (Wang et
// al. 2019, "GLUE: A Multi-Task Benchmark and Analysis Platform for Natural
// Language Understanding", table 1), with the conventions of the scikit-learn
// and SciPy functions that the GLUE and Hugging Face evaluation scripts call:
//
//   - Accuracy: share of exact matches (sklearn accuracy_score).
//   - F1: binary F1 of one positive class (sklearn f1_score, average="binary"),
//     MacroF1 (average="macro" over the classes seen in gold or predictions)
//     and, for multi-label data, micro and macro F1 over label columns.
//   - Matthews: the Matthews correlation coefficient in its multi-class form
//     (Gorodkin 2004; sklearn matthews_corrcoef), GLUE's CoLA metric.
//   - Pearson and Spearman correlations (scipy.stats.pearsonr, spearmanr with
//     average ranks for ties), GLUE's STS-B metrics.
//   - Confusion: a confusion matrix with per-class precision, recall and F1.
//
// and the translation metrics of sacreBLEU 2.6.0 (Post 2018) with its
// defaults, checked against the cases of sacreBLEU's own tests:
//
//   - BLEU: corpus and sentence BLEU with mteval-v13a tokenization and
//     exponential smoothing (other tokenizers: intl, none, char; smoothing:
//     floor, add-k, none), several references per segment.
//   - CHRF: chrF2 (character 6-grams, β = 2, white space removed), chrF++
//     with WordOrder 2.
//   - Bootstrap and PairedBootstrap: confidence intervals and the paired
//     bootstrap test of two systems (Koehn 2004), as sacreBLEU's
//     n_bootstrap and --paired-bs, with a seeded generator.
//
// References come as sacreBLEU takes them: a list of reference streams,
// refs[k][i] the k-th reference of segment i.
//
// Undefined ratios follow scikit-learn's zero_division=0 convention: a
// precision, recall, F1 or Matthews coefficient whose denominator is 0 is 0.
// A correlation of a constant series is NaN, as in SciPy.
//
// Class arguments are integer ids in [0, k). Slices of predictions and gold
// values must have the same length; a mismatch is a programming error and
// panics. The translation metrics read files' contents, so there a
// mismatch of segment counts is an error that gives the numbers.
package metrics
