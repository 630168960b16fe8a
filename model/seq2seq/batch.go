package seq2seq

import "fmt"

// Batch is a padded batch of sentence pairs, as Forward reads it.
type Batch struct {
	B, S, T int
	Src     []int32   // [B, S] source ids, EOS, then PadID
	SrcMask []float32 // [B, S] 1 for a real token (EOS included), 0 for padding
	DecIn   []int32   // [B, T] BOS y_1 … y_n, then PadID
	Labels  []int32   // [B, T] y_1 … y_n EOS, then −1 (ignored by the loss); nil: no loss
}

// NewBatch pads sentence pairs: each source gets EOS appended (as fairseq
// does), each target is shifted right behind BOS for the decoder's input and
// ends with EOS in the labels. tgt may be nil (Labels and DecIn are then nil:
// an encoder-only batch). Ids must lie in [0, VocabSize).
func NewBatch(cfg Config, src, tgt [][]int32) (*Batch, error) {
	if len(src) == 0 {
		return nil, fmt.Errorf("seq2seq: empty batch")
	}
	if tgt != nil && len(tgt) != len(src) {
		return nil, fmt.Errorf("seq2seq: %d sources but %d targets", len(src), len(tgt))
	}
	b := &Batch{B: len(src)}
	for i, s := range src {
		b.S = max(b.S, len(s)+1)
		if err := checkIDs(cfg, "source", i, s); err != nil {
			return nil, err
		}
	}
	b.Src, b.SrcMask = make([]int32, b.B*b.S), make([]float32, b.B*b.S)
	for i, s := range src {
		row := b.Src[i*b.S : (i+1)*b.S]
		copy(row, s)
		row[len(s)] = int32(cfg.EOSID)
		for j := range row {
			if j <= len(s) {
				b.SrcMask[i*b.S+j] = 1
			} else {
				row[j] = int32(cfg.PadID)
			}
		}
	}
	if tgt == nil {
		return b, nil
	}
	for i, t := range tgt {
		b.T = max(b.T, len(t)+1)
		if err := checkIDs(cfg, "target", i, t); err != nil {
			return nil, err
		}
	}
	b.DecIn, b.Labels = make([]int32, b.B*b.T), make([]int32, b.B*b.T)
	for i, t := range tgt {
		in, lab := b.DecIn[i*b.T:(i+1)*b.T], b.Labels[i*b.T:(i+1)*b.T]
		in[0] = int32(cfg.BOSID)
		copy(in[1:], t)
		copy(lab, t)
		lab[len(t)] = int32(cfg.EOSID)
		for j := len(t) + 1; j < b.T; j++ {
			in[j], lab[j] = int32(cfg.PadID), -1
		}
	}
	return b, nil
}

func checkIDs(cfg Config, side string, i int, ids []int32) error {
	for j, id := range ids {
		if id < 0 || int(id) >= cfg.VocabSize {
			return fmt.Errorf("seq2seq: %s %d, token %d: id %d is outside the vocabulary [0, %d)", side, i, j, id, cfg.VocabSize)
		}
	}
	return nil
}
