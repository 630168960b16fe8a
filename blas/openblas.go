//go:build !windows

package blas

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/roformer-go/roformer/internal/dlopen"
)

type openBLAS struct {
	name     string
	config   string  // openblas_get_config, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64"
	kernels  string  // openblas_get_corename: the kernel set running, e.g. "Zen"
	coreType string  // the kernel set asked for ("" = OpenBLAS's own choice)
	sgemmF   uintptr // sgemm_, the Fortran interface: every argument by pointer
}

// gemmArgs is the argument block of one sgemm_ call. It lives on the heap
// (pooled), so that SyscallN, which passes plain uintptrs, needs no
// allocation and no reflection per call (purego's RegisterFunc path, needed
// for cblas_sgemm's float arguments, allocated 7 times a call).
type gemmArgs struct {
	transA, transB byte
	m, n, k        int32
	lda, ldb, ldc  int32
	alpha, beta    float32
	args           [13]uintptr
}

var gemmPool = sync.Pool{New: func() any { return new(gemmArgs) }}

func libraryNames() []string {
	switch runtime.GOOS {
	case "darwin":
		return []string{"libopenblas.dylib", "/opt/homebrew/opt/openblas/lib/libopenblas.dylib", "/usr/local/opt/openblas/lib/libopenblas.dylib"}
	default:
		return []string{"libopenblas.so.0", "libopenblas.so", "libopenblasp.so.0"}
	}
}

// openOpenBLAS loads sgemm_ from path, or from the usual library names when
// path is empty, and pins OpenBLAS to one thread. coreType asks for one of
// OpenBLAS's kernel sets (its OPENBLAS_CORETYPE names: "Haswell",
// "SkylakeX", "Zen", ...); "" takes OpenBLAS's own choice, or the user's
// OPENBLAS_CORETYPE.
//
// OpenBLAS reads OPENBLAS_CORETYPE once, when it is loaded, and a process
// loads a library file once. A kernel set other than the one the process
// already has is therefore loaded from a private copy of the library file
// (Linux), which the dynamic loader treats as a library of its own.
func openOpenBLAS(path, coreType string) (b *openBLAS, err error) {
	if err := librariesHidden("OpenBLAS"); err != nil {
		return nil, err
	}
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" && runtime.GOOS != "freebsd" {
		return nil, fmt.Errorf("blas: run-time loading of OpenBLAS is not supported on %s", runtime.GOOS)
	}
	obMu.Lock()
	defer obMu.Unlock()
	if coreType == "" {
		coreType = os.Getenv("OPENBLAS_CORETYPE")
	}
	key := path + "|" + coreType
	if o, ok := obLoaded[key]; ok {
		return o, nil
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
	first := len(obLoaded) == 0
	if !first && coreType != "" && path == "" {
		// Another instance is loaded already: load a copy of its file
		// (an explicit path is opened as it is, also when
		// OPENBLAS_CORETYPE is set).
		src, err := loadedLibraryFile("libopenblas")
		if err != nil {
			return nil, fmt.Errorf("blas: OpenBLAS kernel set %s: %w", coreType, err)
		}
		cp, err := copyToTemp(src)
		if err != nil {
			return nil, fmt.Errorf("blas: OpenBLAS kernel set %s: %w", coreType, err)
		}
		defer os.Remove(cp) // the mapping outlives the name
		names = []string{cp}
	}
	prev, had := os.LookupEnv("OPENBLAS_CORETYPE")
	if coreType != "" {
		os.Setenv("OPENBLAS_CORETYPE", coreType)
	}
	lib, lerr := dlopen.First(names, dlopen.Local)
	if had {
		os.Setenv("OPENBLAS_CORETYPE", prev)
	} else {
		os.Unsetenv("OPENBLAS_CORETYPE")
	}
	if lerr != nil {
		return nil, fmt.Errorf("blas: OpenBLAS not found (%v); install it, e.g. apt-get install libopenblas0-pthread", lerr)
	}
	o := &openBLAS{name: "openblas", coreType: coreType}
	if o.sgemmF, err = purego.Dlsym(lib, "sgemm_"); err != nil {
		return nil, fmt.Errorf("blas: OpenBLAS has no sgemm_: %w", err)
	}
	if sym, err := purego.Dlsym(lib, "openblas_set_num_threads"); err == nil {
		var set func(int32)
		purego.RegisterFunc(&set, sym)
		set(1)
	}
	if sym, err := purego.Dlsym(lib, "openblas_get_config"); err == nil {
		var cfg func() *byte
		purego.RegisterFunc(&cfg, sym)
		if p := cfg(); p != nil {
			o.config = goString(p)
			o.name = "openblas " + o.config
		}
	}
	if sym, err := purego.Dlsym(lib, "openblas_get_corename"); err == nil {
		var core func() *byte
		purego.RegisterFunc(&core, sym)
		if p := core(); p != nil {
			o.kernels = goString(p)
		}
	}
	if coreType != "" && o.kernels != "" && !strings.EqualFold(o.kernels, coreType) {
		return nil, fmt.Errorf("blas: OpenBLAS was asked for kernel set %s and runs %s", coreType, o.kernels)
	}
	obLoaded[key] = o
	return o, nil
}

var (
	obMu     sync.Mutex
	obLoaded = map[string]*openBLAS{}
)

// loadedLibraryFile finds the file of a loaded library whose name contains
// part, from /proc/self/maps.
func loadedLibraryFile(part string) (string, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return "", fmt.Errorf("cannot find the loaded library's file: %w", err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		// A private copy made by copyToTemp shows as "(deleted)" after its
		// path; only the installed file counts.
		f := strings.Fields(line)
		if len(f) == 6 && strings.Contains(filepath.Base(f[5]), part) && !strings.HasPrefix(filepath.Base(f[5]), "roformer-") {
			return f[5], nil
		}
	}
	return "", fmt.Errorf("no loaded library named *%s* in /proc/self/maps", part)
}

// copyToTemp copies a file to a new temporary file and returns its name.
func copyToTemp(src string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.CreateTemp("", "roformer-"+filepath.Base(src)+"-*")
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(out.Name())
		return "", err
	}
	if err := out.Close(); err != nil {
		os.Remove(out.Name())
		return "", err
	}
	return out.Name(), nil
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
	// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the
	// operands and keep the transpose flags (what cblas_sgemm does itself).
	g := gemmPool.Get().(*gemmArgs)
	g.transA, g.transB = 'N', 'N'
	if transB {
		g.transA = 'T'
	}
	if transA {
		g.transB = 'T'
	}
	g.m, g.n, g.k = int32(n), int32(m), int32(k)
	g.lda, g.ldb, g.ldc = int32(max(ldb, 1)), int32(max(lda, 1)), int32(ldc)
	g.alpha, g.beta = alpha, beta
	var pa, pb unsafe.Pointer
	if len(b) > 0 {
		pa = unsafe.Pointer(&b[0])
	}
	if len(a) > 0 {
		pb = unsafe.Pointer(&a[0])
	}
	g.args = [13]uintptr{
		uintptr(unsafe.Pointer(&g.transA)), uintptr(unsafe.Pointer(&g.transB)),
		uintptr(unsafe.Pointer(&g.m)), uintptr(unsafe.Pointer(&g.n)), uintptr(unsafe.Pointer(&g.k)),
		uintptr(unsafe.Pointer(&g.alpha)), uintptr(pa), uintptr(unsafe.Pointer(&g.lda)),
		uintptr(pb), uintptr(unsafe.Pointer(&g.ldb)),
		uintptr(unsafe.Pointer(&g.beta)), uintptr(unsafe.Pointer(&c[0])), uintptr(unsafe.Pointer(&g.ldc)),
	}
	purego.SyscallN(o.sgemmF, g.args[:]...)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
	gemmPool.Put(g)
}
