package finetune

import (
	"errors"
	"fmt"
	"sort"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// feature is an example turned into model input.
type feature struct {
	ex        *labelled.Example
	ids       []int32   // [n] input_ids with [CLS] and [SEP], no padding
	types     []int32   // [n] token_type_ids
	label     int32     // SingleLabel: the class id
	floats    []float32 // MultiLabel: [NL] 0/1; Regression: [1]
	tags      []int32   // TokenTags: [n] the tag of each position, −100 where ignored
	wordTok   []int     // TokenTags: per word, the position of its first sub-token or −1
	truncated bool
}

// encodeOptions are the tokenizer settings of a run.
type encodeOptions struct {
	maxLen     int
	truncation tokenizer.Truncation // TruncateNone: an over-long input is an error
}

// encodeAll tokenizes the examples of ds (in parallel, through
// EncodeBatch) and attaches their label ids. It returns the number of
// truncated examples.
func encodeAll(tok *tokenizer.Tokenizer, spec *labelled.Spec, ds *labelled.Dataset, eo encodeOptions) ([]*feature, int, error) {
	if eo.maxLen < 3 {
		return nil, 0, fmt.Errorf("finetune: max length %d leaves no room for text besides [CLS] and [SEP]", eo.maxLen)
	}
	inputs := make([]tokenizer.Input, len(ds.Examples))
	for i := range ds.Examples {
		ex := &ds.Examples[i]
		inputs[i] = tokenizer.Input{Text: ex.Text, TextPair: ex.TextPair}
	}
	trunc := eo.truncation
	if trunc == tokenizer.TruncateAuto {
		trunc = tokenizer.TruncateLongestFirst
	}
	if spec.Problem == labelled.TokenTags && trunc != tokenizer.TruncateNone {
		trunc = tokenizer.TruncateOnlyFirst
	}
	opts := tokenizer.EncodeOptions{MaxLength: eo.maxLen, Truncation: trunc}
	if trunc == tokenizer.TruncateNone {
		opts.Limit = eo.maxLen // counted past the limit, not kept
	}
	encs, err := tok.EncodeBatch(inputs, opts)
	if err != nil {
		var be *tokenizer.BatchError
		if errors.As(err, &be) {
			var le *tokenizer.LengthError
			if errors.As(be.Err, &le) {
				be.Err = fmt.Errorf("the input has %d tokens, more than the maximum length %d (truncation is off)", le.Tokens, eo.maxLen)
			}
			return nil, 0, &labelled.InputError{File: ds.File, Line: ds.Examples[be.Index].Line, Err: be.Err}
		}
		return nil, 0, fmt.Errorf("finetune: %s: %w", ds.File, err)
	}
	idx := spec.LabelIndex()
	feats := make([]*feature, len(encs))
	nTrunc := 0
	for i, enc := range encs {
		ex := &ds.Examples[i]
		f := &feature{ex: ex, ids: make([]int32, enc.Len()), types: make([]int32, enc.Len())}
		for j := range enc.IDs {
			f.ids[j], f.types[j] = int32(enc.IDs[j]), int32(enc.TypeIDs[j])
		}
		if enc.Truncated {
			f.truncated = true
			nTrunc++
		}
		if spec.Problem == labelled.TokenTags {
			alignWords(f, enc, ex)
		}
		if ex.HasLabel {
			if err := f.setLabels(spec, idx); err != nil {
				return nil, 0, &labelled.InputError{File: ds.File, Line: ex.Line, Err: err}
			}
		}
		feats[i] = f
	}
	return feats, nTrunc, nil
}

// alignWords maps each word of a TokenTags example to its first sub-token:
// the words were joined by single spaces, so their byte spans are known and
// each token's offset falls in one of them.
func alignWords(f *feature, enc *tokenizer.Encoding, ex *labelled.Example) {
	starts := make([]int, len(ex.Words))
	pos := 0
	for w, word := range ex.Words {
		starts[w] = pos
		pos += len(word) + 1
	}
	f.wordTok = make([]int, len(ex.Words))
	for w := range f.wordTok {
		f.wordTok[w] = -1
	}
	for j := range enc.IDs {
		if enc.SequenceIDs[j] != 0 {
			continue
		}
		off := enc.Offsets[j][0]
		w := sort.SearchInts(starts, off+1) - 1 // last word starting at or before off
		if w >= 0 && f.wordTok[w] < 0 {
			f.wordTok[w] = j
		}
	}
}

// setLabels fills the label fields from the example.
func (f *feature) setLabels(spec *labelled.Spec, idx map[string]int) error {
	ex := f.ex
	switch spec.Problem {
	case labelled.SingleLabel:
		id, ok := idx[ex.Label]
		if !ok {
			return fmt.Errorf("label %q is not in the label set", ex.Label)
		}
		f.label = int32(id)
	case labelled.MultiLabel:
		f.floats = make([]float32, len(spec.Labels))
		for _, l := range ex.Labels {
			id, ok := idx[l]
			if !ok {
				return fmt.Errorf("label %q is not in the label set", l)
			}
			f.floats[id] = 1
		}
	case labelled.Regression:
		f.floats = []float32{float32(ex.Value)}
	case labelled.TokenTags:
		f.tags = make([]int32, len(f.ids))
		for j := range f.tags {
			f.tags[j] = -100
		}
		for w, j := range f.wordTok {
			if j < 0 {
				continue
			}
			id, ok := idx[ex.Tags[w]]
			if !ok {
				return fmt.Errorf("tag %q is not in the label set", ex.Tags[w])
			}
			f.tags[j] = int32(id)
		}
	}
	return nil
}

// padMultiple rounds batch lengths up so that fewer distinct shapes occur
// (each shape needs its own workspace).
const padMultiple = 8

// makeBatch pads feats to a common length (the longest, rounded up to
// padMultiple) and returns the model input and, when withLabels, the labels.
func makeBatch(feats []*feature, spec *labelled.Spec, padID int32, withLabels bool) (*roformer.Batch, *roformer.Labels) {
	T := 0
	for _, f := range feats {
		T = max(T, len(f.ids))
	}
	T = (T + padMultiple - 1) / padMultiple * padMultiple
	B := len(feats)
	b := roformer.PadBatch(B, T, padID, func(r int) ([]int32, []int32) { return feats[r].ids, feats[r].types })
	if !withLabels {
		return b, nil
	}
	lab := &roformer.Labels{}
	for _, f := range feats {
		switch spec.Problem {
		case labelled.SingleLabel:
			lab.IDs = append(lab.IDs, f.label)
		case labelled.MultiLabel, labelled.Regression:
			lab.Floats = append(lab.Floats, f.floats...)
		case labelled.TokenTags:
			tags := make([]int32, T)
			for j := range tags {
				tags[j] = -100
			}
			copy(tags, f.tags)
			lab.IDs = append(lab.IDs, tags...)
		}
	}
	return b, lab
}
