package data

import "fmt"

// Encoder turns text into vocabulary ids, without special tokens. A
// WordPiece tokenizer's EncodeIDs fits. Pack calls it from several
// goroutines when PackOptions.Workers > 1, so it must then be safe for
// concurrent use.
type Encoder interface {
	EncodeIDs(text string) []int
}

// EncoderFunc adapts a function to Encoder.
type EncoderFunc func(text string) []int

// EncodeIDs calls f(text).
func (f EncoderFunc) EncodeIDs(text string) []int { return f(text) }

// IgnoreIndex is the label of positions that do not count in the MLM loss,
// as in PyTorch's CrossEntropyLoss(ignore_index=-100).
const IgnoreIndex = -100

// Vocab gives the vocabulary size and the special token ids the data
// pipeline needs.
type Vocab struct {
	Size int // number of ids; random replacements are drawn from [0, Size)
	CLS  int // [CLS], opens every sequence
	SEP  int // [SEP], closes every sequence
	MASK int // [MASK], replaces 80% of the selected tokens
	PAD  int // [PAD], fills sequences shorter than the length
	// IsContinuation reports whether a token continues the word of the
	// token before it (WordPiece pieces spelt "##…"). Optional; whole-word
	// masking needs it.
	IsContinuation func(id int) bool
}

// Validate checks that the special ids lie in [0, Size) and differ.
func (v Vocab) Validate() error {
	if v.Size < 5 {
		return fmt.Errorf("data: vocabulary size %d is too small", v.Size)
	}
	seen := map[int]string{}
	for _, s := range []struct {
		name string
		id   int
	}{{"CLS", v.CLS}, {"SEP", v.SEP}, {"MASK", v.MASK}, {"PAD", v.PAD}} {
		if s.id < 0 || s.id >= v.Size {
			return fmt.Errorf("data: %s id %d is outside the vocabulary [0, %d)", s.name, s.id, v.Size)
		}
		if other, dup := seen[s.id]; dup {
			return fmt.Errorf("data: %s and %s share id %d", other, s.name, s.id)
		}
		seen[s.id] = s.name
	}
	return nil
}

// special reports whether id is one of the special ids, which masking never
// selects.
func (v *Vocab) special(id int32) bool {
	i := int(id)
	return i == v.CLS || i == v.SEP || i == v.PAD || i == v.MASK
}
