package optim

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/tensor"
)

// refAdamW is an independent float64 transcription of Loshchilov & Hutter's
// Algorithm 2 in PyTorch's form (decay first, then the bias-corrected Adam
// step), used to check AdamW.
func refAdamW(p, m, v, g []float64, t int, lr, b1, b2, eps, wd float64) {
	for i := range p {
		p[i] -= lr * wd * p[i]
		m[i] = b1*m[i] + (1-b1)*g[i]
		v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
		mhat := m[i] / (1 - math.Pow(b1, float64(t)))
		vhat := v[i] / (1 - math.Pow(b2, float64(t)))
		p[i] -= lr * mhat / (math.Sqrt(vhat) + eps)
	}
}

func TestAdamWMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wd      float64
		workers int
	}{
		{"no_decay", 0, 1},
		{"decay", 0.1, 1},
		{"decay_parallel", 0.1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tensor.NewParam("encoder.dense.weight", 2, 3)
			b := tensor.NewParam("encoder.dense.bias", 3)
			copy(w.Data, []float32{0.5, -1.25, 2, 0.125, -0.75, 3})
			copy(b.Data, []float32{-0.5, 0.25, 1})
			target := []float64{1, 2, -1, 0.5, 0, -2, 0.3, -0.4, 0.6}
			cfg := DefaultAdamWConfig(tc.wd)
			cfg.Workers = tc.workers
			o, err := NewAdamW([]*tensor.Param{w, b}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Reference state: both params flattened, with their decay flags.
			var rp, rm, rv []float64
			for _, x := range append(append([]float32{}, w.Data...), b.Data...) {
				rp = append(rp, float64(x))
			}
			rm, rv = make([]float64, len(rp)), make([]float64, len(rp))
			lrs := []float64{1e-2, 5e-3, 2e-2}
			for step, lr := range lrs {
				// Gradient of ½‖p − target‖² at the current (float32) point.
				rg := make([]float64, len(rp))
				for i, p := range append(append([]float32{}, w.Data...), b.Data...) {
					g := float32(float64(p) - target[i])
					if i < 6 {
						w.Grad[i] = g
					} else {
						b.Grad[i-6] = g
					}
					rg[i] = float64(g)
				}
				o.Step(lr)
				refAdamW(rp[:6], rm[:6], rv[:6], rg[:6], step+1, lr, 0.9, 0.999, 1e-8, tc.wd)
				refAdamW(rp[6:], rm[6:], rv[6:], rg[6:], step+1, lr, 0.9, 0.999, 1e-8, 0) // bias: no decay
				// Keep the reference on the float32 trajectory so errors do not compound.
				got := append(append([]float32{}, w.Data...), b.Data...)
				for i := range rp {
					if d := math.Abs(float64(got[i]) - rp[i]); d > 1e-6*math.Max(1, math.Abs(rp[i])) {
						t.Errorf("step %d elem %d: got %.9g want %.9g (diff %.3g)", step+1, i, got[i], rp[i], d)
					}
					rp[i] = float64(got[i])
				}
			}
			if o.StepCount() != 3 {
				t.Errorf("StepCount = %d, want 3", o.StepCount())
			}
		})
	}
}

// TestAdamWFirstStep checks the closed form of the first update: with m, v
// starting at 0, mhat = g and vhat = g², so p moves by −lr·sign(g) (up to eps).
func TestAdamWFirstStep(t *testing.T) {
	p := tensor.NewParam("w", 3)
	copy(p.Data, []float32{1, 1, 1})
	copy(p.Grad, []float32{0.5, -3, 1e-3})
	o, err := NewAdamW([]*tensor.Param{p}, DefaultAdamWConfig(0))
	if err != nil {
		t.Fatal(err)
	}
	o.Step(0.1)
	for i, want := range []float32{0.9, 1.1, 0.9} {
		if math.Abs(float64(p.Data[i]-want)) > 1e-5 {
			t.Errorf("elem %d: got %v want %v", i, p.Data[i], want)
		}
	}
}

func TestDefaultDecay(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"roformer.encoder.layer.0.attention.self.query.weight", true},
		{"roformer.encoder.layer.0.attention.self.query.bias", false},
		{"roformer.encoder.layer.0.attention.output.LayerNorm.weight", false},
		{"roformer.encoder.layer.0.attention.output.LayerNorm.bias", false},
		{"roformer.embeddings.word_embeddings.weight", true},
		{"model.layer_norm.weight", false},
		{"cls.predictions.bias", false},
		{"cls.predictions.transform.dense.weight", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DefaultDecay(tc.name); got != tc.want {
				t.Errorf("DefaultDecay(%q) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

// TestDecayMaskApplied checks that with zero gradients only decayed
// parameters shrink, by exactly the factor 1 − lr·wd.
func TestDecayMaskApplied(t *testing.T) {
	w := tensor.NewParam("x.dense.weight", 2)
	b := tensor.NewParam("x.dense.bias", 2)
	ln := tensor.NewParam("x.LayerNorm.weight", 2)
	for _, p := range []*tensor.Param{w, b, ln} {
		copy(p.Data, []float32{2, -4})
	}
	o, err := NewAdamW([]*tensor.Param{w, b, ln}, DefaultAdamWConfig(0.5))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(o.Decayed()); got != "[true false false]" {
		t.Errorf("Decayed = %s", got)
	}
	o.Step(0.1)
	if w.Data[0] != float32(2*0.95) || w.Data[1] != float32(-4*0.95) {
		t.Errorf("weight got %v, want [1.9 -3.8]", w.Data)
	}
	for _, p := range []*tensor.Param{b, ln} {
		if p.Data[0] != 2 || p.Data[1] != -4 {
			t.Errorf("%s changed to %v", p.Name, p.Data)
		}
	}
}

func TestNewAdamWErrors(t *testing.T) {
	good := tensor.NewParam("a", 2)
	bad := &tensor.Param{Name: "b", Shape: []int{2}, Data: make([]float32, 2), Grad: make([]float32, 1)}
	for _, tc := range []struct {
		name   string
		params []*tensor.Param
		cfg    AdamWConfig
		want   string
	}{
		{"beta", []*tensor.Param{good}, AdamWConfig{Beta1: 1, Beta2: 0.9, Eps: 1e-8}, "betas"},
		{"eps", []*tensor.Param{good}, AdamWConfig{Beta1: 0.9, Beta2: 0.9}, "eps"},
		{"dup", []*tensor.Param{good, good}, DefaultAdamWConfig(0), `"a" given twice`},
		{"grad", []*tensor.Param{bad}, DefaultAdamWConfig(0), `"b" shape [2] has 2 values and 1 gradients`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewAdamW(tc.params, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestSchedules(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Schedule
		step int
		want float64
	}{
		{"constant_warm0", Schedule{Constant, 1, 10, 100}, 0, 0},
		{"constant_warm5", Schedule{Constant, 1, 10, 100}, 5, 0.5},
		{"constant_after", Schedule{Constant, 1, 10, 100}, 10, 1},
		{"constant_nowarm", Schedule{Constant, 2, 0, 100}, 0, 2},
		{"linear_0", Schedule{Linear, 1, 10, 110}, 0, 0},
		{"linear_warm", Schedule{Linear, 1, 10, 110}, 4, 0.4},
		{"linear_peak", Schedule{Linear, 1, 10, 110}, 10, 1},
		{"linear_mid", Schedule{Linear, 1, 10, 110}, 60, 0.5},
		{"linear_end", Schedule{Linear, 1, 10, 110}, 110, 0},
		{"linear_past", Schedule{Linear, 1, 10, 110}, 200, 0},
		{"linear_scaled", Schedule{Linear, 3e-4, 0, 100}, 25, 2.25e-4},
		{"cosine_peak", Schedule{Cosine, 1, 10, 110}, 10, 1},
		{"cosine_quarter", Schedule{Cosine, 1, 10, 110}, 35, 0.5 * (1 + math.Cos(math.Pi/4))},
		{"cosine_mid", Schedule{Cosine, 1, 10, 110}, 60, 0.5},
		{"cosine_end", Schedule{Cosine, 1, 10, 110}, 110, 0},
		{"cosine_past", Schedule{Cosine, 1, 10, 110}, 150, 0.5 * (1 + math.Cos(1.4*math.Pi))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.LR(tc.step); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("LR(%d) = %.15g, want %.15g", tc.step, got, tc.want)
			}
		})
	}
	if _, err := ParseSchedule("step"); err == nil || !strings.Contains(err.Error(), "valid: constant, linear, cosine") {
		t.Errorf("ParseSchedule(step) err = %v", err)
	}
}

func TestClipGradNorm(t *testing.T) {
	for _, tc := range []struct {
		name     string
		grads    [][]float32
		max      float64
		wantNorm float64
		wantG    [][]float32
	}{
		{"clipped", [][]float32{{3, 0}, {0, 4}}, 1, 5, [][]float32{{0.6, 0}, {0, 0.8}}},
		{"under", [][]float32{{3, 0}, {0, 4}}, 10, 5, [][]float32{{3, 0}, {0, 4}}},
		{"disabled", [][]float32{{3, 0}, {0, 4}}, 0, 5, [][]float32{{3, 0}, {0, 4}}},
		{"nan", [][]float32{{float32(math.NaN()), 0}, {0, 4}}, 1, math.NaN(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*tensor.Param
			for i, g := range tc.grads {
				p := tensor.NewParam(fmt.Sprint("p", i), len(g))
				copy(p.Grad, g)
				ps = append(ps, p)
			}
			norm := ClipGradNorm(ps, tc.max)
			if math.IsNaN(tc.wantNorm) {
				if !math.IsNaN(norm) {
					t.Errorf("norm = %v, want NaN", norm)
				}
				return
			}
			if math.Abs(norm-tc.wantNorm) > 1e-9 {
				t.Errorf("norm = %v, want %v", norm, tc.wantNorm)
			}
			for i, p := range ps {
				for j := range p.Grad {
					if math.Abs(float64(p.Grad[j]-tc.wantG[i][j])) > 1e-5 {
						t.Errorf("grad[%d][%d] = %v, want %v", i, j, p.Grad[j], tc.wantG[i][j])
					}
				}
			}
		})
	}
}

func newTestOpt(t *testing.T, shapes map[string][]int, order []string) (*AdamW, []*tensor.Param) {
	t.Helper()
	var ps []*tensor.Param
	for _, n := range order {
		p := tensor.NewParam(n, shapes[n]...)
		for i := range p.Data {
			p.Data[i] = float32(i)*0.1 - 0.3
			p.Grad[i] = float32(i%5) - 1.7
		}
		ps = append(ps, p)
	}
	o, err := NewAdamW(ps, DefaultAdamWConfig(0.01))
	if err != nil {
		t.Fatal(err)
	}
	return o, ps
}

func TestStateRoundTrip(t *testing.T) {
	shapes := map[string][]int{"a.weight": {3, 4}, "a.bias": {4}, "b.LayerNorm.weight": {5}}
	o, ps := newTestOpt(t, shapes, []string{"a.weight", "a.bias", "b.LayerNorm.weight"})
	o.Step(1e-3)
	o.Step(2e-3)
	blob, err := o.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// A fresh optimizer over the same params in another order.
	o2, ps2 := newTestOpt(t, shapes, []string{"b.LayerNorm.weight", "a.weight", "a.bias"})
	if err := o2.UnmarshalBinary(blob); err != nil {
		t.Fatal(err)
	}
	if o2.StepCount() != 2 {
		t.Errorf("restored step %d, want 2", o2.StepCount())
	}
	// Same params values, then one more step on each: bit-identical.
	byName := map[string]*tensor.Param{}
	for _, p := range ps2 {
		byName[p.Name] = p
	}
	for _, p := range ps {
		copy(byName[p.Name].Data, p.Data)
	}
	o.Step(5e-4)
	o2.Step(5e-4)
	for _, p := range ps {
		q := byName[p.Name]
		for i := range p.Data {
			if math.Float32bits(p.Data[i]) != math.Float32bits(q.Data[i]) {
				t.Fatalf("%s[%d]: %v vs %v after restore", p.Name, i, p.Data[i], q.Data[i])
			}
		}
	}
	// Re-serialising the restored optimizer gives the same bytes as the original.
	b1, _ := o.MarshalBinary()
	o3, _ := newTestOpt(t, shapes, []string{"a.weight", "a.bias", "b.LayerNorm.weight"})
	if err := o3.UnmarshalBinary(b1); err != nil {
		t.Fatal(err)
	}
	b3, _ := o3.MarshalBinary()
	if !bytes.Equal(b1, b3) {
		t.Error("marshal(unmarshal(x)) != x")
	}
}

func TestStateErrors(t *testing.T) {
	shapes := map[string][]int{"a.weight": {3, 4}, "a.bias": {4}, "c": {2}}
	o, _ := newTestOpt(t, shapes, []string{"a.weight", "a.bias"})
	o.Step(1e-3)
	blob, _ := o.MarshalBinary()
	flipped := bytes.Clone(blob)
	flipped[40] ^= 1
	for _, tc := range []struct {
		name    string
		shapes  map[string][]int
		order   []string
		blob    []byte
		want    string
		corrupt bool
	}{
		{"shape", map[string][]int{"a.weight": {4, 3}, "a.bias": {4}}, []string{"a.weight", "a.bias"}, blob,
			`"a.weight" has shape [3 4], the parameter has shape [4 3]`, false},
		{"missing", shapes, []string{"a.weight", "a.bias", "c"}, blob, `lacks parameter "c" (shape [2])`, false},
		{"extra", shapes, []string{"a.weight"}, blob, `parameter "a.bias" (shape [4]) that the model lacks`, false},
		{"checksum", shapes, []string{"a.weight", "a.bias"}, flipped, "checksum", true},
		{"truncated", shapes, []string{"a.weight", "a.bias"}, blob[:30], "bad magic", true},
		{"foreign", shapes, []string{"a.weight", "a.bias"}, []byte(strings.Repeat("x", 100)), "bad magic", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o2, _ := newTestOpt(t, tc.shapes, tc.order)
			err := o2.UnmarshalBinary(tc.blob)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if errors.Is(err, ErrCorruptState) != tc.corrupt {
				t.Errorf("errors.Is(ErrCorruptState) = %v, want %v", !tc.corrupt, tc.corrupt)
			}
			if o2.StepCount() != 0 {
				t.Error("failed load changed the step")
			}
		})
	}
}

func BenchmarkAdamWStep(b *testing.B) {
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("n4M_workers%d", workers), func(b *testing.B) {
			var ps []*tensor.Param
			for i := 0; i < 8; i++ {
				ps = append(ps, tensor.NewParam(fmt.Sprint("p", i, ".weight"), 512, 1024))
			}
			cfg := DefaultAdamWConfig(0.01)
			cfg.Workers = workers
			o, _ := NewAdamW(ps, cfg)
			b.SetBytes(int64(8 * 512 * 1024 * 4))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o.Step(1e-4)
			}
		})
	}
}
