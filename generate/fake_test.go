package generate

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"slices"
)

// history is the fake decoders' cache: each row's tokens so far.
type history struct {
	rows  [][]int32
	steps int
}

func (h *history) prefill(prompts [][]int32) {
	h.rows = nil
	for _, p := range prompts {
		h.rows = append(h.rows, slices.Clone(p))
	}
}

func (h *history) step(ctx context.Context, tokens []int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.steps++
	for i, t := range tokens {
		h.rows[i] = append(h.rows[i], t)
	}
	return nil
}

func (h *history) Reorder(idx []int) {
	rows := make([][]int32, len(idx))
	for i, j := range idx {
		rows[i] = slices.Clone(h.rows[j])
	}
	h.rows = rows
}

// chain is a fake Decoder whose logits for a row's next token are a fixed
// table's row of the row's last token (a Markov chain): hand computations
// follow it step by step.
type chain struct {
	history
	table [][]float32 // [V][V]
	pad   int32
}

func (c *chain) VocabSize() int { return len(c.table) }
func (c *chain) PadID() int32   { return c.pad }

func (c *chain) logits() []float32 {
	var out []float32
	for _, r := range c.rows {
		out = append(out, c.table[r[len(r)-1]]...)
	}
	return out
}

func (c *chain) Prefill(_ context.Context, prompts [][]int32, _ Room) ([]float32, error) {
	c.prefill(prompts)
	return c.logits(), nil
}

func (c *chain) Step(ctx context.Context, tokens []int32) ([]float32, error) {
	if err := c.step(ctx, tokens); err != nil {
		return nil, err
	}
	return c.logits(), nil
}

// hashed is a fake Decoder whose logits are a pseudo-random function of a
// row's whole history, drawn from a few levels so that ties are common:
// beams that differ anywhere get different logits.
type hashed struct {
	history
	V, levels int
	seed      uint64
}

func (h *hashed) VocabSize() int { return h.V }
func (h *hashed) PadID() int32   { return 0 }

func (h *hashed) logits() []float32 {
	var out []float32
	for _, r := range h.rows {
		f := fnv.New64a()
		for _, t := range r {
			f.Write([]byte{byte(t), byte(t >> 8)})
		}
		rng := rand.New(rand.NewPCG(f.Sum64(), h.seed))
		for v := 0; v < h.V; v++ {
			out = append(out, float32(rng.IntN(h.levels))/2)
		}
	}
	return out
}

func (h *hashed) Prefill(_ context.Context, prompts [][]int32, _ Room) ([]float32, error) {
	h.prefill(prompts)
	return h.logits(), nil
}

func (h *hashed) Step(ctx context.Context, tokens []int32) ([]float32, error) {
	if err := h.step(ctx, tokens); err != nil {
		return nil, err
	}
	return h.logits(), nil
}
