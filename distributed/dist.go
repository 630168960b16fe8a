package distributed

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
)

// Comm is a group of processes that run collective operations together.
// Every rank must make the same collective calls in the same order, with
// buffers of the same length (Bcast: the same length on every rank).
type Comm interface {
	// Rank is this process's index in the group, 0 ≤ Rank < Size.
	Rank() int
	// Size is the number of processes in the group.
	Size() int
	// AllreduceSum32 replaces buf, on every rank, with the element-wise
	// sum over the ranks of their bufs: buf[i] = Σ_r buf_r[i]. The order of
	// the additions is the library's (it may differ between elements, but
	// every rank gets the same bits).
	AllreduceSum32(buf []float32) error
	// AllreduceSum64 is AllreduceSum32 for float64.
	AllreduceSum64(buf []float64) error
	// Bcast copies root's buf into every other rank's buf.
	Bcast(buf []byte, root int) error
	// Gather returns, on root, every rank's buf in rank order (buf's
	// lengths may differ between ranks); on the other ranks it returns nil.
	Gather(buf []byte, root int) ([][]byte, error)
	// Barrier returns when every rank has called it.
	Barrier() error
	// Abort ends every process of the job with exit status code; it does
	// not return (the Local group exits the process).
	Abort(code int)
	// Close leaves the group (MPI_Finalize). No other call may follow.
	Close() error
}

// Local returns the group of this process alone: Rank 0, Size 1, every
// collective an identity (Gather returns [][]byte{buf}).
func Local() Comm { return local{} }

type local struct{}

func (local) Rank() int                      { return 0 }
func (local) Size() int                      { return 1 }
func (local) AllreduceSum32([]float32) error { return nil }
func (local) AllreduceSum64([]float64) error { return nil }
func (local) Barrier() error                 { return nil }
func (local) Close() error                   { return nil }
func (local) Abort(code int)                 { exit(code) }

func (local) Bcast(_ []byte, root int) error {
	if root != 0 {
		return fmt.Errorf("distributed: broadcast root %d is not a rank of a group of 1", root)
	}
	return nil
}

func (local) Gather(buf []byte, root int) ([][]byte, error) {
	if root != 0 {
		return nil, fmt.Errorf("distributed: gather root %d is not a rank of a group of 1", root)
	}
	return [][]byte{buf}, nil
}

// Launch says how a process was started by an MPI launcher.
type Launch struct {
	Launcher   string // "Open MPI"
	Rank, Size int    // in MPI_COMM_WORLD
	LocalRank  int    // among the ranks on this host
	LocalSize  int    // ranks on this host; 0 when not known
}

// Detect reports whether the process was started by Open MPI's mpirun (or
// mpiexec, orterun, prterun), reading its environment through getenv
// (os.Getenv): OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK, and
// OMPI_COMM_WORLD_LOCAL_RANK and OMPI_COMM_WORLD_LOCAL_SIZE where set. A
// malformed value is an error naming the variable.
func Detect(getenv func(string) string) (Launch, bool, error) {
	size := getenv("OMPI_COMM_WORLD_SIZE")
	if size == "" {
		return Launch{}, false, nil
	}
	l := Launch{Launcher: "Open MPI"}
	num := func(name string, dst *int, min int, need bool) error {
		v := getenv(name)
		if v == "" {
			if need {
				return fmt.Errorf("distributed: %s is set but %s is not", "OMPI_COMM_WORLD_SIZE", name)
			}
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return fmt.Errorf("distributed: environment variable %s=%q is not an integer >= %d", name, v, min)
		}
		*dst = n
		return nil
	}
	if err := num("OMPI_COMM_WORLD_SIZE", &l.Size, 1, true); err != nil {
		return Launch{}, false, err
	}
	if err := num("OMPI_COMM_WORLD_RANK", &l.Rank, 0, true); err != nil {
		return Launch{}, false, err
	}
	if err := num("OMPI_COMM_WORLD_LOCAL_RANK", &l.LocalRank, 0, false); err != nil {
		return Launch{}, false, err
	}
	if err := num("OMPI_COMM_WORLD_LOCAL_SIZE", &l.LocalSize, 1, false); err != nil {
		return Launch{}, false, err
	}
	if l.Rank >= l.Size {
		return Launch{}, false, fmt.Errorf("distributed: OMPI_COMM_WORLD_RANK %d is not below OMPI_COMM_WORLD_SIZE %d", l.Rank, l.Size)
	}
	return l, true, nil
}

// Agree returns, on every rank of c, an error when any rank's err is not
// nil: that rank's own err, and on the others an error naming the lowest
// failing rank (whose own message says why). It lets every rank leave a
// phase together when one of them fails, instead of the others waiting in
// the next collective. It is itself a collective (one AllreduceSum64 of
// Size values); with one rank it returns err.
func Agree(c Comm, err error) error {
	if c.Size() == 1 {
		return err
	}
	failed := make([]float64, c.Size()) // failed[r] = 1 for each failing rank r
	if err != nil {
		failed[c.Rank()] = 1
	}
	if cerr := c.AllreduceSum64(failed); cerr != nil {
		if err != nil {
			return err
		}
		return cerr
	}
	if err != nil {
		return err
	}
	for r, f := range failed {
		if f != 0 {
			return fmt.Errorf("%w: rank %d failed (its own message says why); rank %d stops too", ErrOtherRank, r, c.Rank())
		}
	}
	return nil
}

// ErrOtherRank is wrapped by the errors of Agree on the ranks that did not
// fail themselves.
var ErrOtherRank = errors.New("distributed: another rank failed")

// CheckSame returns an error on every rank of c unless every rank's b is
// rank 0's (compared by SHA-256, broadcast from rank 0): what names the
// bytes in the message ("parameters at step 12"). Data-parallel training
// uses it to catch ranks that started from different data or drifted
// apart. It is a collective (a Bcast and an Agree).
func CheckSame(c Comm, what string, b []byte) error {
	if c.Size() == 1 {
		return nil
	}
	mine := sha256.Sum256(b)
	root := mine
	if err := c.Bcast(root[:], 0); err != nil {
		return fmt.Errorf("distributed: comparing %s between ranks: %w", what, err)
	}
	var err error
	if mine != root {
		err = fmt.Errorf("distributed: rank %d's %s differ from rank 0's (sha256 %x…, rank 0 %x…)", c.Rank(), what, mine[:6], root[:6])
	}
	return Agree(c, err)
}
