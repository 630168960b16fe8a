// Package labelled holds labelled text and what is learnt from it, with no
// model code: the Example and Dataset types, their readers (JSONL, CSV and
// TSV, GLUE's tab-separated layout without quoting included, with the text,
// text-pair and label columns named by the caller; every error names the
// file and the line), and the Spec of a task (single-label or multi-label
// classification, regression or token tags, the label set, pairs, and the
// metric that picks the best checkpoint).
//
// It sits below the packages that use these types: finetune trains and
// evaluates on them, tasks builds the built-in tasks' splits as them, and
// neither needs the other for it.
//
// A reader is bounded by its input: a line is at most
// ReadOptions.MaxLineBytes (DefaultMaxLineBytes, 1 MiB), and a longer one is
// an error naming the file, the line and the limit, given as soon as the
// limit is passed (the rest of the line is never read); a line that is not
// valid UTF-8 is an error naming it; and a file holds at most
// ReadOptions.MaxLabels distinct labels (DefaultMaxLabels, 2²⁰, the most
// num_labels a model may have), the first one past it refused as it is
// read. The lines come through internal/lines, the toolkit's one line
// reader.
package labelled
