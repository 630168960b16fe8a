package experiment

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/tasks"
	"github.com/roformer-go/roformer/tokenizer"
)

// TaskStat describes what a fine-tuned model sees of one task: the lengths
// in tokens of the training inputs ([CLS] and [SEP] included, nothing cut),
// how many exceed the maximum length and are cut, and for pair tasks how
// far lexical overlap alone goes — a one-feature classifier that calls a
// pair positive when the Jaccard overlap of the two texts' lower-cased word
// sets reaches a threshold, the threshold chosen on train.
type TaskStat struct {
	MaxLength      int     `json:"max_length"`
	MedianTokens   int     `json:"median_tokens"`
	P90Tokens      int     `json:"p90_tokens"`
	MaxTokens      int     `json:"max_tokens"`
	TruncatedTrain int     `json:"truncated_train"` // training inputs longer than MaxLength
	TrainExamples  int     `json:"train_examples"`
	OverlapThresh  *Number `json:"overlap_threshold,omitempty"` // pair tasks only
	OverlapTestF1  *Number `json:"overlap_test_f1,omitempty"`   // F1 of the positive class on test
	OverlapTestAcc *Number `json:"overlap_test_accuracy,omitempty"`
	// AllPositiveTestF1 is the F1 on test of answering the positive class
	// always (pair tasks only): what a run that collapses to it scores.
	AllPositiveTestF1 *Number `json:"all_positive_test_f1,omitempty"`
}

// taskStats computes the TaskStat of every task with tok at maxLen.
func taskStats(tok *tokenizer.Tokenizer, specs map[string]labelled.Spec, splits map[string]*tasks.Splits, names []string, maxLen int) (map[string]TaskStat, error) {
	out := map[string]TaskStat{}
	for _, name := range names {
		train := splits[name].Train
		inputs := make([]tokenizer.Input, len(train.Examples))
		for i, ex := range train.Examples {
			inputs[i] = tokenizer.Input{Text: ex.Text, TextPair: ex.TextPair}
		}
		encs, err := tok.EncodeBatch(inputs, tokenizer.EncodeOptions{Truncation: tokenizer.TruncateNone})
		if err != nil {
			return nil, fmt.Errorf("experiment: task %s: %w", name, err)
		}
		lens := make([]int, len(encs))
		st := TaskStat{MaxLength: maxLen, TrainExamples: len(encs)}
		for i, e := range encs {
			lens[i] = e.Len()
			if lens[i] > maxLen {
				st.TruncatedTrain++
			}
		}
		slices.Sort(lens)
		if n := len(lens); n > 0 {
			st.MedianTokens, st.P90Tokens, st.MaxTokens = lens[n/2], lens[n*9/10], lens[n-1]
		}
		if spec := specs[name]; spec.Pair && len(spec.Labels) == 2 {
			pos := spec.Positive
			if pos == "" {
				pos = spec.Labels[1]
			}
			th, _, _ := overlapClassifier(splits[name].Train, pos, -1)
			_, f1, acc := overlapClassifier(splits[name].Test, pos, th)
			_, all, _ := overlapClassifier(splits[name].Test, pos, 0) // Jaccard ≥ 0: every pair
			a, b, c, d := Number(th), Number(f1), Number(acc), Number(all)
			st.OverlapThresh, st.OverlapTestF1, st.OverlapTestAcc, st.AllPositiveTestF1 = &a, &b, &c, &d
		}
		out[name] = st
	}
	return out, nil
}

// overlapClassifier scores "positive when Jaccard(words(a), words(b)) ≥
// th" on ds: F1 of the positive class and accuracy. With th < 0 it first
// picks the threshold (a multiple of 0.01) with the best F1 on ds.
func overlapClassifier(ds *labelled.Dataset, positive string, th float64) (float64, float64, float64) {
	jac := make([]float64, len(ds.Examples))
	gold := make([]bool, len(ds.Examples))
	for i, ex := range ds.Examples {
		jac[i] = jaccardWords(ex.Text, *ex.TextPair)
		gold[i] = ex.Label == positive
	}
	score := func(th float64) (f1, acc float64) {
		var tp, fp, fn, right int
		for i, j := range jac {
			p := j >= th
			switch {
			case p && gold[i]:
				tp++
			case p:
				fp++
			case gold[i]:
				fn++
			}
			if p == gold[i] {
				right++
			}
		}
		if tp > 0 {
			f1 = 2 * float64(tp) / float64(2*tp+fp+fn)
		}
		return f1, float64(right) / float64(max(len(jac), 1))
	}
	if th < 0 {
		best := -1.0
		for k := 0; k <= 100; k++ {
			if f, _ := score(float64(k) / 100); f > best {
				best, th = f, float64(k)/100
			}
		}
	}
	f1, acc := score(th)
	return th, f1, acc
}

// jaccardWords is |A ∩ B| / |A ∪ B| of the lower-cased word sets of a and b
// (words: runs of letters and digits).
func jaccardWords(a, b string) float64 {
	set := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			m[w] = true
		}
		return m
	}
	A, B := set(a), set(b)
	inter := 0
	for w := range A {
		if B[w] {
			inter++
		}
	}
	union := len(A) + len(B) - inter
	if union == 0 {
		return 1
	}
	return float64(inter) / float64(union)
}
