package pipeline

import (
	"context"
	"fmt"
	"sort"

	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// Prediction is one candidate for a [MASK] position.
type Prediction struct {
	Token    string  `json:"token_str"`
	ID       int     `json:"token"`
	Score    float64 `json:"score"`    // softmax probability over the vocabulary
	Sequence string  `json:"sequence"` // the text with this token in place of the mask (see FillMask)
}

// FillMask predicts each [MASK] of text with the masked-LM model: the topK
// most probable tokens per mask, as HF's fill-mask pipeline returns them.
// As HF's, a candidate's sequence is decoded without special tokens when the
// text has one mask, and with them (so the other masks, [CLS] and [SEP]
// show) when it has several.
// The model must have the masked-LM head. Text without a mask is an error.
// The head runs at the masks' positions only (roformer.Model.LMLogits), so
// a request holds masks × vocabulary logits, not tokens × vocabulary.
func FillMask(ctx context.Context, m *roformer.Model, tok *tokenizer.Tokenizer, text string, topK int) ([][]Prediction, error) {
	if m.LM == nil {
		return nil, fmt.Errorf("pipeline: fill-mask needs the masked-lm head, the model has %s", m.Head)
	}
	if topK < 1 {
		return nil, fmt.Errorf("pipeline: top-k %d must be at least 1", topK)
	}
	enc, err := tok.Encode(text, tokenizer.EncodeOptions{})
	if err != nil {
		return nil, err
	}
	T := len(enc.IDs)
	if T == 0 {
		return nil, fmt.Errorf("pipeline: the text gives no tokens")
	}
	ids := make([]int32, T)
	var masks []int
	for i, id := range enc.IDs {
		ids[i] = int32(id)
		if id == tok.MaskID() {
			masks = append(masks, i)
		}
	}
	if len(masks) == 0 {
		return nil, fmt.Errorf("pipeline: no [MASK] token in %q", text)
	}
	if V := m.Config.VocabSize; tok.VocabSize() > V {
		return nil, fmt.Errorf("pipeline: the tokenizer has %d tokens, the model only %d", tok.VocabSize(), V)
	}
	// The encoder over the text, and the LM head at the masks only: masks
	// × vocabulary logits, not tokens × vocabulary (the same values).
	out, err := m.Forward(ctx, &roformer.Batch{InputIDs: ids, B: 1, T: T}, nil, roformer.Options{SkipHead: true})
	if err != nil {
		return nil, err
	}
	H, V := m.Config.HiddenSize, m.Config.VocabSize
	hidden, all := make([]float32, len(masks)*H), make([]float32, len(masks)*V)
	for k, pos := range masks {
		copy(hidden[k*H:(k+1)*H], out.LastHiddenState.Data[pos*H:(pos+1)*H])
	}
	if err := m.LMLogits(all, hidden, len(masks)); err != nil {
		return nil, err
	}
	res := make([][]Prediction, len(masks))
	for k, pos := range masks {
		logits := all[k*V : (k+1)*V]
		probs := kernels.Softmax64(logits)
		order := make([]int, V)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return logits[order[a]] > logits[order[b]] })
		for _, id := range order[:min(topK, V)] {
			s, _ := tok.IDToToken(id)
			filled := append([]int(nil), enc.IDs...)
			filled[pos] = id
			res[k] = append(res[k], Prediction{Token: s, ID: id, Score: probs[id],
				Sequence: tok.Decode(filled, len(masks) == 1)})
		}
	}
	return res, nil
}
