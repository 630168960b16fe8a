package seq2seq

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// TestCachedStepEqualsForward: the logits of cached decoding, one token at
// a time, equal those of the full (uncached) forward pass at every position,
// for rows of different source lengths.
func TestCachedStepEqualsForward(t *testing.T) {
	for _, pos := range []string{Rotary, Sinusoidal} {
		t.Run(pos, func(t *testing.T) {
			cfg := tinyConfig(pos)
			cfg.Dropout = 0.3 // off outside training: must not matter
			m, _ := New(cfg)
			m.Init(7)
			src := [][]int32{{3, 4, 5, 6, 7}, {8, 9}}
			tgt := [][]int32{{5, 6, 7, 8}, {9, 10, 3, 4}}
			b, err := NewBatch(cfg, src, tgt)
			if err != nil {
				t.Fatal(err)
			}
			p, err := m.Forward(context.Background(), b, Options{})
			if err != nil {
				t.Fatal(err)
			}
			enc, err := m.Encode(context.Background(), src)
			if err != nil {
				t.Fatal(err)
			}
			st, err := m.NewState(enc, []int{0, 1}, 2) // grows on the way
			if err != nil {
				t.Fatal(err)
			}
			V := cfg.VocabSize
			for tt := 0; tt < b.T; tt++ {
				tok := []int32{b.DecIn[tt], b.DecIn[b.T+tt]}
				got, err := m.Step(st, tok)
				if err != nil {
					t.Fatal(err)
				}
				for r := 0; r < 2; r++ {
					want := p.Logits[(r*b.T+tt)*V : (r*b.T+tt+1)*V]
					testutil.AssertClose(t, fmt.Sprintf("row %d position %d", r, tt), got[r*V:(r+1)*V], want, 1e-5, 1e-5)
				}
			}
		})
	}
}

// TestReorder: a reordered cache decodes as if each row had been decoded
// from the start as the row it was copied from.
func TestReorder(t *testing.T) {
	cfg := tinyConfig(Rotary)
	m, _ := New(cfg)
	m.Init(8)
	enc, _ := m.Encode(context.Background(), [][]int32{{3, 4, 5}})
	st, _ := m.NewState(enc, []int{0, 0}, 4)
	m.Step(st, []int32{1, 1})
	m.Step(st, []int32{5, 6})
	st.Reorder([]int{1, 1})
	got, _ := m.Step(st, []int32{7, 8})
	ref, _ := m.NewState(enc, []int{0}, 4)
	m.Step(ref, []int32{1})
	m.Step(ref, []int32{6})
	V := cfg.VocabSize
	for r, tok := range []int32{7, 8} {
		r2, _ := m.NewState(enc, []int{0}, 4)
		m.Step(r2, []int32{1})
		m.Step(r2, []int32{6})
		want, _ := m.Step(r2, []int32{tok})
		testutil.AssertClose(t, fmt.Sprintf("row %d", r), got[r*V:(r+1)*V], want, 1e-6, 1e-6)
	}
}

// trained returns a tiny model trained briefly on copying, so that its
// outputs are not uniform and decoding has real choices to make.
func trainedCopy(t testing.TB, pos string) (*Model, [][]int32) {
	cfg := tinyConfig(pos)
	cfg.DModel, cfg.FFN = 16, 32
	m, _ := New(cfg)
	m.Init(9)
	r := testutil.Rand(10)
	var src [][]int32
	for i := 0; i < 6; i++ {
		n := 2 + r.IntN(4)
		s := make([]int32, n)
		for j := range s {
			s[j] = int32(3 + r.IntN(cfg.VocabSize-3))
		}
		src = append(src, s)
	}
	b, _ := NewBatch(cfg, src, src)
	for step := 0; step < 30; step++ {
		m.ZeroGrad()
		p, _ := m.Forward(context.Background(), b, Options{Train: true, Seed: uint64(step)})
		p.Backward(context.Background())
		for _, prm := range m.Params() {
			for i, g := range prm.Grad {
				prm.Data[i] -= 0.05 * g
			}
		}
	}
	return m, src
}

// TestBeamOneIsGreedy: beam search with one beam returns greedy decoding's
// output, for any length penalty.
func TestBeamOneIsGreedy(t *testing.T) {
	for _, pos := range []string{Rotary, Sinusoidal} {
		m, src := trainedCopy(t, pos)
		greedy, err := m.Translate(context.Background(), src, DecodeOptions{Beam: 1, MaxExtra: 5})
		if err != nil {
			t.Fatal(err)
		}
		enc, _ := m.Encode(context.Background(), src)
		for _, alpha := range []float64{0, 0.6} {
			for r := range src {
				got, err := m.beamSearch(context.Background(), enc, r, DecodeOptions{Beam: 1, Alpha: alpha, MaxExtra: 5})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, greedy[r]) {
					t.Errorf("%s α %v source %d: beam 1 %v, greedy %v", pos, alpha, r, got, greedy[r])
				}
			}
		}
	}
}

// TestBeamFindsBetter: with 4 beams the chosen output scores at least as
// well (log P/lp) as greedy's, by the model's own full forward pass.
func TestBeamFindsBetter(t *testing.T) {
	m, src := trainedCopy(t, Rotary)
	o := DecodeOptions{Beam: 4, Alpha: 0.6, MaxExtra: 5}
	beam, err := m.Translate(context.Background(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	greedy, _ := m.Translate(context.Background(), src, DecodeOptions{Beam: 1, MaxExtra: 5})
	score := func(s, y []int32) float64 {
		b, _ := NewBatch(m.Config, [][]int32{s}, [][]int32{y})
		p, _ := m.Forward(context.Background(), b, Options{})
		lp := 0.0
		for tt := 0; tt < b.T; tt++ {
			lp += logSoftmax(p.Logits[tt*m.Config.VocabSize : (tt+1)*m.Config.VocabSize])[b.Labels[tt]]
		}
		return lp / lengthPenalty(len(y)+1, o.Alpha)
	}
	for r := range src {
		sb, sg := score(src[r], beam[r]), score(src[r], greedy[r])
		if sb < sg-1e-4 {
			t.Errorf("source %d: beam %v scores %.5f below greedy %v at %.5f", r, beam[r], sb, greedy[r], sg)
		}
	}
}
