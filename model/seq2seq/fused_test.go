package seq2seq

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/tensor"
)

// fusedCase is a model and a batch for the fused-attention tests: the
// tiny model, and one whose sources (up to 600 tokens, padded from 3) and
// targets (up to 201) break the fused kernel's 192×512 forward and
// 128×128 backward tiles.
type fusedCase struct {
	name string
	m    *Model
	b    *Batch
}

func fusedCases(t *testing.T) []fusedCase {
	var cs []fusedCase
	for _, pos := range []string{Rotary, Sinusoidal} {
		cfg := tinyConfig(pos)
		cfg.Dropout = 0.2 // on in training only
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m.Init(5)
		cs = append(cs, fusedCase{"tiny/" + pos, m, tinyBatch(t, cfg)})

		cfg = Config{VocabSize: 37, DModel: 32, Heads: 2, FFN: 48, EncoderLayers: 2, DecoderLayers: 2, Position: pos,
			Dropout: 0.1, LabelSmooth: 0.1, PadID: 0, BOSID: 1, EOSID: 2, LayerNormEps: 1e-5, Activation: "gelu"}
		if m, err = New(cfg); err != nil {
			t.Fatal(err)
		}
		m.Init(6)
		r := testutil.Rand(7)
		seq := func(n int) []int32 {
			s := make([]int32, n)
			for i := range s {
				s[i] = int32(3 + r.IntN(cfg.VocabSize-3))
			}
			return s
		}
		b, err := NewBatch(cfg, [][]int32{seq(599), seq(3), seq(250)}, [][]int32{seq(200), seq(0), seq(37)})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, fusedCase{"long/" + pos, m, b})
	}
	return cs
}

// withFused runs f with the fused kernels on (at every length in training
// too) or off (the saved-probability kernels everywhere).
func withFused(on bool, f func()) {
	defer func(off bool, minT int) { fusedOff, fusedTrainMinT = off, minT }(fusedOff, fusedTrainMinT)
	fusedOff, fusedTrainMinT = !on, 0
	f()
}

// TestFusedInferenceEqualsReference: a pass without training (the
// encoder's self-attention, the decoder's causal self-attention over the
// whole target, cross-attention of T queries over S padded keys) gives,
// through the fused kernels, the logits, loss and encoder output of the
// saved-probability kernels within float32 rounding, and keeps neither
// probabilities nor log-sum-exps.
func TestFusedInferenceEqualsReference(t *testing.T) {
	ctx := context.Background()
	for _, c := range fusedCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var want, got *Pass
			var wantEnc, gotEnc *Encoded
			src := sources(c.b)
			run := func(on bool) (p *Pass, e *Encoded) {
				withFused(on, func() {
					var err error
					if p, err = c.m.Forward(ctx, c.b, Options{}); err != nil {
						t.Fatal(err)
					}
					if e, err = c.m.Encode(ctx, src); err != nil {
						t.Fatal(err)
					}
				})
				return p, e
			}
			want, wantEnc = run(false)
			got, gotEnc = run(true)
			// measured: at most 1.9e-6 on logits up to 6 in magnitude (4 ulp)
			testutil.AssertClose(t, "logits", got.Logits, want.Logits, 1e-5, 1e-5)
			testutil.AssertClose(t, "encoder output", gotEnc.Out, wantEnc.Out, 1e-5, 1e-5)
			for l := range c.m.Dec {
				testutil.AssertClose(t, fmt.Sprintf("layer %d cross keys", l), gotEnc.K[l], wantEnc.K[l], 1e-5, 1e-5)
			}
			if math.Abs(got.Loss-want.Loss) > 1e-5*math.Max(1, want.Loss) {
				t.Errorf("loss %v, reference %v", got.Loss, want.Loss)
			}
			for l, a := range got.dec {
				if a.self.probs != nil || a.self.lse != nil || a.cross.probs != nil || a.cross.lse != nil {
					t.Fatalf("decoder layer %d kept attention state in inference", l)
				}
			}
		})
	}
}

// sources recovers b's source ids (without EOS and padding).
func sources(b *Batch) [][]int32 {
	src := make([][]int32, b.B)
	for i := range src {
		n := 0
		for _, m := range b.SrcMask[i*b.S : (i+1)*b.S] {
			if m != 0 {
				n++
			}
		}
		src[i] = b.Src[i*b.S : i*b.S+n-1]
	}
	return src
}

// TestFusedTrainingEqualsReference: with the fused kernels in training
// (fusedTrainMinT 0), dropout on, the loss and every parameter's gradient
// equal those of the saved-probability kernels (the same dropout masks),
// and the pass keeps log-sum-exps instead of probabilities.
func TestFusedTrainingEqualsReference(t *testing.T) {
	ctx := context.Background()
	for _, c := range fusedCases(t) {
		t.Run(c.name, func(t *testing.T) {
			run := func(on bool) (*Pass, [][]float32) {
				var p *Pass
				withFused(on, func() {
					c.m.ZeroGrad()
					var err error
					if p, err = c.m.Forward(ctx, c.b, Options{Train: true, Seed: 3}); err != nil {
						t.Fatal(err)
					}
					if err := p.Backward(ctx); err != nil {
						t.Fatal(err)
					}
				})
				g := make([][]float32, len(c.m.Params()))
				for i, prm := range c.m.Params() {
					g[i] = append([]float32(nil), prm.Grad...)
				}
				return p, g
			}
			p0, want := run(false)
			p1, got := run(true)
			if math.Abs(p1.Loss-p0.Loss) > 1e-5*math.Max(1, p0.Loss) {
				t.Errorf("loss %v, reference %v", p1.Loss, p0.Loss)
			}
			if a := p1.enc[0].attn; a.lse == nil || a.probs != nil {
				t.Fatalf("fused encoder layer: lse %d, probs %d floats; want lse only", len(a.lse), len(a.probs))
			}
			if a := p1.dec[0]; a.self.lse == nil || a.self.probs != nil || a.cross.lse == nil || a.cross.probs != nil {
				t.Fatal("fused decoder layer kept probabilities")
			}
			if a := p0.dec[0]; a.self.probs == nil || a.cross.probs == nil {
				t.Fatal("reference decoder layer kept no probabilities")
			}
			for i, prm := range c.m.Params() {
				d, at := tensor.MaxAbsDiff(got[i], want[i])
				if scale := math.Max(tensor.MaxAbs(want[i]), 1e-6); d/scale > 1e-4 {
					t.Errorf("%s: max |diff| %.3g at %d (fused %v, reference %v) = %.3g of the largest entry", prm.Name, d, at, got[i][at], want[i][at], d/scale)
				}
			}
		})
	}
}

// TestPrefillEqualsSteps: a decoder prefilled with whole prompts in one
// pass (the fused causal self-attention over the prompt, aligned to the
// cache) gives the logits and cache of feeding them one token at a time,
// and of Forward at the prompt's last position; decoding then goes on the
// same. Rows read sources of different lengths (padding on the source
// side); the prompts (37 tokens) cross no tile, the long ones (250) do.
func TestPrefillEqualsSteps(t *testing.T) {
	ctx := context.Background()
	for _, pos := range []string{Rotary, Sinusoidal} {
		for _, L := range []int{2, 37, 250} {
			t.Run(fmt.Sprintf("%s_L%d", pos, L), func(t *testing.T) {
				cfg := Config{VocabSize: 37, DModel: 32, Heads: 2, FFN: 48, EncoderLayers: 2, DecoderLayers: 2, Position: pos,
					Dropout: 0.1, LabelSmooth: 0.1, PadID: 0, BOSID: 1, EOSID: 2, LayerNormEps: 1e-5}
				m, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				m.Init(9)
				r := testutil.Rand(10)
				seq := func(n int) []int32 {
					s := make([]int32, n)
					for i := range s {
						s[i] = int32(3 + r.IntN(cfg.VocabSize-3))
					}
					return s
				}
				src := [][]int32{seq(9), seq(600), seq(1)}
				enc, err := m.Encode(ctx, src)
				if err != nil {
					t.Fatal(err)
				}
				rows := []int{0, 1, 2, 1}
				prompts := make([][]int32, len(rows))
				for i := range prompts {
					prompts[i] = append([]int32{int32(cfg.BOSID)}, seq(L-1)...)
				}
				d := m.NewDecoder(enc, rows)
				got, err := d.Prefill(ctx, prompts, generate.Room{Beams: 1, NewTokens: 3})
				if err != nil {
					t.Fatal(err)
				}
				st, err := m.NewState(enc, rows, 4)
				if err != nil {
					t.Fatal(err)
				}
				var want []float32
				tok := make([]int32, len(rows))
				for p := 0; p < L; p++ {
					for i := range prompts {
						tok[i] = prompts[i][p]
					}
					if want, err = m.Step(st, tok); err != nil {
						t.Fatal(err)
					}
				}
				testutil.AssertClose(t, "prefill logits", got, want, 1e-5, 1e-5)
				C := cfg.DModel
				for l := range m.Dec {
					for i := range rows {
						testutil.AssertClose(t, fmt.Sprintf("layer %d row %d cached keys", l, i), d.st.k[l][i*d.st.cap*C:(i*d.st.cap+L)*C], st.k[l][i*st.cap*C:(i*st.cap+L)*C], 1e-5, 1e-5)
						testutil.AssertClose(t, fmt.Sprintf("layer %d row %d cached values", l, i), d.st.v[l][i*d.st.cap*C:(i*d.st.cap+L)*C], st.v[l][i*st.cap*C:(i*st.cap+L)*C], 1e-5, 1e-5)
					}
				}
				// Forward, teacher-forced on the prompts (without their BOS, which NewBatch adds)
				tgt := make([][]int32, len(rows))
				srcRows := make([][]int32, len(rows))
				for i, rw := range rows {
					tgt[i], srcRows[i] = prompts[i][1:], src[rw]
				}
				b, err := NewBatch(cfg, srcRows, tgt)
				if err != nil {
					t.Fatal(err)
				}
				p, err := m.Forward(ctx, b, Options{})
				if err != nil {
					t.Fatal(err)
				}
				V := cfg.VocabSize
				for i := range rows {
					testutil.AssertClose(t, fmt.Sprintf("row %d vs Forward", i), got[i*V:(i+1)*V], p.Logits[(i*b.T+L-1)*V:(i*b.T+L)*V], 1e-5, 1e-5)
				}
				for i := range tok {
					tok[i] = int32(3 + i)
				}
				next, err := d.Step(ctx, tok)
				if err != nil {
					t.Fatal(err)
				}
				ref, err := m.Step(st, tok)
				if err != nil {
					t.Fatal(err)
				}
				testutil.AssertClose(t, "the step after", next, ref, 1e-5, 1e-5)
			})
		}
	}
}
