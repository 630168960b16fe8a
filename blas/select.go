package blas

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

var (
	mu       sync.RWMutex
	current  Backend = goBackend{}
	heads    Backend = goBackend{} // HeadSgemm's
	chosen           = Choice{Candidate: Candidate{Kind: KindGo}, Name: goBackend{}.Name(), Reason: "not chosen yet"}
	loadErr  error   // why an explicit ROFORMER_BLAS choice failed
	loadErrs []error // why libraries could not be loaded (automatic choice)
	once     sync.Once
)

// Init chooses the backend the first time it is called (later calls do
// nothing). ROFORMER_BLAS decides when set: "go" (gonum), "go-asm" (our
// assembly SGEMM; "go-asm:avx512" or "go-asm:avx2" forces a microkernel),
// "openblas", "openblas:KERNELSET" (an OPENBLAS_CORETYPE name), "onednn",
// or a library path; "auto" or unset measures the candidates once per
// machine and library build (about 0.5 s) and reuses the cached verdict
// after that. ROFORMER_BLAS_HEADS, in the same words, fixes the backend
// of the attention heads' products (HeadSgemm) alone; unset, they follow
// the automatic choice or ROFORMER_BLAS. Without any library, go-asm is the choice on amd64 with AVX2
// or AVX-512, and gonum elsewhere (or with the purego build tag).
// Init returns the error of an explicit choice that cannot be loaded; the
// pure-Go fallback is then in use. Sgemm calls Init itself.
func Init() error {
	once.Do(func() {
		var b, h Backend
		var c Choice
		switch v := os.Getenv("ROFORMER_BLAS"); v {
		case "", "auto":
			b, h, c = chooseAuto(false)
		default:
			b, c, loadErr = chooseExplicit(v)
			h = b
		}
		if v := os.Getenv("ROFORMER_BLAS_HEADS"); v != "" && v != "auto" && loadErr == nil {
			hb, hc, err := chooseExplicit(v)
			if err != nil {
				loadErr = fmt.Errorf("ROFORMER_BLAS_HEADS=%s: %w", v, err)
			} else {
				h, c.Heads = hb, &hc
				c.Heads.Reason = "ROFORMER_BLAS_HEADS=" + v
			}
		}
		mu.Lock()
		current, heads, chosen = b, h, c
		mu.Unlock()
	})
	return loadErr
}

// Probe measures every candidate again (the pure-Go fallback too), makes
// the fastest the backend in use, rewrites the cached verdict and returns
// it. ROFORMER_BLAS is ignored.
func Probe() Choice {
	once.Do(func() {})
	b, h, c := chooseAuto(true)
	mu.Lock()
	current, heads, chosen, loadErr = b, h, c, nil
	mu.Unlock()
	return c
}

// Chosen returns the backend in use and why it was chosen, choosing it
// first if that has not been done yet.
func Chosen() Choice {
	Init()
	mu.RLock()
	defer mu.RUnlock()
	return chosen
}

// Open loads OpenBLAS, or oneDNN when the file name contains "dnnl", from
// an explicit shared-library path and makes it the backend in use.
func Open(path string) error {
	once.Do(func() {}) // an explicit choice overrides the automatic one
	b, c, err := chooseExplicit(path)
	if err != nil {
		return err
	}
	c.Reason = "opened " + path
	use(b, c)
	return nil
}

// use makes b the backend of the layers and the heads, chosen as c says.
func use(b Backend, c Choice) {
	mu.Lock()
	current, heads, chosen = b, b, c
	mu.Unlock()
}

// UseGo makes gonum's pure-Go fallback the backend in use, whether or not
// a library or go-asm is present (the golden training numbers were
// recorded with it).
func UseGo() {
	once.Do(func() {})
	use(goBackend{}, Choice{Candidate: Candidate{Kind: KindGo}, Name: goBackend{}.Name(), Reason: "asked for (UseGo)"})
}

// Set makes b the backend in use, for the layers and the heads (HeadSgemm),
// and returns the previous one of the layers (tests use it
// to run the same math through every path).
func Set(b Backend) Backend {
	prev := Current()
	use(b, Choice{Candidate: Candidate{Kind: kindOf(b)}, Name: b.Name(), Reason: "set by the program"})
	return prev
}

// kindOf names the kind of one of the package's backends ("" for another
// implementation of Backend).
func kindOf(b Backend) string {
	switch b.(type) {
	case goBackend:
		return KindGo
	case *goAsm:
		return KindGoAsm
	case *oneDNN:
		return KindOneDNN
	case *openBLAS:
		return KindOpenBLAS
	}
	return ""
}

// UseBatchInvariant makes go-asm the backend of the layers and of the
// heads, as ROFORMER_BLAS=go-asm does: its sums do not depend on the rows
// beside a row (its blocks split the inner dimension by its length alone),
// so that, with the model's attention, a text's outputs are the same bits
// alone and in any batch (docs/serving.md, "Batching"). The libraries'
// kernels block the work by the number of rows. It fails where go-asm does
// not run (off amd64, or built with the purego tag).
func UseBatchInvariant() error {
	g := goAsmBest()
	if g == nil {
		return errors.New("blas: batch-invariant products need go-asm, which does not run here (amd64 with AVX2 or AVX-512, without the purego tag)")
	}
	Init()
	use(g, Choice{Candidate: Candidate{Kind: KindGoAsm}, Name: g.Name(), Reason: "batch-invariant products asked for"})
	return nil
}

// BatchInvariant reports whether the layers' and the heads' products run
// on go-asm, whose sums do not depend on the rows beside a row (see
// UseBatchInvariant).
func BatchInvariant() bool {
	Init()
	mu.RLock()
	defer mu.RUnlock()
	_, l := current.(*goAsm)
	_, h := heads.(*goAsm)
	return l && h
}

// Go returns the pure-Go fallback backend.
func Go() Backend { return goBackend{} }

// Available returns every backend this machine can load: oneDNN, OpenBLAS
// with its own kernel choice, go-asm with its fastest microkernel, and
// gonum's pure-Go fallback (tests run the same math through each).
func Available() []Backend {
	l := findLibraries()
	var bs []Backend
	if l.oneDNN != nil {
		bs = append(bs, l.oneDNN)
	}
	if l.openBLAS != nil {
		bs = append(bs, l.openBLAS)
	}
	if g := goAsmBest(); g != nil {
		bs = append(bs, g)
	}
	return append(bs, goBackend{})
}

// Current returns the backend in use, choosing it first if that has not
// been done yet.
func Current() Backend {
	Init()
	mu.RLock()
	defer mu.RUnlock()
	return current
}

// Name returns the name of the backend in use.
func Name() string { return Current().Name() }

// LoadError returns why an explicit ROFORMER_BLAS choice could not be
// loaded or, for the automatic choice, why libraries were missing (nil
// when both OpenBLAS and oneDNN were found).
func LoadError() error {
	Init()
	mu.RLock()
	defer mu.RUnlock()
	if loadErr != nil {
		return loadErr
	}
	return errors.Join(loadErrs...)
}
