//go:build !windows

package distributed

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/roformer-go/roformer/internal/dlopen"
)

// Open MPI's constants (mpi.h of Open MPI 4 and 5).
const (
	mpiSuccess           = 0
	mpiThreadFunneled    = 1
	mpiMaxErrorString    = 256
	mpiMaxLibraryVersion = 256
	mpiInPlace           = 1 // MPI_IN_PLACE is (void *) 1
)

// LibraryNames are the file names Init tries, in order, when no path is
// given: Open MPI 4 and 5's libmpi.
var LibraryNames = []string{"libmpi.so.40", "libmpi.so"}

// mpiLib holds the library's functions and handles.
type mpiLib struct {
	// functions
	initThread, initialized, finalize, commRank, commSize, commSetErrhandler   uintptr
	allreduce, bcast, barrier, gather, gatherv, abort, errorString, libVersion uintptr
	// handles: addresses of Open MPI's predefined objects
	commWorld, float, double, byte_, int_, opSum, errorsReturn uintptr
}

var (
	initMu   sync.Mutex
	initDone bool // MPI_Init may run once per process
)

// Init loads Open MPI from path (or from LibraryNames when path is ""),
// initialises it (MPI_Init_thread at MPI_THREAD_FUNNELED) and returns the
// group of every process of the job (MPI_COMM_WORLD). A process started
// without mpirun becomes a group of one (MPI's singleton start). Init may
// be called once per process: MPI cannot be initialised again after Close.
func Init(path string) (c Comm, err error) {
	initMu.Lock()
	defer initMu.Unlock()
	if initDone {
		return nil, errors.New("distributed: MPI was already initialised in this process (it can be once)")
	}
	lib, version, err := loadMPI(path)
	if err != nil {
		return nil, err
	}
	m := &mpiComm{lib: lib, version: version, calls: make(chan func()), quit: make(chan struct{})}
	ready := make(chan error)
	go m.serve(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	initDone = true
	return m, nil
}

// loadMPI opens the library and looks up every symbol Init needs.
func loadMPI(path string) (lib *mpiLib, version string, err error) {
	defer func() {
		if r := recover(); r != nil {
			lib, err = nil, fmt.Errorf("distributed: loading MPI: %v", r)
		}
	}()
	names := LibraryNames
	if path != "" {
		names = []string{path}
	}
	// Global: Open MPI loads its components (mca_*.so) with dlopen, and
	// they resolve symbols of libmpi and libopen-pal through the global
	// namespace.
	h, err := dlopen.First(names, dlopen.Global)
	if err != nil {
		return nil, "", fmt.Errorf("distributed: Open MPI not found (%v); install it, e.g. apt-get install openmpi-bin libopenmpi-dev", err)
	}
	lib = new(mpiLib)
	syms := []struct {
		name string
		dst  *uintptr
	}{
		{"MPI_Init_thread", &lib.initThread}, {"MPI_Initialized", &lib.initialized}, {"MPI_Finalize", &lib.finalize},
		{"MPI_Comm_rank", &lib.commRank}, {"MPI_Comm_size", &lib.commSize}, {"MPI_Comm_set_errhandler", &lib.commSetErrhandler},
		{"MPI_Allreduce", &lib.allreduce}, {"MPI_Bcast", &lib.bcast}, {"MPI_Barrier", &lib.barrier},
		{"MPI_Gather", &lib.gather}, {"MPI_Gatherv", &lib.gatherv}, {"MPI_Abort", &lib.abort},
		{"MPI_Error_string", &lib.errorString}, {"MPI_Get_library_version", &lib.libVersion},
		{"ompi_mpi_comm_world", &lib.commWorld}, {"ompi_mpi_float", &lib.float}, {"ompi_mpi_double", &lib.double},
		{"ompi_mpi_byte", &lib.byte_}, {"ompi_mpi_int", &lib.int_}, {"ompi_mpi_op_sum", &lib.opSum},
		{"ompi_mpi_errors_return", &lib.errorsReturn},
	}
	for _, s := range syms {
		p, err := purego.Dlsym(h, s.name)
		if err != nil {
			if strings.HasPrefix(s.name, "ompi_") {
				return nil, "", fmt.Errorf("distributed: %s has no symbol %s: only Open MPI's library is supported (MPICH's handles are integers)", names[0], s.name)
			}
			return nil, "", fmt.Errorf("distributed: %w", err)
		}
		*s.dst = p
	}
	buf := make([]byte, mpiMaxLibraryVersion)
	var n int32
	if r, _, _ := purego.SyscallN(lib.libVersion, uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n))); r == mpiSuccess {
		version = strings.TrimSpace(string(buf[:max(0, min(int(n), len(buf)))]))
		version = strings.TrimRight(version, "\x00")
	}
	runtime.KeepAlive(buf)
	return lib, version, nil
}

// mpiComm is MPI_COMM_WORLD of an initialised Open MPI. Every call runs on
// the goroutine serve, locked to the OS thread that initialised MPI.
type mpiComm struct {
	lib        *mpiLib
	version    string
	rank, size int
	calls      chan func()
	quit       chan struct{}
	mu         sync.Mutex // guards closed
	closed     bool
}

// serve initialises MPI on a locked OS thread and then runs calls on it
// until Close.
func (m *mpiComm) serve(ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	if err := m.start(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case f := <-m.calls:
			f()
		case <-m.quit:
			return
		}
	}
}

func (m *mpiComm) start() error {
	l := m.lib
	var provided int32
	// Open MPI installs handlers for SIGSEGV, SIGBUS, SIGFPE and SIGABRT to
	// print a stack trace; they would replace the Go runtime's, which turns
	// faults into panics. Unless the user chose otherwise, leave them out.
	if _, ok := os.LookupEnv("OMPI_MCA_opal_signal"); !ok {
		os.Setenv("OMPI_MCA_opal_signal", "")
	}
	if r, _, _ := purego.SyscallN(l.initThread, 0, 0, mpiThreadFunneled, uintptr(unsafe.Pointer(&provided))); r != mpiSuccess {
		return fmt.Errorf("distributed: MPI_Init_thread failed with error code %d", int32(r))
	}
	if provided < mpiThreadFunneled {
		return fmt.Errorf("distributed: MPI provides thread level %d, below MPI_THREAD_FUNNELED", provided)
	}
	if r, _, _ := purego.SyscallN(l.commSetErrhandler, l.commWorld, l.errorsReturn); r != mpiSuccess {
		return m.errorf("MPI_Comm_set_errhandler", r)
	}
	var rank, size int32
	if r, _, _ := purego.SyscallN(l.commRank, l.commWorld, uintptr(unsafe.Pointer(&rank))); r != mpiSuccess {
		return m.errorf("MPI_Comm_rank", r)
	}
	if r, _, _ := purego.SyscallN(l.commSize, l.commWorld, uintptr(unsafe.Pointer(&size))); r != mpiSuccess {
		return m.errorf("MPI_Comm_size", r)
	}
	m.rank, m.size = int(rank), int(size)
	return nil
}

// errorf turns MPI error code r of the call op into an error with MPI's
// message. It runs on the MPI thread.
func (m *mpiComm) errorf(op string, r uintptr) error {
	buf := make([]byte, mpiMaxErrorString+1)
	var n int32
	msg := ""
	if rr, _, _ := purego.SyscallN(m.lib.errorString, r, uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n))); rr == mpiSuccess {
		msg = strings.TrimRight(string(buf[:max(0, min(int(n), len(buf)))]), "\x00")
	}
	runtime.KeepAlive(buf)
	if msg == "" {
		return fmt.Errorf("distributed: rank %d: %s failed with error code %d", m.rank, op, int32(r))
	}
	return fmt.Errorf("distributed: rank %d: %s failed: %s (error code %d)", m.rank, op, msg, int32(r))
}

var errClosed = errors.New("distributed: the MPI group is closed")

// do runs f on the MPI thread and returns its error.
func (m *mpiComm) do(f func() error) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errClosed
	}
	m.mu.Unlock()
	done := make(chan error, 1)
	m.calls <- func() { done <- f() }
	return <-done
}

// String names the library and the group, e.g. "Open MPI v4.1.4 …, rank 0 of 2".
func (m *mpiComm) String() string {
	v, _, _ := strings.Cut(m.version, ",")
	return fmt.Sprintf("%s, rank %d of %d", v, m.rank, m.size)
}

func (m *mpiComm) Rank() int { return m.rank }
func (m *mpiComm) Size() int { return m.size }

// maxCount is the most elements one MPI call moves (its count is a C int).
const maxCount = math.MaxInt32

// allreduce sums n elements of size bytes at p in place, in chunks of at
// most maxCount elements.
func (m *mpiComm) allreduce(op string, p unsafe.Pointer, n, size int, dtype uintptr) error {
	return m.do(func() error {
		for off := 0; off < n; off += maxCount {
			k := min(maxCount, n-off)
			q := unsafe.Add(p, off*size)
			if r, _, _ := purego.SyscallN(m.lib.allreduce, mpiInPlace, uintptr(q), uintptr(k), dtype, m.lib.opSum, m.lib.commWorld); r != mpiSuccess {
				return m.errorf(op, r)
			}
		}
		return nil
	})
}

func (m *mpiComm) AllreduceSum32(buf []float32) error {
	if len(buf) == 0 {
		return nil
	}
	err := m.allreduce("MPI_Allreduce (float32 sum)", unsafe.Pointer(&buf[0]), len(buf), 4, m.lib.float)
	runtime.KeepAlive(buf)
	return err
}

func (m *mpiComm) AllreduceSum64(buf []float64) error {
	if len(buf) == 0 {
		return nil
	}
	err := m.allreduce("MPI_Allreduce (float64 sum)", unsafe.Pointer(&buf[0]), len(buf), 8, m.lib.double)
	runtime.KeepAlive(buf)
	return err
}

func (m *mpiComm) checkRoot(op string, root int) error {
	if root < 0 || root >= m.size {
		return fmt.Errorf("distributed: %s root %d is not a rank of a group of %d", op, root, m.size)
	}
	return nil
}

func (m *mpiComm) Bcast(buf []byte, root int) error {
	if err := m.checkRoot("broadcast", root); err != nil {
		return err
	}
	if len(buf) == 0 {
		return nil
	}
	p := unsafe.Pointer(&buf[0])
	err := m.do(func() error {
		for off := 0; off < len(buf); off += maxCount {
			k := min(maxCount, len(buf)-off)
			if r, _, _ := purego.SyscallN(m.lib.bcast, uintptr(unsafe.Add(p, off)), uintptr(k), m.lib.byte_, uintptr(root), m.lib.commWorld); r != mpiSuccess {
				return m.errorf("MPI_Bcast", r)
			}
		}
		return nil
	})
	runtime.KeepAlive(buf)
	return err
}

func (m *mpiComm) Gather(buf []byte, root int) ([][]byte, error) {
	if err := m.checkRoot("gather", root); err != nil {
		return nil, err
	}
	if len(buf) > maxCount {
		return nil, fmt.Errorf("distributed: gather of %d bytes from rank %d: at most %d bytes a rank", len(buf), m.rank, maxCount)
	}
	n := int32(len(buf))
	var counts, displs []int32
	if m.rank == root {
		counts, displs = make([]int32, m.size), make([]int32, m.size)
	}
	l := m.lib
	err := m.do(func() error {
		var recv uintptr
		if counts != nil {
			recv = uintptr(unsafe.Pointer(&counts[0]))
		}
		if r, _, _ := purego.SyscallN(l.gather, uintptr(unsafe.Pointer(&n)), 1, l.int_, recv, 1, l.int_, uintptr(root), l.commWorld); r != mpiSuccess {
			return m.errorf("MPI_Gather (sizes)", r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var all []byte
	if counts != nil {
		total := 0
		for i, c := range counts {
			if total+int(c) > maxCount {
				return nil, fmt.Errorf("distributed: gather of more than %d bytes in all on rank %d", maxCount, root)
			}
			displs[i] = int32(total)
			total += int(c)
		}
		all = make([]byte, max(total, 1))
	}
	var one [1]byte
	send := unsafe.Pointer(&one[0])
	if len(buf) > 0 {
		send = unsafe.Pointer(&buf[0])
	}
	err = m.do(func() error {
		var recv, pc, pd uintptr
		if counts != nil {
			recv, pc, pd = uintptr(unsafe.Pointer(&all[0])), uintptr(unsafe.Pointer(&counts[0])), uintptr(unsafe.Pointer(&displs[0]))
		}
		if r, _, _ := purego.SyscallN(l.gatherv, uintptr(send), uintptr(n), l.byte_, recv, pc, pd, l.byte_, uintptr(root), l.commWorld); r != mpiSuccess {
			return m.errorf("MPI_Gatherv", r)
		}
		return nil
	})
	runtime.KeepAlive(buf)
	runtime.KeepAlive(&one)
	if err != nil || counts == nil {
		return nil, err
	}
	out := make([][]byte, m.size)
	for i := range out {
		out[i] = all[displs[i] : displs[i]+counts[i] : displs[i]+counts[i]]
	}
	return out, nil
}

func (m *mpiComm) Barrier() error {
	return m.do(func() error {
		if r, _, _ := purego.SyscallN(m.lib.barrier, m.lib.commWorld); r != mpiSuccess {
			return m.errorf("MPI_Barrier", r)
		}
		return nil
	})
}

// Abort calls MPI_Abort on the calling thread (not the MPI thread, which
// may be blocked in a collective that will never complete): Open MPI then
// ends every rank of the job.
func (m *mpiComm) Abort(code int) {
	purego.SyscallN(m.lib.abort, m.lib.commWorld, uintptr(code))
	exit(code) // MPI_Abort does not return; should it, end this rank at least
}

func (m *mpiComm) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	err := m.do(func() error {
		if r, _, _ := purego.SyscallN(m.lib.finalize); r != mpiSuccess {
			return m.errorf("MPI_Finalize", r)
		}
		return nil
	})
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	close(m.quit)
	return err
}
