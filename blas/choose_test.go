package blas

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestCacheRoundTripAndInvalidation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "blas-choice.json")
	c := Choice{Candidate: Candidate{Kind: KindOpenBLAS, CoreType: "Haswell"}, Name: "x", Reason: "measured",
		Measurements: []Measurement{{Candidate: Candidate{Kind: KindOneDNN}, GFLOPS: 90}}}
	if err := writeCache(path, "cpu A; lib 1", c); err != nil {
		t.Fatal(err)
	}
	got, ok := readCache(path, "cpu A; lib 1")
	if !ok || got.Candidate != c.Candidate || len(got.Measurements) != 1 {
		t.Fatalf("read back %+v, %v", got, ok)
	}
	// Another library version or another processor: the verdict is stale.
	for _, key := range []string{"cpu A; lib 2", "cpu B; lib 1"} {
		if _, ok := readCache(path, key); ok {
			t.Errorf("key %q: stale verdict used", key)
		}
	}
}

func TestCorruptCacheIsIgnoredAndRewritten(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ROFORMER_CACHE_DIR", dir)
	path := cachePath()
	if path != filepath.Join(dir, "blas-choice.json") {
		t.Fatalf("cache path %s", path)
	}
	for _, junk := range []string{"", "{", "not json at all", `{"key": 3}`, `{"key": "k", "choice": {}}`} {
		if err := os.WriteFile(path, []byte(junk), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok := readCache(path, "k"); ok {
			t.Errorf("corrupt cache %q accepted", junk)
		}
	}
	b, h, c := chooseAuto(false)
	if b == nil || h == nil || c.Kind == "" || c.Cached {
		t.Fatalf("choice %+v", c)
	}
	// The heads' backend is the layers' or go-asm, and the choice says which.
	if c.Heads == nil || (c.Heads.Candidate != c.Candidate && c.Heads.Kind != KindGoAsm) || c.Heads.Name != h.Name() {
		t.Errorf("heads choice %+v for layers %v (backend %s)", c.Heads, c.Candidate, h.Name())
	}
	if !strings.Contains(c.Reason, "fastest measured") && c.Kind != KindGo {
		t.Errorf("reason %q", c.Reason)
	}
	// The measurement replaced the junk; the next choice reads it.
	_, h2, c2 := chooseAuto(false)
	if !c2.Cached || c2.Candidate != c.Candidate {
		t.Errorf("second choice %+v, want the cached %v", c2, c.Candidate)
	}
	if c2.Heads == nil || c2.Heads.Candidate != c.Heads.Candidate || h2.Name() != h.Name() {
		t.Errorf("cached heads choice %+v (%s), want %v (%s)", c2.Heads, h2.Name(), c.Heads.Candidate, h.Name())
	}
}

func TestBestKeepsTheFirstWithinMargin(t *testing.T) {
	m := func(kind, core string, g float64) Measurement {
		return Measurement{Candidate: Candidate{Kind: kind, CoreType: core}, GFLOPS: g}
	}
	for _, tc := range []struct {
		ms   []Measurement
		want Candidate
	}{
		{[]Measurement{m(KindOneDNN, "", 100), m(KindOpenBLAS, "", 102)}, Candidate{Kind: KindOneDNN}},
		{[]Measurement{m(KindOneDNN, "", 100), m(KindOpenBLAS, "", 110), m(KindOpenBLAS, "Zen", 120)}, Candidate{KindOpenBLAS, "Zen"}},
		{[]Measurement{{Candidate: Candidate{Kind: KindOneDNN}, Err: "missing"}, m(KindGo, "", 10)}, Candidate{Kind: KindGo}},
	} {
		got, ok := best(tc.ms)
		if !ok || got.Candidate != tc.want {
			t.Errorf("best(%v) = %v, want %v", tc.ms, got.Candidate, tc.want)
		}
	}
	if _, ok := best([]Measurement{{Err: "x"}}); ok {
		t.Error("nothing measured, yet a choice")
	}
}

func TestExplicitChoice(t *testing.T) {
	if _, _, err := chooseExplicit("nonsense"); err == nil {
		t.Error("ROFORMER_BLAS=nonsense accepted")
	}
	_, want := fallback()
	if _, c, err := chooseExplicit("/nonexistent/libopenblas.so"); err == nil || c.Candidate != want {
		t.Errorf("missing library: %v, %+v, want the fallback %v", err, c, want)
	}
	if b, c, err := chooseExplicit("go"); err != nil || b.Name() != Go().Name() || c.Kind != KindGo {
		t.Errorf("go: %v %+v", err, c)
	}
	if _, _, err := chooseExplicit("go-asm:sse"); err == nil {
		t.Error("ROFORMER_BLAS=go-asm:sse accepted")
	}
	for _, k := range asmKernels() {
		b, c, err := chooseExplicit("go-asm:" + k.isa)
		if g, ok := b.(*goAsm); err != nil || !ok || g.k.isa != k.isa || c.Candidate != (Candidate{KindGoAsm, k.isa}) {
			t.Errorf("go-asm:%s: %v, %s, %+v", k.isa, err, b.Name(), c)
		}
	}
}

// A kernel set asked for is the kernel set that runs (OpenBLAS's own
// report), also when another instance of OpenBLAS is loaded already.
func TestOpenBLASKernelSets(t *testing.T) {
	own, err := openOpenBLAS("", "")
	if err != nil {
		t.Skip(err)
	}
	if !CPU().AVX2 {
		t.Skip("no AVX2")
	}
	o, err := openOpenBLAS("", "Haswell")
	if err != nil {
		t.Fatal(err)
	}
	if o.kernels != "Haswell" || !strings.Contains(o.Name(), "Haswell") {
		t.Errorf("asked for Haswell, runs %q (%s); own choice %q", o.kernels, o.Name(), own.kernels)
	}
	testBackend(t, o)
}

// Without any library the choice is go-asm where it runs (amd64 with AVX2,
// no purego tag), measured, with gonum left out of the quick measurement;
// elsewhere it falls back to gonum.
func TestNoLibraryChoosesGoAsm(t *testing.T) {
	l := libraries{}
	cs := l.candidates(CPU())
	want := []Candidate{{Kind: KindGo}}
	if goAsmBest() != nil {
		want = []Candidate{{Kind: KindGoAsm}, {Kind: KindGo}}
	}
	if fmt.Sprint(cs) != fmt.Sprint(want) {
		t.Fatalf("candidates without libraries: %v, want %v", cs, want)
	}
	ms := l.measureAll(cs, true)
	m, ok := best(ms)
	if !ok || m.Candidate != want[0] || !(m.GFLOPS > 0) {
		t.Errorf("measurements %+v", ms)
	}
	if len(ms) == 2 && ms[1].Err == "" {
		t.Errorf("gonum measured in the quick probe: %+v", ms[1])
	}
}

// ROFORMER_BLAS_NOLIBS=1 hides both libraries, as on a fresh machine.
func TestNoLibsHidesTheLibraries(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no run-time loading on windows")
	}
	t.Setenv("ROFORMER_BLAS_NOLIBS", "1")
	if _, err := openOneDNN(""); err == nil || !strings.Contains(err.Error(), "ROFORMER_BLAS_NOLIBS") {
		t.Errorf("oneDNN: %v", err)
	}
	if _, err := openOpenBLAS("", ""); err == nil || !strings.Contains(err.Error(), "ROFORMER_BLAS_NOLIBS") {
		t.Errorf("OpenBLAS: %v", err)
	}
}

// The heads follow every explicit choice of the layers' backend, so that
// UseGo's golden numbers and the tests that run the math through each
// backend (Set) cover the attention products too.
func TestExplicitChoiceSetsTheHeads(t *testing.T) {
	prev := Set(Go())
	defer Set(prev)
	if CurrentHeads().Name() != Go().Name() {
		t.Errorf("after Set(Go()), the heads run on %s", CurrentHeads().Name())
	}
	for _, b := range Available() {
		Set(b)
		if CurrentHeads() != b {
			t.Errorf("after Set(%s), the heads run on %s", b.Name(), CurrentHeads().Name())
		}
	}
	UseGo()
	if CurrentHeads().Name() != Go().Name() {
		t.Errorf("after UseGo, the heads run on %s", CurrentHeads().Name())
	}
}

// chooseHeads takes go-asm for the heads where the layers run on a C
// library, and the layers' backend otherwise.
func TestChooseHeads(t *testing.T) {
	g := goAsmBest()
	if g == nil {
		h, c := chooseHeads(Go(), Candidate{Kind: KindGo})
		if h.Name() != Go().Name() || c.Candidate.Kind != KindGo {
			t.Errorf("without go-asm: %s, %+v", h.Name(), c)
		}
		return
	}
	if h, c := chooseHeads(g, Candidate{Kind: KindGoAsm}); h != g || c.Kind != KindGoAsm {
		t.Errorf("go-asm layers: heads %s, %+v", h.Name(), c)
	}
	if h, c := chooseHeads(Go(), Candidate{Kind: KindGo}); h.Name() != Go().Name() || c.Kind != KindGo {
		t.Errorf("gonum layers: heads %s, %+v", h.Name(), c)
	}
	if h, c := chooseHeads(Go(), Candidate{Kind: KindOneDNN}); h != g || c.Kind != KindGoAsm {
		t.Errorf("oneDNN layers: heads %s, %+v", h.Name(), c)
	}
}

// HeadSgemm sends short tiles to the layers' backend and long ones to the
// heads', with the same results as Sgemm.
func TestHeadSgemmDispatch(t *testing.T) {
	prev := Set(Go())
	defer Set(prev)
	rec := &recorder{Backend: Go()}
	mu.Lock()
	heads = rec
	mu.Unlock()
	for _, tc := range []struct {
		m, n, k int
		long    bool
	}{{128, 128, 64, false}, {192, 255, 64, false}, {192, 512, 64, true}, {192, 64, 512, true}, {300, 64, 100, true}} {
		rec.calls = 0
		a, b := make([]float32, tc.m*tc.k), make([]float32, tc.k*tc.n)
		for i := range a {
			a[i] = float32(i%7) - 3
		}
		for i := range b {
			b[i] = float32(i%5) - 2
		}
		c, want := make([]float32, tc.m*tc.n), make([]float32, tc.m*tc.n)
		HeadSgemm(false, false, tc.m, tc.n, tc.k, 1, a, tc.k, b, tc.n, 0, c, tc.n)
		Go().Sgemm(false, false, tc.m, tc.n, tc.k, 1, a, tc.k, b, tc.n, 0, want, tc.n)
		if (rec.calls == 1) != tc.long {
			t.Errorf("%d×%d×%d: %d calls on the heads' backend, long %v", tc.m, tc.n, tc.k, rec.calls, tc.long)
		}
		for i := range c {
			if c[i] != want[i] {
				t.Fatalf("%d×%d×%d: element %d %g, want %g", tc.m, tc.n, tc.k, i, c[i], want[i])
			}
		}
	}
}

type recorder struct {
	Backend
	calls int
}

func (r *recorder) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	r.calls++
	r.Backend.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
