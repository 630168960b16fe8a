package optim

import (
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/tensor"
)

// Step with several workers (ranges on the kernels' worker pool that cross
// parameter boundaries) is bit-identical to a serial Step.
func TestStepParallelBitIdentical(t *testing.T) {
	defer kernels.SetThreads(kernels.Threads())
	kernels.SetThreads(4)
	sizes := []int{70001, 5, 40003, 1 << 15, 3}
	newParams := func() []*tensor.Param {
		rng := testutil.Rand(3)
		var ps []*tensor.Param
		for i, n := range sizes {
			name := fmt.Sprint("layer", i, ".weight")
			if i%2 == 1 {
				name = fmt.Sprint("layer", i, ".bias") // not decayed
			}
			p := tensor.NewParam(name, n)
			copy(p.Data, testutil.RandN(rng, n, 1))
			ps = append(ps, p)
		}
		return ps
	}
	run := func(workers int) []*tensor.Param {
		ps := newParams()
		cfg := DefaultAdamWConfig(0.1)
		cfg.Workers = workers
		o, err := NewAdamW(ps, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rng := testutil.Rand(4)
		for step := 0; step < 3; step++ {
			for _, p := range ps {
				copy(p.Grad, testutil.RandN(rng, len(p.Data), 1))
			}
			o.Step(1e-3 * float64(step+1))
		}
		return ps
	}
	want := run(1)
	for _, workers := range []int{2, 3, 4, 16} {
		got := run(workers)
		for i := range got {
			for j := range got[i].Data {
				if math.Float32bits(got[i].Data[j]) != math.Float32bits(want[i].Data[j]) {
					t.Fatalf("workers %d: %s[%d] = %v, serial %v", workers, got[i].Name, j, got[i].Data[j], want[i].Data[j])
				}
			}
		}
	}
}
