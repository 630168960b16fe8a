//go:build !windows

package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

func skipNoBF16(tb testing.TB) {
	tb.Helper()
	if err := BF16Supported(); err != nil {
		tb.Skip(err)
	}
}

// bf16Round rounds x to bfloat16 (to nearest, ties to even) and widens it
// back, independently of oneDNN.
func bf16Round(x float32) float32 {
	if x != x {
		return x
	}
	b := math.Float32bits(x)
	lo := b & 0xffff
	hi := b &^ 0xffff
	if lo > 0x8000 || lo == 0x8000 && hi&0x10000 != 0 {
		hi += 0x10000
	}
	return math.Float32frombits(hi)
}

func bf16RandSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// TestBF16LinearRounding checks that inputs and weights are rounded to
// nearest, ties to even, with identity matrices on the other side.
func TestBF16LinearRounding(t *testing.T) {
	skipNoBF16(t)
	const k = 8
	vals := []float32{
		1,
		math.Float32frombits(0x3f808000), // tie, rounds down to even
		math.Float32frombits(0x3f818000), // tie, rounds up to even
		math.Float32frombits(0x3f808001), // above the tie
		-math.Float32frombits(0x3f818000),
		math.Float32frombits(0x477fffff), // carries into the exponent
		1e-3,
		-3.14159,
	}
	ident := make([]float32, k*k)
	for i := range k {
		ident[i*k+i] = 1
	}
	// Rounding of the input: W = I.
	l, err := NewBF16Matmul(ident, k, k)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, k)
	l.Forward(out, vals, 1, 0)
	for i, v := range vals {
		if want := bf16Round(v); out[i] != want {
			t.Errorf("input %#x: got %#x, want %#x", math.Float32bits(v), math.Float32bits(out[i]), math.Float32bits(want))
		}
	}
	nan := []float32{float32(math.NaN()), 0, 0, 0, 0, 0, 0, 0}
	l.Forward(out, nan, 1, 0)
	if out[0] == out[0] {
		t.Errorf("NaN input: got %v, want NaN", out[0])
	}
	// Rounding of the weights: the input is I, W's first column is vals.
	w := make([]float32, k*k)
	for j, v := range vals {
		w[j*k] = v
	}
	l, err = NewBF16Matmul(w, k, k)
	if err != nil {
		t.Fatal(err)
	}
	out = make([]float32, k*k)
	l.Forward(out, ident, k, 0)
	for j, v := range vals {
		if want := bf16Round(v); out[j] != want {
			t.Errorf("weight %#x: got %#x, want %#x", math.Float32bits(v), math.Float32bits(out[j]), math.Float32bits(want))
		}
	}
}

func TestNewBF16MatmulErrors(t *testing.T) {
	if _, err := NewBF16Matmul(make([]float32, 6), 2, 4); err == nil {
		t.Error("NewBF16Matmul with len(w) ≠ n·k: no error")
	}
	if _, err := NewBF16Matmul(nil, 0, 4); err == nil {
		t.Error("NewBF16Matmul with n = 0: no error")
	}
	if err := BF16Supported(); err != nil {
		if _, err2 := NewBF16Matmul(make([]float32, 8), 2, 4); err2 == nil {
			t.Errorf("BF16Supported says %v, but NewBF16Matmul succeeds", err)
		}
	}
}

// checkBF16Forward compares out, the result of Forward(out, inp, m, beta)
// with out0 as out's previous content, with a float64 product of the
// bfloat16-rounded operands and with the float32 product.
func checkBF16Forward(t *testing.T, name string, out, out0, inp, w []float32, m, n, k int, beta float32) {
	t.Helper()
	bad := 0
	for i := range m {
		// Row magnitude: the largest sum of absolute terms in the row.
		var mag float64
		ref := make([]float64, n)
		f32 := make([]float64, n)
		for j := range n {
			var s, sa, s32 float64
			for p := range k {
				a, b := inp[i*k+p], w[j*k+p]
				s += float64(bf16Round(a)) * float64(bf16Round(b))
				sa += math.Abs(float64(a) * float64(b))
				s32 += float64(a) * float64(b)
			}
			var c float64
			if beta != 0 {
				c = float64(beta) * float64(out0[i*n+j])
			}
			ref[j] = s + c
			f32[j] = s32 + c
			mag = max(mag, sa+math.Abs(c))
		}
		for j := range n {
			got := float64(out[i*n+j])
			if d := math.Abs(got - ref[j]); !(d <= 1e-5*mag+1e-30) {
				if bad++; bad <= 5 {
					t.Errorf("%s: out[%d,%d] = %v, bf16 reference %v (diff %.3g, row magnitude %.3g)", name, i, j, got, ref[j], d, mag)
				}
			}
			if d := math.Abs(got - f32[j]); !(d <= 1e-2*mag) {
				if bad++; bad <= 5 {
					t.Errorf("%s: out[%d,%d] = %v, float32 product %v (diff %.3g, row magnitude %.3g)", name, i, j, got, f32[j], d, mag)
				}
			}
		}
	}
}

func TestBF16LinearForward(t *testing.T) {
	skipNoBF16(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{5, 33} {
		for _, k := range []int{7, 64, 130} {
			w := bf16RandSlice(rng, n*k)
			l, err := NewBF16Matmul(w, n, k)
			if err != nil {
				t.Fatal(err)
			}
			if l.N() != n || l.K() != k {
				t.Fatalf("N, K = %d, %d, want %d, %d", l.N(), l.K(), n, k)
			}
			for _, m := range []int{1, 3, 17} {
				for _, beta := range []float32{0, 1, 0.5} {
					name := fmt.Sprintf("m=%d n=%d k=%d beta=%v", m, n, k, beta)
					inp := bf16RandSlice(rng, m*k)
					out0 := bf16RandSlice(rng, m*n)
					if beta == 0 {
						// Must be overwritten, not scaled.
						out0[0] = float32(math.NaN())
					}
					out := append([]float32(nil), out0...)
					l.Forward(out, inp, m, beta)
					checkBF16Forward(t, name, out, out0, inp, w, m, n, k, beta)
				}
			}
			t.Logf("n=%d k=%d: %s", n, k, l.impl(17, 1))
		}
	}
}

func TestBF16LinearConcurrent(t *testing.T) {
	skipNoBF16(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const n, k = 33, 130
	w := bf16RandSlice(rng, n*k)
	l, err := NewBF16Matmul(w, n, k)
	if err != nil {
		t.Fatal(err)
	}
	type job struct {
		m          int
		beta       float32
		inp, out0  []float32
		want, have []float32
	}
	var jobs []*job
	for g := range 4 {
		// Two goroutines share a shape, so that they share a primitive.
		j := &job{m: []int{3, 17}[g%2], beta: float32(g / 2)}
		j.inp = bf16RandSlice(rng, j.m*k)
		j.out0 = bf16RandSlice(rng, j.m*n)
		j.want = append([]float32(nil), j.out0...)
		l.Forward(j.want, j.inp, j.m, j.beta)
		j.have = make([]float32, len(j.out0))
		jobs = append(jobs, j)
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(jobs))
	for _, j := range jobs {
		wg.Go(func() {
			for range 200 {
				copy(j.have, j.out0)
				l.Forward(j.have, j.inp, j.m, j.beta)
				for i := range j.have {
					if j.have[i] != j.want[i] {
						errs <- fmt.Sprintf("m=%d beta=%v: concurrent out[%d] = %v, alone %v", j.m, j.beta, i, j.have[i], j.want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, j := range jobs {
		checkBF16Forward(t, fmt.Sprintf("m=%d beta=%v", j.m, j.beta), j.have, j.out0, j.inp, w, j.m, n, k, j.beta)
	}
}

func TestBF16LinearAllocs(t *testing.T) {
	skipNoBF16(t)
	const m, n, k = 8, 16, 32
	l, err := NewBF16Matmul(make([]float32, n*k), n, k)
	if err != nil {
		t.Fatal(err)
	}
	inp, out := make([]float32, m*k), make([]float32, m*n)
	l.Forward(out, inp, m, 1)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				t.Skip("the race detector allocates")
			}
		}
	}
	if a := testing.AllocsPerRun(100, func() { l.Forward(out, inp, m, 1) }); a > 0 {
		t.Errorf("Forward allocates %v times per call", a)
	}
	// Run with an epilogue, float32 and bfloat16 out, neither.
	bias, res := make([]float32, n), make([]float32, m*n)
	in16, out16 := make([]uint16, m*k), make([]uint16, m*n)
	for _, c := range []MatmulArgs{
		{In: inp, Out: out, Bias: bias, Res: res},
		{In: inp, Out16: out16, Bias: bias, Act: EltwiseGELUErf},
		{In16: in16, Out: out, Res: out},
	} {
		l.Run(m, &c)
		if a := testing.AllocsPerRun(100, func() { l.Run(m, &c) }); a > 0 {
			t.Errorf("Run(%v) allocates %v times per call", epilogue{in16: c.In16 != nil, out16: c.Out16 != nil, bias: c.Bias != nil, res: c.Res != nil, act: c.Act}, a)
		}
	}
	// GemmBF16, the training product, neither (its plan warm).
	b16 := make([]uint16, k*n)
	GemmBF16(false, false, m, n, k, in16, k, b16, n, 1, out, n)
	if a := testing.AllocsPerRun(100, func() { GemmBF16(false, false, m, n, k, in16, k, b16, n, 1, out, n) }); a > 0 {
		t.Errorf("GemmBF16 allocates %v times per call", a)
	}
}

// TestBF16LinearCleanup drops layers while others run, so that their
// oneDNN objects are destroyed by the cleanup.
func TestBF16LinearCleanup(t *testing.T) {
	skipNoBF16(t)
	rng := rand.New(rand.NewPCG(10, 11))
	const m, n, k = 5, 24, 40
	w := bf16RandSlice(rng, n*k)
	inp := bf16RandSlice(rng, m*k)
	keep, err := NewBF16Matmul(w, n, k)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, m*n)
	keep.Forward(want, inp, m, 0)
	for range 20 {
		l, err := NewBF16Matmul(w, n, k)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, m*n)
		l.Forward(out, inp, m, 0)
		l.Forward(out, inp, m, 1)
		runtime.GC()
	}
	runtime.GC()
	time.Sleep(10 * time.Millisecond) // let the cleanups run
	out := make([]float32, m*n)
	keep.Forward(out, inp, m, 0)
	for i := range out {
		if out[i] != want[i] {
			t.Fatalf("out[%d] = %v after cleanups, want %v", i, out[i], want[i])
		}
	}
}

// BenchmarkBF16Linear compares Forward with the float32 product
// Current().Sgemm(false, true, …) on the shapes of a BERT-base layer, on one
// goroutine. Run it with -benchtime 20x.
func BenchmarkBF16Linear(b *testing.B) {
	skipNoBF16(b)
	b.Logf("CPU: %s; float32 backend: %s", CPU(), Current().Name())
	for _, s := range []struct{ m, n, k int }{{128, 3072, 768}, {128, 768, 3072}} {
		rng := rand.New(rand.NewPCG(7, 8))
		w := bf16RandSlice(rng, s.n*s.k)
		inp := bf16RandSlice(rng, s.m*s.k)
		out := make([]float32, s.m*s.n)
		l, err := NewBF16Matmul(w, s.n, s.k)
		if err != nil {
			b.Fatal(err)
		}
		flop := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		report := func(b *testing.B, start time.Time) {
			b.ReportMetric(flop*float64(b.N)/time.Since(start).Seconds()/1e9, "GFLOP/s")
		}
		shape := fmt.Sprintf("m=%d,n=%d,k=%d", s.m, s.n, s.k)
		b.Run("bf16/"+shape, func(b *testing.B) {
			l.Forward(out, inp, s.m, 1) // create the primitive
			b.Logf("oneDNN implementation: %s", l.impl(s.m, 1))
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				l.Forward(out, inp, s.m, 1)
			}
			report(b, start)
		})
		b.Run("fp32/"+shape, func(b *testing.B) {
			be := Current()
			be.Sgemm(false, true, s.m, s.n, s.k, 1, inp, s.k, w, s.k, 1, out, s.n)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				be.Sgemm(false, true, s.m, s.n, s.k, 1, inp, s.k, w, s.k, 1, out, s.n)
			}
			report(b, start)
		})
	}
}

// The float32 layer with prepacked weights gives dnnl_sgemm's product to
// float32 rounding, with beta 0 and 1.
func TestF32LinearAgainstSgemm(t *testing.T) {
	if _, err := loadDNNLMatmul(); err != nil {
		t.Skip(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range [][3]int{{1, 5, 7}, {17, 33, 64}, {64, 96, 768}} {
		m, n, k := s[0], s[1], s[2]
		w, x := randSlice(r, n*k), randSlice(r, m*k)
		l, err := NewF32Matmul(w, n, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, beta := range []float32{0, 1} {
			init := randSlice(r, m*n)
			want := append([]float32(nil), init...)
			naiveSgemm(false, true, m, n, k, 1, x, k, w, k, beta, want, n)
			got := append([]float32(nil), init...)
			l.Forward(got, x, m, beta)
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*math.Sqrt(float64(k)) {
					t.Fatalf("%v beta %v: element %d is %v, want %v", s, beta, i, got[i], want[i])
				}
			}
		}
	}
	if _, err := NewF32Matmul(make([]float32, 5), 2, 3); err == nil {
		t.Error("a 5-element weight accepted as 2×3")
	}
}

// The int8 layer with prepacked weights gives the exact int32 products.
func TestS8LinearExact(t *testing.T) {
	if _, err := loadDNNLMatmul(); err != nil {
		t.Skip(err)
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, s := range [][3]int{{1, 5, 7}, {17, 33, 64}, {64, 96, 768}, {3, 2, 130}} {
		m, n, k := s[0], s[1], s[2]
		w, x := make([]int8, n*k), make([]uint8, m*k)
		wmax := Int8WeightMax()
		for i := range w {
			w[i] = int8(r.IntN(2*wmax+1) - wmax)
		}
		for i := range x {
			x[i] = uint8(r.IntN(256))
		}
		l, err := NewS8Matmul(w, n, k)
		if err != nil {
			t.Fatal(err)
		}
		got, want := make([]int32, m*n), make([]int32, m*n)
		l.ForwardU8(got, x, m)
		GoInt8{}.GemmU8S8S32(false, true, m, n, k, x, k, w, k, want, n)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%v: element %d is %d, want %d", s, i, got[i], want[i])
			}
		}
	}
}

func BenchmarkS8Linear(b *testing.B) {
	g, err := Int8()
	if err != nil {
		b.Skip(err)
	}
	for _, s := range [][3]int{{512, 2304, 768}, {512, 3072, 768}, {512, 768, 3072}, {64, 768, 768},
		{64, 2304, 768}, {64, 768, 3072}, {16, 2304, 768}, {16, 768, 3072}} {
		m, n, k := s[0], s[1], s[2]
		w, x, out := make([]int8, n*k), make([]uint8, m*k), make([]int32, m*n)
		for i := range w {
			w[i] = int8(i%13 - 6)
		}
		for i := range x {
			x[i] = uint8(i % 251)
		}
		l, err := NewS8Matmul(w, n, k)
		if err != nil {
			b.Fatal(err)
		}
		ops := 2 * float64(m*n*k)
		b.Run(fmt.Sprintf("gemm_u8s8s32/m%d_n%d_k%d", m, n, k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				g.GemmU8S8S32(false, true, m, n, k, x, k, w, k, out, n)
			}
			b.ReportMetric(ops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
		})
		b.Run(fmt.Sprintf("packed/m%d_n%d_k%d", m, n, k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				l.ForwardU8(out, x, m)
			}
			b.ReportMetric(ops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
		})
	}
}
