package blas

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// CBLAS enum values (cblas.h).
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

type openBLAS struct {
	name  string
	sgemm func(order, transA, transB, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32)
}

func libraryNames() []string {
	switch runtime.GOOS {
	case "darwin":
		return []string{"libopenblas.dylib", "/opt/homebrew/opt/openblas/lib/libopenblas.dylib", "/usr/local/opt/openblas/lib/libopenblas.dylib"}
	default:
		return []string{"libopenblas.so.0", "libopenblas.so", "libopenblasp.so.0"}
	}
}

// openOpenBLAS loads cblas_sgemm from path, or from the usual library names
// when path is empty, and pins OpenBLAS to one thread.
func openOpenBLAS(path string) (b *openBLAS, err error) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" && runtime.GOOS != "freebsd" {
		return nil, fmt.Errorf("blas: run-time loading of OpenBLAS is not supported on %s", runtime.GOOS)
	}
	defer func() {
		// purego panics when a symbol cannot be registered; turn it into an error.
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("blas: loading OpenBLAS: %v", r)
		}
	}()
	names := libraryNames()
	if path != "" {
		names = []string{path}
	}
	var lib uintptr
	var errs []string
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			lib = h
			break
		}
		errs = append(errs, err.Error())
	}
	if lib == 0 {
		return nil, errors.New("blas: OpenBLAS not found (" + strings.Join(errs, "; ") + "); install it, e.g. apt-get install libopenblas0-pthread")
	}
	o := &openBLAS{name: "openblas"}
	purego.RegisterLibFunc(&o.sgemm, lib, "cblas_sgemm")
	if sym, err := purego.Dlsym(lib, "openblas_set_num_threads"); err == nil {
		var set func(int32)
		purego.RegisterFunc(&set, sym)
		set(1)
	}
	if sym, err := purego.Dlsym(lib, "openblas_get_config"); err == nil {
		var cfg func() *byte
		purego.RegisterFunc(&cfg, sym)
		if p := cfg(); p != nil {
			o.name = "openblas " + goString(p)
		}
	}
	return o, nil
}

func goString(p *byte) string {
	var sb strings.Builder
	for i := 0; i < 512; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		sb.WriteByte(c)
	}
	return strings.TrimSpace(sb.String())
}

func (o *openBLAS) Name() string { return o.name }

func (o *openBLAS) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := int32(cblasNoTrans), int32(cblasNoTrans)
	if transA {
		ta = cblasTrans
	}
	if transB {
		tb = cblasTrans
	}
	var pa, pb *float32
	if len(a) > 0 {
		pa = &a[0]
	}
	if len(b) > 0 {
		pb = &b[0]
	}
	// lda/ldb must be ≥ 1 for cblas even when the matrix is empty.
	o.sgemm(cblasRowMajor, ta, tb, int32(m), int32(n), int32(k), alpha, pa, int32(max(lda, 1)), pb, int32(max(ldb, 1)), beta, &c[0], int32(ldc))
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
}
