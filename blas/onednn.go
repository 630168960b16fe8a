//go:build !windows

package blas

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/roformer-go/roformer/internal/dlopen"
)

// oneDNN is Intel's oneAPI Deep Neural Network Library (Debian libdnnl2),
// loaded at run time. It picks its kernels by instruction set (AVX2,
// AVX-512, VNNI, BF16, AMX) rather than by CPU name, so a processor newer
// than the library still gets its widest vectors.
type oneDNN struct {
	name    string
	version string // "2.6.3"
	isa     string // effective ISA, e.g. "avx512_core_bf16"
	lib     uintptr

	// sgemm is dnnl_sgemm: row-major, arguments by value (two of them
	// float32, so it goes through purego's RegisterFunc).
	sgemm func(transA, transB byte, m, n, k int64, alpha float32, a unsafe.Pointer, lda int64, b unsafe.Pointer, ldb int64, beta float32, c unsafe.Pointer, ldc int64) int32
	// gemmU8S8S32 is dnnl_gemm_u8s8s32.
	// sgemmSym and gemmU8Sym are the same functions' addresses, called
	// through ccallTramp on amd64 (no allocation per call).
	sgemmSym, gemmU8Sym uintptr
	gemmU8S8S32         func(transA, transB, offsetC byte, m, n, k int64, alpha float32, a unsafe.Pointer, lda int64, ao uint8, b unsafe.Pointer, ldb int64, bo int8, beta float32, c unsafe.Pointer, ldc int64, co unsafe.Pointer) int32
}

// dnnlVersion mirrors dnnl_version_t.
type dnnlVersion struct {
	major, minor, patch int32
	hash                *byte
	cpuRuntime          uint32
	gpuRuntime          uint32
}

var isaNames = map[int32]string{
	0x1: "sse41", 0x3: "avx", 0x7: "avx2", 0x407: "avx2_vnni",
	0x27: "avx512_core", 0x67: "avx512_core_vnni", 0xe7: "avx512_core_bf16", 0x3e7: "avx512_core_amx",
}

func oneDNNLibraryNames() []string {
	switch runtime.GOOS {
	case "darwin":
		return []string{"libdnnl.3.dylib", "libdnnl.2.dylib", "/opt/homebrew/lib/libdnnl.dylib", "/usr/local/lib/libdnnl.dylib"}
	default:
		return []string{"libdnnl.so.2", "libdnnl.so.3", "libdnnl.so"}
	}
}

// openOneDNN loads oneDNN from path, or from the usual library names when
// path is empty. oneDNN's Debian build threads with OpenMP; its products are
// kept to one thread each (OMP_NUM_THREADS=1 unless already set, read by
// the OpenMP runtime when it is loaded), since parallelism comes from the
// callers, as with OpenBLAS.
func openOneDNN(path string) (d *oneDNN, err error) {
	if err := librariesHidden("oneDNN"); err != nil {
		return nil, err
	}
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" && runtime.GOOS != "freebsd" {
		return nil, fmt.Errorf("blas: run-time loading of oneDNN is not supported on %s", runtime.GOOS)
	}
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("blas: loading oneDNN: %v", r)
		}
	}()
	if os.Getenv("OMP_NUM_THREADS") == "" {
		os.Setenv("OMP_NUM_THREADS", "1")
	}
	names := oneDNNLibraryNames()
	if path != "" {
		names = []string{path}
	}
	lib, err := dlopen.First(names, dlopen.Global)
	if err != nil {
		return nil, fmt.Errorf("blas: oneDNN not found (%v); install it, e.g. apt-get install libdnnl2", err)
	}
	d = &oneDNN{lib: lib}
	for _, s := range []struct {
		fn   any
		sym  *uintptr
		name string
	}{{&d.sgemm, &d.sgemmSym, "dnnl_sgemm"}, {&d.gemmU8S8S32, &d.gemmU8Sym, "dnnl_gemm_u8s8s32"}} {
		sym, err := purego.Dlsym(lib, s.name)
		if err != nil {
			return nil, fmt.Errorf("blas: oneDNN has no %s: %w", s.name, err)
		}
		purego.RegisterFunc(s.fn, sym)
		*s.sym = sym
	}
	if sym, err := purego.Dlsym(lib, "dnnl_version"); err == nil {
		var ver func() *dnnlVersion
		purego.RegisterFunc(&ver, sym)
		if v := ver(); v != nil {
			d.version = fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch)
		}
	}
	if sym, err := purego.Dlsym(lib, "dnnl_get_effective_cpu_isa"); err == nil {
		var isa func() int32
		purego.RegisterFunc(&isa, sym)
		v := isa()
		if n, ok := isaNames[v]; ok {
			d.isa = n
		} else {
			d.isa = fmt.Sprintf("isa 0x%x", v)
		}
	}
	d.name = "onednn " + d.version
	if d.isa != "" {
		d.name += " (" + d.isa + ")"
	}
	return d, nil
}

func (d *oneDNN) Name() string { return d.name }

func ptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

func (d *oneDNN) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	st := d.sgemmRaw(flag(transA), flag(transB), int64(m), int64(n), int64(k), alpha, ptr(a), int64(max(lda, 1)), ptr(b), int64(max(ldb, 1)), beta, ptr(c), int64(max(ldc, 1)))
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
	if st != 0 {
		// The shapes were checked by the caller; a failure here is a bug.
		panic(fmt.Sprintf("blas: dnnl_sgemm(%d, %d, %d) failed with status %d", m, n, k, st))
	}
}

// GemmU8S8S32 computes C = op(A)·op(B) (int32) for u8 A and s8 B, row-major,
// with no offsets.
func (d *oneDNN) GemmU8S8S32(transA, transB bool, m, n, k int, a []uint8, lda int, b []int8, ldb int, c []int32, ldc int) {
	var co int32
	st := d.gemmU8S8S32Raw(flag(transA), flag(transB), 'F', int64(m), int64(n), int64(k), 1, ptr(a), int64(max(lda, 1)), 0, ptr(b), int64(max(ldb, 1)), 0, 0, ptr(c), int64(max(ldc, 1)), unsafe.Pointer(&co))
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
	if st != 0 {
		panic(fmt.Sprintf("blas: dnnl_gemm_u8s8s32(%d, %d, %d) failed with status %d", m, n, k, st))
	}
}

func flag(t bool) byte {
	if t {
		return 'T'
	}
	return 'N'
}

// loadOneDNN loads oneDNN once per process.
var loadOneDNN = sync.OnceValues(func() (*oneDNN, error) { return openOneDNN("") })
