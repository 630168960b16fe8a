package distributed

import (
	"fmt"
	"sync"
)

// Loopback returns an in-process group of n ranks, one Comm per rank, for
// tests and for trying a program's collectives without MPI: each rank is
// driven by its own goroutine, a collective returns when all n have called
// it, and sums are taken in rank order (so they are deterministic). Ranks
// that call different collectives together, or pass buffers of different
// lengths, all get an error where MPI would hang or corrupt. Abort ends the
// process.
func Loopback(n int) []Comm {
	if n < 1 {
		panic(fmt.Sprintf("distributed: Loopback(%d): need at least one rank", n))
	}
	h := &hub{n: n, in: make([]any, n)}
	h.cond = sync.NewCond(&h.mu)
	cs := make([]Comm, n)
	for r := range cs {
		cs[r] = &loop{h: h, rank: r}
	}
	return cs
}

// hub is the meeting point of a Loopback group. Collective number gen
// gathers one contribution per rank in in; the last rank to arrive computes
// the result from them and publishes it in out and err, where it stays
// until every rank has read it (none can start the next collective before).
type hub struct {
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	gen     int
	arrived int
	op      string
	in      []any
	out     any
	err     error
}

type loop struct {
	h      *hub
	rank   int
	closed bool
}

// meet deposits x as this rank's part of collective op and returns the
// result combine computes from every rank's part (in rank order).
func (l *loop) meet(op string, x any, combine func(in []any) (any, error)) (any, error) {
	if l.closed {
		return nil, fmt.Errorf("distributed: rank %d: %s after Close", l.rank, op)
	}
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	gen := h.gen
	if h.arrived == 0 {
		h.op, h.err = op, nil
	} else if h.op != op && h.err == nil {
		h.err = fmt.Errorf("distributed: ranks called different collectives together (%s and %s)", h.op, op)
	}
	h.in[l.rank] = x
	h.arrived++
	if h.arrived < h.n {
		for h.gen == gen {
			h.cond.Wait()
		}
		return h.out, h.err
	}
	if h.err == nil {
		h.out, h.err = combine(h.in)
	} else {
		h.out = nil
	}
	clear(h.in)
	h.arrived = 0
	h.gen++
	h.cond.Broadcast()
	return h.out, h.err
}

func (l *loop) Rank() int { return l.rank }
func (l *loop) Size() int { return l.h.n }

func sameLen[T any](op string, in []any) (int, error) {
	n := len(in[0].([]T))
	for r, x := range in {
		if len(x.([]T)) != n {
			return 0, fmt.Errorf("distributed: %s: rank 0 passed %d values, rank %d %d", op, n, r, len(x.([]T)))
		}
	}
	return n, nil
}

func sum[T float32 | float64](op string) func([]any) (any, error) {
	return func(in []any) (any, error) {
		n, err := sameLen[T](op, in)
		if err != nil {
			return nil, err
		}
		s := make([]T, n)
		for _, x := range in {
			for i, v := range x.([]T) {
				s[i] += v
			}
		}
		return s, nil
	}
}

func (l *loop) AllreduceSum32(buf []float32) error {
	s, err := l.meet("AllreduceSum32", buf, sum[float32]("AllreduceSum32"))
	if err == nil {
		copy(buf, s.([]float32))
	}
	return err
}

func (l *loop) AllreduceSum64(buf []float64) error {
	s, err := l.meet("AllreduceSum64", buf, sum[float64]("AllreduceSum64"))
	if err == nil {
		copy(buf, s.([]float64))
	}
	return err
}

func (l *loop) Bcast(buf []byte, root int) error {
	if root < 0 || root >= l.h.n {
		return fmt.Errorf("distributed: broadcast root %d is not a rank of a group of %d", root, l.h.n)
	}
	s, err := l.meet(fmt.Sprintf("Bcast(root %d)", root), buf, func(in []any) (any, error) {
		if _, err := sameLen[byte]("Bcast", in); err != nil {
			return nil, err
		}
		return append([]byte(nil), in[root].([]byte)...), nil
	})
	if err == nil {
		copy(buf, s.([]byte))
	}
	return err
}

func (l *loop) Gather(buf []byte, root int) ([][]byte, error) {
	if root < 0 || root >= l.h.n {
		return nil, fmt.Errorf("distributed: gather root %d is not a rank of a group of %d", root, l.h.n)
	}
	s, err := l.meet(fmt.Sprintf("Gather(root %d)", root), buf, func(in []any) (any, error) {
		out := make([][]byte, len(in))
		for r, x := range in {
			out[r] = append([]byte{}, x.([]byte)...)
		}
		return out, nil
	})
	if err != nil || l.rank != root {
		return nil, err
	}
	return s.([][]byte), nil
}

func (l *loop) Barrier() error {
	_, err := l.meet("Barrier", nil, func([]any) (any, error) { return nil, nil })
	return err
}

func (l *loop) Abort(code int) { exit(code) }

func (l *loop) Close() error {
	l.closed = true
	return nil
}
