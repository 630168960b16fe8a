package roformer

import (
	"context"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/model/nn"
)

// refForward is an independent float64 re-computation of the base model
// written straight from the formulas of the fixture README (like its
// numpy_check.py): no kernels, no BLAS, RoPE angles from math.Sin/Cos of
// p / 10000^(2i/d) for ANY position. It returns the last hidden state.
func refForward(m *Model, ids, types, mask []int32, B, T int, causal bool) []float64 {
	c := &m.Config
	E, H, I, NH := c.EmbeddingSize, c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads
	d := H / NH
	eps := c.LayerNormEps
	ln := func(x []float64, w, b []float32) {
		n := len(w)
		for r := 0; r < len(x)/n; r++ {
			row := x[r*n : r*n+n]
			mu, v := 0.0, 0.0
			for _, a := range row {
				mu += a
			}
			mu /= float64(n)
			for _, a := range row {
				v += (a - mu) * (a - mu)
			}
			v /= float64(n)
			for i := range row {
				row[i] = (row[i]-mu)/math.Sqrt(v+eps)*float64(w[i]) + float64(b[i])
			}
		}
	}
	lin := func(x []float64, in int, l nn.Linear) []float64 {
		out := l.W.Shape[0]
		rows := len(x) / in
		y := make([]float64, rows*out)
		for r := 0; r < rows; r++ {
			for o := 0; o < out; o++ {
				s := float64(l.B.Data[o])
				for k := 0; k < in; k++ {
					s += x[r*in+k] * float64(l.W.Data[o*in+k])
				}
				y[r*out+o] = s
			}
		}
		return y
	}
	act := func(x float64) float64 { return m.act.F64(x) }
	rot := func(x []float64) { // [B·T, H], interleaved pairs per head
		for bt := 0; bt < B*T; bt++ {
			p := float64(bt % T)
			for h := 0; h < NH; h++ {
				v := x[bt*H+h*d : bt*H+h*d+d]
				for i := 0; i < d/2; i++ {
					a := p / math.Pow(10000, float64(2*i)/float64(d))
					s, co := math.Sin(a), math.Cos(a)
					x0, x1 := v[2*i], v[2*i+1]
					v[2*i], v[2*i+1] = x0*co-x1*s, x1*co+x0*s
				}
			}
		}
	}
	emb := &m.Encoder.Embeddings
	x := make([]float64, B*T*E)
	for r := 0; r < B*T; r++ {
		for i := 0; i < E; i++ {
			x[r*E+i] = float64(emb.Word.Data[int(ids[r])*E+i]) + float64(emb.TokenType.Data[int(types[r])*E+i])
		}
	}
	ln(x, emb.LN.W.Data, emb.LN.B.Data)
	if m.Encoder.Project != nil {
		x = lin(x, E, *m.Encoder.Project)
	}
	for _, L := range m.Encoder.Layers {
		q, k, v := lin(x, H, L.Query), lin(x, H, L.Key), lin(x, H, L.Value)
		rot(q)
		rot(k)
		if c.RotaryValue {
			rot(v)
		}
		ctx := make([]float64, B*T*H)
		for b := 0; b < B; b++ {
			for h := 0; h < NH; h++ {
				for i := 0; i < T; i++ {
					s := make([]float64, T)
					mx := math.Inf(-1)
					for j := 0; j < T; j++ {
						dot := 0.0
						for e := 0; e < d; e++ {
							dot += q[(b*T+i)*H+h*d+e] * k[(b*T+j)*H+h*d+e]
						}
						mm := float64(mask[b*T+j])
						if causal && j > i {
							mm = 0
						}
						s[j] = dot/math.Sqrt(float64(d)) + (1-mm)*(-math.MaxFloat32)
						mx = math.Max(mx, s[j])
					}
					sum := 0.0
					for j := range s {
						s[j] = math.Exp(s[j] - mx)
						sum += s[j]
					}
					for e := 0; e < d; e++ {
						a := 0.0
						for j := 0; j < T; j++ {
							a += s[j] / sum * v[(b*T+j)*H+h*d+e]
						}
						ctx[(b*T+i)*H+h*d+e] = a
					}
				}
			}
		}
		a := lin(ctx, H, L.AttnOut)
		for i := range a {
			a[i] += x[i]
		}
		ln(a, L.AttnLN.W.Data, L.AttnLN.B.Data)
		f := lin(a, H, L.FFIn)
		for i := range f {
			f[i] = act(f[i])
		}
		o := lin(f, I, L.FFOut)
		for i := range o {
			o[i] += a[i]
		}
		ln(o, L.OutputLN.W.Data, L.OutputLN.B.Data)
		x = o
	}
	return x
}

// Inputs longer than max_position_embeddings (HF raises an error there) run,
// and equal the formula computed independently in float64.
func TestLongerThanMaxPositions(t *testing.T) {
	for _, causal := range []bool{false, true} {
		cfg := tinyConfig(func(c *Config) {
			c.MaxPositionEmbeddings = 8
			c.HiddenSize, c.EmbeddingSize, c.NumAttentionHeads = 16, 12, 2
		})
		m := randomModel(t, cfg, HeadBase, 11)
		for _, p := range m.Params() { // keep attention sharp but sane
			for i := range p.Data {
				p.Data[i] *= 0.7
			}
		}
		B, T := 2, 37 // > 4× max_position_embeddings
		r := testutil.Rand(12)
		ids, types, mask := make([]int32, B*T), make([]int32, B*T), make([]int32, B*T)
		for i := range ids {
			ids[i] = int32(r.IntN(10))
			types[i] = int32(r.IntN(2))
			mask[i] = 1
		}
		for j := 30; j < T; j++ { // right padding in row 2
			mask[T+j] = 0
		}
		out, err := m.Forward(context.Background(), &Batch{InputIDs: ids, TokenTypeIDs: types, AttentionMask: mask, B: B, T: T}, nil, Options{Causal: causal})
		if err != nil {
			t.Fatal(err)
		}
		want := refForward(m, ids, types, mask, B, T, causal)
		worst := 0.0
		for i, v := range out.LastHiddenState.Data {
			worst = math.Max(worst, math.Abs(float64(v)-want[i]))
		}
		if worst > tolHidden {
			t.Errorf("causal %v: T=%d > max_position_embeddings %d: max |diff| from the float64 formula %.3g > %g", causal, T, cfg.MaxPositionEmbeddings, worst, tolHidden)
		}
		t.Logf("causal %v: T=%d, max |diff| from the float64 formula %.3g", causal, T, worst)
	}
}

// The float64 reference agrees with HF on the fixtures, so it is a fair judge.
func TestReferenceMatchesFixtures(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.Case, func(t *testing.T) {
			l, err := Load(f.dir, HeadBase, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b := f.batch()
			if b.B*b.T > 200 {
				t.Skip("large case: the O(T²) float64 reference is slow")
			}
			got := refForward(l.Model, b.InputIDs, b.TokenTypeIDs, b.AttentionMask, b.B, b.T, false)
			worst := 0.0
			for i, v := range f.Outputs.RoFormerModel.LastHiddenState.Data {
				worst = math.Max(worst, math.Abs(float64(v)-got[i]))
			}
			if worst > tolHidden {
				t.Errorf("reference vs HF: max |diff| %.3g", worst)
			}
		})
	}
}
