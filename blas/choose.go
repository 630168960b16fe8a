package blas

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/roformer-go/roformer/internal/atomicfile"
)

// Kinds of backend.
const (
	KindGo       = "go"
	KindOpenBLAS = "openblas"
	KindOneDNN   = "onednn"
)

// Candidate is one way to run the products: a library, and for OpenBLAS
// the kernel set asked for ("" is OpenBLAS's own choice).
type Candidate struct {
	Kind     string `json:"kind"`
	CoreType string `json:"coretype,omitempty"`
}

// String names the candidate as ROFORMER_BLAS and the probe print it:
// "onednn", "openblas", "openblas:SkylakeX", "go".
func (c Candidate) String() string {
	if c.CoreType != "" {
		return c.Kind + ":" + c.CoreType
	}
	return c.Kind
}

// Measurement is one candidate's speed on the probe's products.
type Measurement struct {
	Candidate
	Name   string  `json:"name,omitempty"`   // the backend's Name()
	GFLOPS float64 `json:"gflops,omitempty"` // one thread, the probe's products
	Millis float64 `json:"ms,omitempty"`     // time taken to load and measure it
	Err    string  `json:"error,omitempty"`  // why it could not be measured
}

// Choice is the backend in use and why.
type Choice struct {
	Candidate
	Name         string        `json:"name"`
	Reason       string        `json:"reason"`
	Measurements []Measurement `json:"measurements,omitempty"`
	Measured     time.Time     `json:"measured"`
	// Heads is the backend of HeadSgemm's long tiles and why (derived
	// from the layers' choice, so not cached; nil: the same as the layers').
	Heads     *Choice `json:"-"`
	Cached    bool    `json:"-"` // read from the cache file, not measured now
	CacheFile string  `json:"-"`
}

// cacheFile is what the probe's cache holds: the verdict and the key it is
// valid for (processor and library versions).
type cacheFile struct {
	Key    string `json:"key"`
	Choice Choice `json:"choice"`
}

// probeVersion is part of the cache key: a change to the probe's products
// or rules invalidates old verdicts.
// Version 3 added go-asm, our own assembly SGEMM, as a candidate; version
// 5 the heads' backend (HeadSgemm; 4 measured it, and was never released),
// version 6 the short query's products on cold weights.
const probeVersion = 6

// CacheDir returns the folder that holds the probe's verdict:
// $ROFORMER_CACHE_DIR, or roformer/ in the user's cache folder
// (os.UserCacheDir). It returns "" when neither can be found.
func CacheDir() string {
	if d := os.Getenv("ROFORMER_CACHE_DIR"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "roformer")
}

func cachePath() string {
	d := CacheDir()
	if d == "" {
		return ""
	}
	return filepath.Join(d, "blas-choice.json")
}

// readCache returns the verdict in path when its key is key. A missing,
// unreadable, corrupt or stale file gives ok == false (it is then
// measured again and rewritten).
func readCache(path, key string) (c Choice, ok bool) {
	if path == "" {
		return Choice{}, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Choice{}, false
	}
	var f cacheFile
	if err := json.Unmarshal(data, &f); err != nil || f.Key != key || f.Choice.Kind == "" {
		return Choice{}, false
	}
	return f.Choice, true
}

// writeCache writes the verdict with atomicfile, so that a reader never
// sees half a file.
func writeCache(path, key string, c Choice) error {
	if path == "" {
		return errors.New("no cache folder")
	}
	data, err := json.MarshalIndent(cacheFile{Key: key, Choice: c}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// 0o600: the cache file has always been private to its user.
	return atomicfile.Options{Perm: 0o600}.WriteFile(path, append(data, '\n'))
}

// libraries is what this process found: the libraries it could load with
// their identities, and why the others could not be loaded.
type libraries struct {
	openBLAS *openBLAS // OpenBLAS's own kernel choice
	oneDNN   *oneDNN
	errs     []error
}

func findLibraries() libraries {
	var l libraries
	if o, err := openOpenBLAS("", ""); err == nil {
		l.openBLAS = o
	} else {
		l.errs = append(l.errs, err)
	}
	if d, err := loadOneDNN(); err == nil {
		l.oneDNN = d
	} else {
		l.errs = append(l.errs, err)
	}
	return l
}

// key identifies the machine and the libraries: a verdict is reused only
// for the same processor and the same library builds.
func (l libraries) key(cpu CPUInfo) string {
	parts := []string{fmt.Sprintf("probe %d", probeVersion), runtime.GOOS + "/" + runtime.GOARCH, cpu.String(),
		fmt.Sprintf("stepping %d", cpu.Stepping)}
	if l.openBLAS != nil {
		parts = append(parts, "openblas "+l.openBLAS.config+" "+fileStamp("libopenblas"))
	} else {
		parts = append(parts, "openblas none")
	}
	if l.oneDNN != nil {
		parts = append(parts, "onednn "+l.oneDNN.version+" "+l.oneDNN.isa+" "+fileStamp("libdnnl"))
	} else {
		parts = append(parts, "onednn none")
	}
	if g := goAsmBest(); g != nil {
		parts = append(parts, "go-asm "+g.k.isa)
	} else {
		parts = append(parts, "go-asm none")
	}
	if v := os.Getenv("OPENBLAS_CORETYPE"); v != "" {
		parts = append(parts, "OPENBLAS_CORETYPE="+v)
	}
	return strings.Join(parts, "; ")
}

// fileStamp is the size and modification time of a loaded library's file,
// so that an upgrade of the same version string still invalidates.
func fileStamp(part string) string {
	p, err := loadedLibraryFile(part)
	if err != nil {
		return ""
	}
	st, err := os.Stat(p)
	if err != nil {
		return p
	}
	return fmt.Sprintf("%s %d %d", p, st.Size(), st.ModTime().Unix())
}

// candidates lists what can be measured on this machine: oneDNN, OpenBLAS
// with its own kernel choice and, unless the user fixed OPENBLAS_CORETYPE,
// the kernel sets this processor's instruction sets can run (chosen by
// instruction set, not by processor name), go-asm (amd64 with AVX2 or
// AVX-512, without the purego tag), and gonum's pure-Go fallback.
func (l libraries) candidates(cpu CPUInfo) []Candidate {
	var cs []Candidate
	if l.oneDNN != nil {
		cs = append(cs, Candidate{Kind: KindOneDNN})
	}
	if l.openBLAS != nil {
		cs = append(cs, Candidate{Kind: KindOpenBLAS})
		if os.Getenv("OPENBLAS_CORETYPE") == "" && runtime.GOOS == "linux" {
			var sets []string
			if cpu.AVX512F {
				sets = append(sets, "SkylakeX")
			}
			if cpu.AVX2 {
				sets = append(sets, "Haswell")
				if cpu.Vendor == "AuthenticAMD" {
					sets = append(sets, "Zen")
				}
			}
			for _, s := range sets {
				if !strings.EqualFold(s, l.openBLAS.kernels) {
					cs = append(cs, Candidate{Kind: KindOpenBLAS, CoreType: s})
				}
			}
		}
	}
	if goAsmBest() != nil {
		cs = append(cs, Candidate{Kind: KindGoAsm})
	}
	return append(cs, Candidate{Kind: KindGo})
}

// open makes the backend of a candidate.
func (l libraries) open(c Candidate) (Backend, error) {
	switch c.Kind {
	case KindGo:
		return goBackend{}, nil
	case KindGoAsm:
		if c.CoreType == "" {
			if g := goAsmBest(); g != nil {
				return g, nil
			}
		}
		g, err := goAsmFor(c.CoreType)
		if err != nil {
			return nil, err
		}
		return g, nil
	case KindOneDNN:
		if l.oneDNN == nil {
			return nil, errors.New("oneDNN is not loaded")
		}
		return l.oneDNN, nil
	case KindOpenBLAS:
		if c.CoreType == "" || (l.openBLAS != nil && strings.EqualFold(c.CoreType, l.openBLAS.kernels)) {
			if l.openBLAS == nil {
				return nil, errors.New("OpenBLAS is not loaded")
			}
			return l.openBLAS, nil
		}
		return openOpenBLAS("", c.CoreType)
	}
	return nil, fmt.Errorf("unknown backend kind %q", c.Kind)
}

// measureAll times each candidate: each is loaded and warmed up, then
// the candidates take turns for a few rounds (so that a burst of other
// load on the machine hits all of them alike) and each keeps its best
// round. With quick set (the automatic choice, which should take about
// 0.3 s), gonum's pure-Go fallback is left out when a library or go-asm is
// available (it is 3–40% of their speed, and slow to time), and OpenBLAS's other kernel
// sets are measured only when OpenBLAS's own choice is in contention
// (within margin of oneDNN, or oneDNN is missing).
func (l libraries) measureAll(cs []Candidate, quick bool) []Measurement {
	native := false
	for _, c := range cs {
		native = native || c.Kind != KindGo
	}
	bufs := newProbeBufs(probeShapes)
	ms := make([]Measurement, len(cs))
	bes := make([]Backend, len(cs))
	run := func(idx []int, rounds int) {
		for _, i := range idx {
			t0 := time.Now()
			b, err := l.open(cs[i])
			if err != nil {
				ms[i].Err = err.Error()
				continue
			}
			bes[i], ms[i].Name = b, b.Name()
			// Warm-up: library initialisation and, for oneDNN, its
			// just-in-time compiled kernels, which measured slow for two
			// rounds (0.3 GFLOP/s on the first call of a shape).
			probeRound(b, probeShapes, bufs)
			probeRound(b, probeShapes, bufs)
			ms[i].Millis = float64(time.Since(t0).Microseconds()) / 1000
		}
		for r := 0; r < rounds; r++ {
			for _, i := range idx {
				if bes[i] == nil {
					continue
				}
				t0 := time.Now()
				ms[i].GFLOPS = max(ms[i].GFLOPS, probeRound(bes[i], probeShapes, bufs))
				ms[i].Millis += float64(time.Since(t0).Microseconds()) / 1000
			}
		}
	}
	var first, rest []int
	for i, c := range cs {
		ms[i].Candidate = c
		switch {
		case quick && native && c.Kind == KindGo:
			ms[i].Err = "not measured: a faster backend is available"
		case c.Kind == KindGo:
			run([]int{i}, 1) // ~0.1 s a round
		case c.CoreType == "":
			first = append(first, i)
		default:
			rest = append(rest, i)
		}
	}
	run(first, 3)
	var onednn, own float64
	for _, i := range first {
		switch cs[i].Kind {
		case KindOneDNN:
			onednn = ms[i].GFLOPS
		case KindOpenBLAS:
			own = ms[i].GFLOPS
		}
	}
	if quick && onednn > 0 && own*margin < onednn {
		for _, i := range rest {
			ms[i].Err = "not measured: OpenBLAS's own kernels are more than 5% behind oneDNN"
		}
		rest = nil
	}
	// Kernel sets are compared with OpenBLAS's own choice in the same turns.
	for _, i := range first {
		if cs[i].Kind == KindOpenBLAS {
			rest = append(rest, i)
		}
	}
	run(rest, 3)
	return ms
}

// margin is how much faster than the first measured candidate (in the
// order of candidates: oneDNN, OpenBLAS's own kernels, other kernel sets,
// go-asm, gonum) another must be to replace it. The probe's rounds vary by up to ±5%
// between runs on a shared 2-core machine (AMD Zen 4: oneDNN 89–96,
// OpenBLAS's Haswell kernels 91–98 GFLOP/s), a verdict should not flip on
// noise, and oneDNN brings more than its SGEMM: float32 inference with
// prepacked weights (5–8% faster at base size), int8 and bfloat16.
const margin = 1.05

// best returns the candidate to use: the first measured one, unless
// another is more than margin faster, then the fastest.
func best(ms []Measurement) (Measurement, bool) {
	var first, fastest Measurement
	found := false
	for _, m := range ms {
		if m.Err != "" || m.GFLOPS <= 0 {
			continue
		}
		if !found {
			first, fastest, found = m, m, true
		}
		if m.GFLOPS > fastest.GFLOPS {
			fastest = m
		}
	}
	if fastest.GFLOPS > margin*first.GFLOPS {
		return fastest, found
	}
	return first, found
}

func describe(ms []Measurement) string {
	sorted := append([]Measurement(nil), ms...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].GFLOPS > sorted[j].GFLOPS })
	var parts []string
	for _, m := range sorted {
		if m.Err == "" {
			parts = append(parts, fmt.Sprintf("%s %.0f", m.Candidate, m.GFLOPS))
		}
	}
	return strings.Join(parts, ", ") + " GFLOP/s on one thread"
}

// chooseAuto picks the backends for this machine, of the layers and of
// the attention heads: the cached verdict when its key matches, otherwise a
// measurement of every candidate (about 0.5 s), which is then cached.
func chooseAuto(reprobe bool) (Backend, Backend, Choice) {
	cpu := CPU()
	libs := findLibraries()
	mu.Lock()
	loadErrs = libs.errs
	mu.Unlock()
	key := libs.key(cpu)
	path := cachePath()
	if !reprobe {
		if c, ok := readCache(path, key); ok {
			if b, err := libs.open(c.Candidate); err == nil {
				c.Cached, c.CacheFile, c.Name = true, path, b.Name()
				h, hc := chooseHeads(b, c.Candidate)
				c.Heads = hc
				return b, h, c
			}
		}
	}
	t0 := time.Now()
	ms := libs.measureAll(libs.candidates(cpu), !reprobe)
	took := time.Since(t0)
	m, ok := best(ms)
	if !ok {
		fb, fc := fallback()
		return fb, fb, Choice{Candidate: fc, Name: fb.Name(),
			Reason: "no backend could be measured; " + fc.Kind + " is in use", Measurements: ms}
	}
	b, err := libs.open(m.Candidate)
	if err != nil { // cannot happen: it was just measured
		var fc Candidate
		b, fc = fallback()
		m = Measurement{Candidate: fc, Name: b.Name()}
	}
	h, hc := chooseHeads(b, m.Candidate)
	c := Choice{Candidate: m.Candidate, Name: b.Name(), Measurements: ms, Measured: time.Now().UTC(), CacheFile: path, Heads: hc,
		Reason: fmt.Sprintf("fastest measured on this machine (%d ms): %s", took.Milliseconds(), describe(ms))}
	if err := writeCache(path, key, c); err != nil {
		c.Reason += fmt.Sprintf(" (verdict not cached: %v)", err)
	}
	return b, h, c
}

// fallback is the backend used when the chosen one cannot be: go-asm
// where it runs, else gonum's pure-Go SGEMM.
func fallback() (Backend, Candidate) {
	if g := goAsmBest(); g != nil {
		return g, Candidate{Kind: KindGoAsm}
	}
	return goBackend{}, Candidate{Kind: KindGo}
}

// chooseExplicit applies a ROFORMER_BLAS value other than "" and "auto":
// "go", "go-asm", "go-asm:avx512", "go-asm:avx2", "openblas",
// "openblas:KERNELSET", "onednn", or a library path (oneDNN when its file
// name contains "dnnl", OpenBLAS otherwise).
func chooseExplicit(v string) (Backend, Choice, error) {
	reason := "ROFORMER_BLAS=" + v
	var b Backend
	var err error
	var cand Candidate
	switch kind, core, _ := strings.Cut(v, ":"); {
	case v == KindGo:
		b, cand = goBackend{}, Candidate{Kind: KindGo}
	case kind == KindGoAsm:
		cand = Candidate{Kind: KindGoAsm, CoreType: core}
		b, err = libraries{}.open(cand)
	case kind == KindOpenBLAS:
		b, err = openOpenBLAS("", core)
		cand = Candidate{Kind: KindOpenBLAS, CoreType: core}
	case v == KindOneDNN:
		b, err = loadOneDNN()
		cand = Candidate{Kind: KindOneDNN}
	case strings.Contains(filepath.Base(v), "dnnl"):
		b, err = openOneDNN(v)
		cand = Candidate{Kind: KindOneDNN}
	case strings.ContainsAny(v, "/."):
		b, err = openOpenBLAS(v, "")
		cand = Candidate{Kind: KindOpenBLAS}
	default:
		err = fmt.Errorf("blas: backend %q: want auto, go, go-asm, go-asm:avx512, go-asm:avx2, openblas, openblas:KERNELSET, onednn or a library path", v)
	}
	if err != nil {
		fb, fc := fallback()
		return fb, Choice{Candidate: fc, Name: fb.Name(),
			Reason: reason + " could not be loaded; " + fc.Kind + " is in use"}, err
	}
	return b, Choice{Candidate: cand, Name: b.Name(), Reason: reason}, nil
}
