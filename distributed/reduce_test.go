package distributed_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/roformer-go/roformer/distributed"
)

// onRanks runs f on every rank of cs, each in its own goroutine, and
// returns the ranks' errors.
func onRanks(cs []distributed.Comm, f func(c distributed.Comm) error) []error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() { errs[r] = f(c) })
	}
	wg.Wait()
	return errs
}

func TestLoopback(t *testing.T) {
	cs := distributed.Loopback(3)
	errs := onRanks(cs, func(c distributed.Comm) error {
		r := c.Rank()
		for round := range 50 { // many rounds: the rendezvous is reused
			f := []float32{float32(r), float32(round)}
			if err := c.AllreduceSum32(f); err != nil {
				return err
			}
			if f[0] != 3 || f[1] != float32(3*round) {
				return fmt.Errorf("round %d: AllreduceSum32 gave %v", round, f)
			}
		}
		d := []float64{float64(r)}
		if err := c.AllreduceSum64(d); err != nil || d[0] != 3 {
			return fmt.Errorf("AllreduceSum64: %v %v", d, err)
		}
		b := []byte{byte(r)}
		if err := c.Bcast(b, 2); err != nil || b[0] != 2 {
			return fmt.Errorf("Bcast: %v %v", b, err)
		}
		g, err := c.Gather([]byte(strings.Repeat("x", r)), 0)
		if err != nil {
			return err
		}
		if (r == 0) != (g != nil) || (r == 0 && fmt.Sprintf("%q", g) != `["" "x" "xx"]`) {
			return fmt.Errorf("Gather on rank %d: %q", r, g)
		}
		return c.Barrier()
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// Mismatched calls are errors on every rank, not a hang.
	cs = distributed.Loopback(2)
	errs = onRanks(cs, func(c distributed.Comm) error {
		if c.Rank() == 0 {
			return c.AllreduceSum32(make([]float32, 2))
		}
		return c.AllreduceSum32(make([]float32, 3))
	})
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d: buffers of 2 and 3 values: no error", r)
		}
	}
	errs = onRanks(cs, func(c distributed.Comm) error {
		if c.Rank() == 0 {
			return c.Barrier()
		}
		return c.AllreduceSum64(make([]float64, 1))
	})
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d: Barrier against AllreduceSum64: no error", r)
		}
	}
}

// TestReducer checks the bucketed mean against the plain one, for bucket
// sizes that split, fit and overflow the slices.
func TestReducer(t *testing.T) {
	lens := []int{3, 10, 2, 5, 0, 7, 1, 8}
	value := func(r, s, i int) float32 { return float32(r*1000 + s*37 + i) }
	for _, bucket := range []int{1, 4, 8, 9, 16, 100} {
		t.Run(fmt.Sprintf("bucket%d", bucket), func(t *testing.T) {
			const n = 4
			cs := distributed.Loopback(n)
			calls := make([]int64, n)
			errs := onRanks(cs, func(c distributed.Comm) error {
				r := c.Rank()
				bufs := make([][]float32, len(lens))
				for s, l := range lens {
					bufs[s] = make([]float32, l)
					for i := range bufs[s] {
						bufs[s][i] = value(r, s, i)
					}
				}
				red := distributed.NewReducer(c, bucket)
				if err := red.AllreduceMean32(bufs); err != nil {
					return err
				}
				calls[r] = red.Calls
				for s, b := range bufs {
					for i, got := range b {
						var sum float32
						for rr := range n {
							sum += value(rr, s, i)
						}
						if want := sum * (1.0 / n); got != want {
							return fmt.Errorf("slice %d [%d]: got %v, want %v", s, i, got, want)
						}
					}
				}
				if red.Values != 36 {
					return fmt.Errorf("moved %d values, want 36", red.Values)
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			t.Logf("bucket %d: %d allreduce calls", bucket, calls[0])
			if bucket >= 36 && calls[0] != 1 {
				t.Errorf("bucket %d holds everything, but %d calls were made", bucket, calls[0])
			}
		})
	}
}

func TestReducerLocal(t *testing.T) {
	b := [][]float32{{1, 2}}
	red := distributed.NewReducer(distributed.Local(), 0)
	if err := red.AllreduceMean32(b); err != nil || b[0][0] != 1 || red.Calls != 0 {
		t.Errorf("one rank: %v %v, %d calls", b, err, red.Calls)
	}
}

func TestAgree(t *testing.T) {
	cs := distributed.Loopback(3)
	errs := onRanks(cs, func(c distributed.Comm) error {
		if c.Rank() == 1 {
			return distributed.Agree(c, fmt.Errorf("disk full"))
		}
		return distributed.Agree(c, nil)
	})
	for r, err := range errs {
		switch {
		case r == 1 && (err == nil || err.Error() != "disk full"):
			t.Errorf("rank 1: %v, want its own error", err)
		case r != 1 && (err == nil || !strings.Contains(err.Error(), "rank 1 failed")):
			t.Errorf("rank %d: %v, want one naming rank 1", r, err)
		}
	}
	errs = onRanks(cs, func(c distributed.Comm) error { return distributed.Agree(c, nil) })
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v with no failure", r, err)
		}
	}
}
