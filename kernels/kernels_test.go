package kernels

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testutil"
)

func TestMatmulAgainstNaive(t *testing.T) {
	r := testutil.Rand(1)
	// {5, 19, 300} and {31, 40, 777} split their columns over the workers.
	defer SetThreads(Threads())
	SetThreads(2)
	for _, s := range [][3]int{{1, 1, 1}, {7, 13, 5}, {37, 33, 65}, {130, 17, 9}, {5, 19, 300}, {31, 40, 777}} {
		BT, C, OC := s[0], s[1], s[2]
		t.Run(fmt.Sprintf("BT%d_C%d_OC%d", BT, C, OC), func(t *testing.T) {
			inp, w, b := testutil.RandN(r, BT*C, 1), testutil.RandN(r, OC*C, 1), testutil.RandN(r, OC, 1)
			got, want := make([]float32, BT*OC), make([]float32, BT*OC)
			MatmulForward(got, inp, w, b, BT, C, OC)
			matmulForwardNaive(want, inp, w, b, BT, C, OC)
			testutil.AssertClose(t, "with bias", got, want, 1e-5, 1e-5)
			MatmulForward(got, inp, w, nil, BT, C, OC)
			matmulForwardNaive(want, inp, w, nil, BT, C, OC)
			testutil.AssertClose(t, "no bias", got, want, 1e-5, 1e-5)
			res := testutil.RandN(r, BT*OC, 1)
			for _, bias := range [][]float32{b, nil} {
				matmulForwardNaive(want, inp, w, bias, BT, C, OC)
				for i := range want {
					want[i] += res[i]
				}
				MatmulResidualForward(got, inp, w, bias, res, BT, C, OC)
				testutil.AssertClose(t, "residual", got, want, 1e-5, 1e-5)
				inPlace := append([]float32(nil), res...)
				MatmulResidualForward(inPlace, inp, w, bias, inPlace, BT, C, OC)
				testutil.AssertClose(t, "residual in place", inPlace, want, 1e-5, 1e-5)
			}
		})
	}
}

// The column split of few rows gives the bits of the row split (one
// worker), residual and bias included: each element's sum runs in the same
// order, on go-asm (whose sums do not depend on the block around an
// element; gonum's and the libraries' may).
func TestMatmulColumnSplitSameBits(t *testing.T) {
	if n := blas.Name(); !strings.HasPrefix(n, "go-asm") {
		t.Skipf("backend %s: its sums may depend on the block's width", n)
	}
	defer SetThreads(Threads())
	r := testutil.Rand(2)
	for _, BT := range []int{1, 2, 5, 16, 31} {
		C, OC := 72, 2*colChunk+40
		inp, w, b, res := testutil.RandN(r, BT*C, 1), testutil.RandN(r, OC*C, 1), testutil.RandN(r, OC, 1), testutil.RandN(r, BT*OC, 1)
		for _, bias := range [][]float32{b, nil} {
			for _, rs := range [][]float32{res, nil} {
				one, two := make([]float32, BT*OC), make([]float32, BT*OC)
				SetThreads(1)
				matmulForward(one, inp, w, bias, rs, BT, C, OC)
				SetThreads(2)
				if !splitColumns(BT, OC) {
					t.Fatalf("BT %d, OC %d: no column split", BT, OC)
				}
				matmulForward(two, inp, w, bias, rs, BT, C, OC)
				for i := range one {
					if math.Float32bits(one[i]) != math.Float32bits(two[i]) {
						t.Fatalf("BT %d bias %v res %v: element %d is %g split, %g whole", BT, bias != nil, rs != nil, i, two[i], one[i])
					}
				}
			}
		}
	}
}

func TestMatmulBackward(t *testing.T) {
	r := testutil.Rand(2)
	BT, C, OC := 6, 4, 5
	inp, w, b := testutil.RandN(r, BT*C, 1), testutil.RandN(r, OC*C, 1), testutil.RandN(r, OC, 1)
	proj := testutil.RandN(r, BT*OC, 1)
	out := make([]float32, BT*OC)
	loss := func() float64 { MatmulForward(out, inp, w, b, BT, C, OC); return testutil.Dot(out, proj) }
	dinp, dw, db := make([]float32, BT*C), make([]float32, OC*C), make([]float32, OC)
	MatmulBackward(dinp, dw, db, proj, inp, w, BT, C, OC)
	testutil.GradCheck(t, "dinp", inp, dinp, loss, 1e-2, 1e-3)
	testutil.GradCheck(t, "dweight", w, dw, loss, 1e-2, 1e-3)
	testutil.GradCheck(t, "dbias", b, db, loss, 1e-2, 1e-3)
	// Parameter gradients accumulate: a second call doubles them.
	dw1, db1 := append([]float32(nil), dw...), append([]float32(nil), db...)
	MatmulBackward(dinp, dw, db, proj, inp, w, BT, C, OC)
	for i := range dw1 {
		dw1[i] *= 2
	}
	for i := range db1 {
		db1[i] *= 2
	}
	// Summation order differs (s + d0 + d1 … versus 2s), so allow rounding.
	testutil.AssertClose(t, "dweight after two calls", dw, dw1, 0, 1e-6)
	testutil.AssertClose(t, "dbias after two calls", db, db1, 0, 1e-6)
}

func TestLayerNorm(t *testing.T) {
	r := testutil.Rand(3)
	BT, C := 6, 13
	inp := testutil.RandN(r, BT*C, 2)
	w, b := testutil.RandN(r, C, 1), testutil.RandN(r, C, 1)
	out, mean, rstd := make([]float32, BT*C), make([]float32, BT), make([]float32, BT)
	LayerNormForward(out, mean, rstd, inp, w, b, 1e-5, BT, C)
	// Reference in float64.
	for i := 0; i < BT; i++ {
		m, v := 0.0, 0.0
		for c := 0; c < C; c++ {
			m += float64(inp[i*C+c])
		}
		m /= float64(C)
		for c := 0; c < C; c++ {
			d := float64(inp[i*C+c]) - m
			v += d * d
		}
		v /= float64(C)
		for c := 0; c < C; c++ {
			want := (float64(inp[i*C+c])-m)/math.Sqrt(v+1e-5)*float64(w[c]) + float64(b[c])
			if d := math.Abs(want - float64(out[i*C+c])); d > 1e-5 {
				t.Fatalf("row %d col %d: got %v want %v", i, c, out[i*C+c], want)
			}
		}
	}
	proj := testutil.RandN(r, BT*C, 1)
	loss := func() float64 {
		LayerNormForward(out, mean, rstd, inp, w, b, 1e-5, BT, C)
		return testutil.Dot(out, proj)
	}
	loss()
	dinp, dw, db := make([]float32, BT*C), make([]float32, C), make([]float32, C)
	LayerNormBackward(dinp, dw, db, proj, inp, w, mean, rstd, BT, C)
	testutil.GradCheck(t, "dinp", inp, dinp, loss, 1e-2, 2e-3)
	testutil.GradCheck(t, "dweight", w, dw, loss, 1e-2, 2e-3)
	testutil.GradCheck(t, "dbias", b, db, loss, 1e-2, 2e-3)
}

func TestActivations(t *testing.T) {
	r := testutil.Rand(4)
	N := 24
	for _, name := range []string{"gelu", "gelu_new", "relu", "silu", "tanh", "linear"} {
		t.Run(name, func(t *testing.T) {
			a, err := ParseActivation(name)
			if err != nil {
				t.Fatal(err)
			}
			inp := testutil.RandN(r, N, 2)
			for i := range inp { // keep ReLU's kink away from the finite differences
				if math.Abs(float64(inp[i])) < 0.05 {
					inp[i] = 0.3
				}
			}
			out := make([]float32, N)
			proj := testutil.RandN(r, N, 1)
			loss := func() float64 { ActivationForward(out, inp, a, N); return testutil.Dot(out, proj) }
			din := make([]float32, N)
			ActivationBackward(din, proj, inp, a, N)
			testutil.GradCheck(t, name, inp, din, loss, 1e-3, 1e-3)
		})
	}
	// Known values.
	for _, c := range []struct {
		a    Activation
		x, y float64
	}{{GELU, 1, 0.8413447460685429}, {GELUNew, 1, 0.8411919906082768}, {SiLU, 1, 0.7310585786300049}, {GELU, -3, -0.0040496}} {
		got := make([]float32, 1)
		ActivationForward(got, []float32{float32(c.x)}, c.a, 1)
		if math.Abs(float64(got[0])-c.y) > 1e-6 {
			t.Errorf("%v(%v) = %v, want %v", c.a, c.x, got[0], c.y)
		}
	}
	if _, err := ParseActivation("swiglu"); err == nil {
		t.Error("unknown activation accepted")
	}
}

func TestEmbedding(t *testing.T) {
	r := testutil.Rand(5)
	B, T, C, V, TV := 2, 3, 4, 5, 2
	ids := []int32{0, 1, 4, 2, 0, 4}
	types := []int32{0, 0, 1, 1, 0, 1}
	wte, wtt := testutil.RandN(r, V*C, 1), testutil.RandN(r, TV*C, 1)
	out := make([]float32, B*T*C)
	proj := testutil.RandN(r, B*T*C, 1)
	loss := func() float64 { EmbeddingForward(out, ids, types, wte, wtt, B*T, C); return testutil.Dot(out, proj) }
	dwte, dwtt := make([]float32, V*C), make([]float32, TV*C)
	EmbeddingBackward(dwte, dwtt, proj, ids, types, -1, B*T, C)
	testutil.GradCheck(t, "dwte", wte, dwte, loss, 1e-2, 1e-3)
	testutil.GradCheck(t, "dwtt", wtt, dwtt, loss, 1e-2, 1e-3)
	// padding_idx 0: row 0 gets nothing from the lookup.
	clear(dwte)
	EmbeddingBackward(dwte, make([]float32, TV*C), proj, ids, types, 0, B*T, C)
	for c := 0; c < C; c++ {
		if dwte[c] != 0 {
			t.Fatalf("padding row got gradient %v", dwte[c])
		}
	}
}

func masks() map[string]struct {
	km     []float32
	causal bool
} {
	return map[string]struct {
		km     []float32
		causal bool
	}{
		"nomask":         {nil, false},
		"rightpad":       {[]float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}, false},
		"causal":         {nil, true},
		"causal_leftpad": {[]float32{1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, true},
	}
}

func TestAttentionAgainstNaive(t *testing.T) {
	r := testutil.Rand(6)
	B, T, NH, HS := 2, 7, 3, 5
	C := NH * HS
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	for name, m := range masks() {
		t.Run(name, func(t *testing.T) {
			got, want := make([]float32, B*T*C), make([]float32, B*T*C)
			probs := make([]float32, B*NH*T*T)
			AttentionForward(got, probs, q, k, v, m.km, m.causal, Dropout{}, B, T, NH, HS)
			attentionForwardNaive(want, q, k, v, m.km, m.causal, B, T, NH, HS)
			testutil.AssertClose(t, "out", got, want, 2e-6, 1e-5)
			AttentionForward(got, nil, q, k, v, m.km, m.causal, Dropout{}, B, T, NH, HS)
			testutil.AssertClose(t, "out without saved probs", got, want, 2e-6, 1e-5)
		})
	}
}

func TestAttentionBackward(t *testing.T) {
	r := testutil.Rand(7)
	B, T, NH, HS := 2, 7, 2, 3
	C := NH * HS
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	proj := testutil.RandN(r, B*T*C, 1)
	for name, m := range masks() {
		for _, drop := range []Dropout{{}, {P: 0.3, Seed: 42}} {
			t.Run(fmt.Sprintf("%s_drop%v", name, drop.P), func(t *testing.T) {
				out, probs := make([]float32, B*T*C), make([]float32, B*NH*T*T)
				loss := func() float64 {
					AttentionForward(out, probs, q, k, v, m.km, m.causal, drop, B, T, NH, HS)
					return testutil.Dot(out, proj)
				}
				loss()
				dq, dk, dv := make([]float32, B*T*C), make([]float32, B*T*C), make([]float32, B*T*C)
				AttentionBackward(dq, dk, dv, proj, q, k, v, probs, m.km, m.causal, drop, B, T, NH, HS)
				testutil.GradCheck(t, "dq", q, dq, loss, 1e-2, 2e-3)
				testutil.GradCheck(t, "dk", k, dk, loss, 1e-2, 2e-3)
				testutil.GradCheck(t, "dv", v, dv, loss, 1e-2, 2e-3)
			})
		}
	}
}

func TestDropout(t *testing.T) {
	d := Dropout{P: 0.25, Seed: 7}
	N := 100000
	x := make([]float32, N)
	for i := range x {
		x[i] = 1
	}
	DropoutForward(x, d, N)
	kept := 0
	for _, v := range x {
		switch v {
		case 0:
		case 1 / 0.75:
			kept++
		default:
			t.Fatalf("dropout produced %v", v)
		}
	}
	if frac := float64(kept) / float64(N); math.Abs(frac-0.75) > 0.01 {
		t.Errorf("kept %.4f, want 0.75", frac)
	}
	// The mask depends only on (seed, index): another thread count, same mask.
	defer SetThreads(Threads())
	SetThreads(1)
	y := make([]float32, N)
	for i := range y {
		y[i] = 1
	}
	DropoutForward(y, d, N)
	for i := range x {
		if x[i] != y[i] {
			t.Fatalf("mask differs at %d with one thread", i)
		}
	}
	if d.Derive(1, 2).Seed == d.Derive(2, 1).Seed || d.Derive(1).Seed == d.Seed {
		t.Error("derived seeds collide")
	}
}

func TestCrossEntropy(t *testing.T) {
	r := testutil.Rand(8)
	N, V := 5, 7
	logits := testutil.RandN(r, N*V, 2)
	targets := []int32{3, -100, 0, 6, 2}
	losses := make([]float32, N)
	CrossEntropyForward(losses, logits, targets, N, V)
	for i, tgt := range targets {
		if tgt < 0 {
			if losses[i] != 0 {
				t.Fatalf("ignored row %d has loss %v", i, losses[i])
			}
			continue
		}
		s := 0.0
		for j := 0; j < V; j++ {
			s += math.Exp(float64(logits[i*V+j]))
		}
		want := math.Log(s) - float64(logits[i*V+int(tgt)])
		if math.Abs(want-float64(losses[i])) > 1e-5 {
			t.Fatalf("row %d loss %v want %v", i, losses[i], want)
		}
	}
	w := []float32{0.5, 1, -2, 0.25, 1}
	loss := func() float64 { CrossEntropyForward(losses, logits, targets, N, V); return testutil.Dot(losses, w) }
	d := make([]float32, N*V)
	CrossEntropyBackward(d, w, logits, targets, N, V)
	testutil.GradCheck(t, "dlogits", logits, d, loss, 1e-2, 1e-3)
}

func TestParallelForCovers(t *testing.T) {
	defer SetThreads(Threads())
	for _, th := range []int{1, 2, 3, 8} {
		SetThreads(th)
		for _, n := range []int{0, 1, 5, 100, 1001} {
			hits := make([]int32, n)
			parallelFor(n, 3, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					hits[i]++
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("threads %d n %d: index %d visited %d times", th, n, i, h)
				}
			}
		}
	}
}

// Nested calls (a range that itself splits its work) find the workers busy
// and must still finish, each index visited once; so must calls made from
// several goroutines at once.
func TestParallelForNestedAndConcurrent(t *testing.T) {
	defer SetThreads(Threads())
	for _, th := range []int{2, 3} {
		// As many outer ranges as there are workers (earlier tests may have
		// started more than th), so that nested calls find none idle and
		// take the fallback path, which is what could deadlock.
		SetThreads(th)
		parallelFor(th, 1, func(int, int) {})
		SetThreads(max(th, int(workers.started.Load())))
		before := fallbacks.Load()
		const n, m = 60, 50
		hits := make([]int32, n*m)
		parallelFor(n, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				parallelFor(m, 1, func(a, b int) {
					for j := a; j < b; j++ {
						hits[i*m+j]++
					}
				})
			}
		})
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for rep := 0; rep < 200; rep++ {
					parallelFor(m, 1, func(a, b int) {
						for j := a; j < b; j++ {
							atomic.AddInt32(&hits[g*m+j], 1)
						}
					})
				}
			}()
		}
		wg.Wait()
		if fallbacks.Load() == before {
			t.Errorf("threads %d: no range took the no-idle-worker path", th)
		}
		for i, h := range hits {
			want := int32(1)
			if i < 4*m {
				want = 201
			}
			if h != want {
				t.Fatalf("threads %d: index %d visited %d times, want %d", th, i, h, want)
			}
		}
	}
}

var sinkCount atomic.Int64

// A range that ends its goroutine (t.FailNow does) still lets the call
// return, and the pool replaces the worker it lost.
func TestParallelForGoexit(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(2)
	parallelFor(2, 1, func(int, int) {})
	n := workers.started.Load()
	done := make(chan struct{})
	go func() {
		defer close(done)
		parallelFor(2, 1, func(lo, hi int) {
			if lo > 0 {
				runtime.Goexit()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("parallelFor did not return after a range called runtime.Goexit")
	}
	hits := make([]int32, 100)
	for rep := 0; rep < 20; rep++ {
		parallelFor(100, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&hits[i], 1)
			}
		})
	}
	for i, h := range hits {
		if h != 20 {
			t.Fatalf("after Goexit: index %d visited %d times, want 20", i, h)
		}
	}
	if got := workers.started.Load(); got < min(n, 2) {
		t.Errorf("workers after Goexit: %d, want at least %d", got, min(n, 2))
	}
}

// A warm parallelFor allocates nothing of its own (the closure a caller
// passes is the caller's; this one captures nothing).
func TestParallelForAllocations(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(2)
	fn := func(lo, hi int) { sinkCount.Add(int64(hi - lo)) }
	parallelFor(100, 1, fn)
	if a := testing.AllocsPerRun(200, func() { parallelFor(100, 1, fn) }); a > 0.05 {
		t.Errorf("parallelFor allocates %.2f objects a call once warm", a)
	}
}

// The tabulated GELU equals the erf formula to float64 rounding level.
func TestGELUTable(t *testing.T) {
	worst, worstG := 0.0, 0.0
	for x := -12.0; x <= 12; x += 0.000731 {
		want := 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
		wantG := 0.5*(1+math.Erf(x/math.Sqrt2)) + x*math.Exp(-0.5*x*x)/math.Sqrt(2*math.Pi)
		worst = math.Max(worst, math.Abs(geluExact(x)-want))
		worstG = math.Max(worstG, math.Abs(geluExactGrad(x)-wantG))
	}
	if worst > 1e-10 || worstG > 1e-9 {
		t.Errorf("table GELU error %.3g, gradient error %.3g", worst, worstG)
	}
	if v := geluExact(math.NaN()); !math.IsNaN(v) {
		t.Errorf("gelu(NaN) = %v", v)
	}
}

func BenchmarkActivation(b *testing.B) {
	r := testutil.Rand(9)
	for _, a := range []Activation{GELU, GELUNew, SiLU} {
		N := 2048 * 1536
		x := testutil.RandN(r, N, 2)
		y := make([]float32, N)
		b.Run(fmt.Sprintf("%v_N%d", a, N), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ActivationForward(y, x, a, N)
			}
			b.ReportMetric(float64(N)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
		})
		b.Run(fmt.Sprintf("%v_backward_N%d", a, N), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ActivationBackward(y, x, x, a, N)
			}
			b.ReportMetric(float64(N)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
		})
	}
}

func TestActivationSavedGrad(t *testing.T) {
	r := testutil.Rand(10)
	N := 1000
	for _, a := range []Activation{GELU, GELUNew, ReLU, SiLU, Tanh, Linear} {
		x := testutil.RandN(r, N, 3)
		y1, y2, g := make([]float32, N), make([]float32, N), make([]float32, N)
		ActivationForward(y1, x, a, N)
		ActivationForwardSaveGrad(y2, g, x, a, N)
		dout := testutil.RandN(r, N, 1)
		d1, d2 := make([]float32, N), make([]float32, N)
		ActivationBackward(d1, dout, x, a, N)
		ActivationBackwardSaved(d2, dout, g, N)
		testutil.AssertClose(t, a.String()+" forward", y2, y1, 0, 0)
		testutil.AssertClose(t, a.String()+" backward", d2, d1, 1e-7, 1e-6)
	}
}

// Inference attention is computed in query blocks; lengths that are not a
// multiple of the block size give the same result as the saved-probability path.
func TestAttentionBlocks(t *testing.T) {
	r := testutil.Rand(11)
	B, T, NH, HS := 1, attnBlock*2+5, 2, 4
	C := NH * HS
	q, k, v := testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1), testutil.RandN(r, B*T*C, 1)
	km := make([]float32, T)
	for i := range km {
		km[i] = 1
	}
	km[3], km[T-1] = 0, 0
	for _, causal := range []bool{false, true} {
		a, b := make([]float32, B*T*C), make([]float32, B*T*C)
		AttentionForward(a, make([]float32, B*NH*T*T), q, k, v, km, causal, Dropout{}, B, T, NH, HS)
		AttentionForward(b, nil, q, k, v, km, causal, Dropout{}, B, T, NH, HS)
		testutil.AssertClose(t, fmt.Sprintf("blocked causal=%v", causal), b, a, 1e-6, 1e-6)
	}
}

func TestCrossEntropyGradInPlace(t *testing.T) {
	r := testutil.Rand(12)
	N, V := 6, 9
	logits := testutil.RandN(r, N*V, 2)
	targets := []int32{3, -100, 0, 8, 2, -1}
	dl := make([]float32, N)
	for i, tg := range targets {
		if tg >= 0 {
			dl[i] = 0.25
		}
	}
	want := make([]float32, N*V)
	CrossEntropyBackward(want, dl, logits, targets, N, V)
	got := append([]float32(nil), logits...)
	CrossEntropyGradInPlace(got, targets, 0.25, N, V)
	testutil.AssertClose(t, "in place", got, want, 1e-7, 1e-6)
}

func TestExp64(t *testing.T) {
	worst := 0.0
	for x := -707.9; x <= 0; x += 0.0137 {
		want := math.Exp(x)
		if d := math.Abs(exp64(x)-want) / want; d > worst {
			worst = d
		}
	}
	if worst > 1e-9 {
		t.Errorf("exp64 relative error %.3g", worst)
	}
	if exp64(-800) != 0 || exp64(0) != 1 || !math.IsNaN(exp64(math.NaN())) {
		t.Errorf("exp64 edge cases: %v %v %v", exp64(-800), exp64(0), exp64(math.NaN()))
	}
}

func TestSplitConcatQKV(t *testing.T) {
	for _, c := range []struct{ BT, H int }{{1, 1}, {7, 13}, {130, 5}} {
		r := testutil.Rand(uint64(c.BT))
		qkv := testutil.RandN(r, c.BT*3*c.H, 1)
		q, k, v := make([]float32, c.BT*c.H), make([]float32, c.BT*c.H), make([]float32, c.BT*c.H)
		SplitQKV(q, k, v, qkv, c.BT, c.H)
		for i := 0; i < c.BT; i++ {
			for j := 0; j < c.H; j++ {
				row := qkv[i*3*c.H:]
				if q[i*c.H+j] != row[j] || k[i*c.H+j] != row[c.H+j] || v[i*c.H+j] != row[2*c.H+j] {
					t.Fatalf("BT %d H %d: row %d column %d split wrongly", c.BT, c.H, i, j)
				}
			}
		}
		back := make([]float32, len(qkv))
		ConcatQKV(back, q, k, v, c.BT, c.H)
		for i := range back {
			if back[i] != qkv[i] {
				t.Fatalf("BT %d H %d: concat differs at %d", c.BT, c.H, i)
			}
		}
	}
}

func TestRMSNorm(t *testing.T) {
	r := testutil.Rand(31)
	BT, C := 5, 12
	inp := testutil.RandN(r, BT*C, 2)
	out, rstd := make([]float32, BT*C), make([]float32, BT)
	RMSNormForward(out, rstd, inp, 1e-6, BT, C)
	for i := 0; i < BT; i++ { // the reference twin, in float64
		ms := 0.0
		for c := 0; c < C; c++ {
			ms += float64(inp[i*C+c]) * float64(inp[i*C+c])
		}
		s := 1 / math.Sqrt(ms/float64(C)+1e-6)
		for c := 0; c < C; c++ {
			if d := math.Abs(float64(inp[i*C+c])*s - float64(out[i*C+c])); d > 1e-6 {
				t.Fatalf("row %d col %d: got %v want %v", i, c, out[i*C+c], float64(inp[i*C+c])*s)
			}
		}
	}
	proj := testutil.RandN(r, BT*C, 1)
	loss := func() float64 {
		RMSNormForward(out, rstd, inp, 1e-6, BT, C)
		return testutil.Dot(out, proj)
	}
	loss()
	dinp := make([]float32, BT*C)
	RMSNormBackward(dinp, proj, inp, rstd, BT, C)
	testutil.GradCheck(t, "dinp", inp, dinp, loss, 1e-2, 2e-3)
}

func TestSoftmax64(t *testing.T) {
	p := Softmax64([]float32{-2, -2 + float32(math.Log(3))}) // shifted logits, same probabilities
	if math.Abs(p[0]-0.25) > 1e-7 || math.Abs(p[1]-0.75) > 1e-7 {
		t.Errorf("softmax = %v, want [0.25 0.75]", p)
	}
	if p := Softmax64([]float32{float32(math.Inf(-1)), 0}); p[0] != 0 || p[1] != 1 {
		t.Errorf("softmax with −Inf = %v, want [0 1]", p)
	}
}

func TestCosine(t *testing.T) {
	if c := Cosine([]float32{1, 0}, []float32{1, 1}); math.Abs(c-math.Sqrt(0.5)) > 1e-12 {
		t.Errorf("cosine = %v, want √½", c)
	}
	if c := Cosine([]float32{0, 0}, []float32{1, 1}); c != 0 {
		t.Errorf("cosine with a zero vector = %v, want 0", c)
	}
}
