package seq2seq

import (
	"context"
	"errors"
	"testing"
)

// DefaultConfig is a valid Transformer-base: about Vaswani et al.'s 65M
// parameters (table 3; 63.1M here, with the q, k, v biases and one shared
// embedding of 37000 × 512).
func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := c.NumParamsFor(); n < 60e6 || n > 66e6 {
		t.Errorf("Transformer-base has %d parameters, want about 65M", n)
	}
	if c.Position != Rotary || c.DModel != 512 || c.Heads != 8 || c.FFN != 2048 || c.EncoderLayers != 6 || c.DecoderLayers != 6 {
		t.Errorf("DefaultConfig %+v is not Transformer-base with RoPE", c)
	}
}

// A context that has ended stops Encode, Forward and Backward with its error.
func TestForwardBackwardContext(t *testing.T) {
	m, err := New(tinyConfig(Rotary))
	if err != nil {
		t.Fatal(err)
	}
	m.Init(1)
	b := tinyBatch(t, m.Config)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Forward(done, b, Options{Train: true, Seed: 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("Forward with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := m.Encode(done, [][]int32{{3, 4, 5}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Encode with a cancelled context: %v, want context.Canceled", err)
	}
	p, err := m.Forward(context.Background(), b, Options{Train: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Backward(done); !errors.Is(err, context.Canceled) {
		t.Errorf("Backward with a cancelled context: %v, want context.Canceled", err)
	}
	for _, q := range m.Params() {
		for _, g := range q.Grad {
			if g != 0 {
				t.Fatalf("Backward with a cancelled context wrote %s's gradient", q.Name)
			}
		}
	}
}
