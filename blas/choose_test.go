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

// chooseHeads keeps the layers' backend unless go-asm measures faster,
// and measures nothing when go-asm is the layers' backend or absent.
func TestChooseHeads(t *testing.T) {
	g := goAsmBest()
	if g == nil {
		h, c := chooseHeads(Go(), Candidate{Kind: KindGo})
		if h.Name() != Go().Name() || c.Candidate.Kind != KindGo || len(c.Measurements) != 0 {
			t.Errorf("without go-asm: %s, %+v", h.Name(), c)
		}
		return
	}
	h, c := chooseHeads(g, Candidate{Kind: KindGoAsm})
	if h != g || c.Kind != KindGoAsm || len(c.Measurements) != 0 {
		t.Errorf("go-asm layers: heads %s, %+v", h.Name(), c)
	}
	// Against gonum's fallback (3–40% of go-asm's speed) go-asm wins.
	h, c = chooseHeads(Go(), Candidate{Kind: KindOpenBLAS})
	if h != g || c.Kind != KindGoAsm || len(c.Measurements) != 2 || c.Measurements[1].GFLOPS <= c.Measurements[0].GFLOPS {
		t.Errorf("against a slow backend: heads %s, %+v", h.Name(), c)
	}
}
