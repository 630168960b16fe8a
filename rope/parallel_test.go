package rope

import (
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
)

// Forward and Backward split large inputs over the kernels' worker pool;
// the result is bit-identical to a serial run (one thread), in both layouts
// and with shared or per-token positions.
func TestParallelBitIdentical(t *testing.T) {
	defer kernels.SetThreads(kernels.Threads())
	rng := testutil.Rand(11)
	B, T, NH, HS := 3, 67, 4, 64 // B*T*C = 51456 ≥ 1<<15: the parallel path
	for _, layout := range []Layout{Interleaved, Halves} {
		r := mustNew(t, Config{HeadSize: HS, Layout: layout})
		x := testutil.RandN(rng, B*T*NH*HS, 1)
		for _, perToken := range []bool{false, true} {
			rows := T
			if perToken {
				rows = B * T
			}
			pos := make([]int, rows)
			for i := range pos {
				pos[i] = 3*i + 1
			}
			sin, cos := make([]float32, rows*HS/2), make([]float32, rows*HS/2)
			r.SinCos(sin, cos, pos)
			var want [2][]float32
			for _, threads := range []int{1, 2, 4} {
				kernels.SetThreads(threads)
				fwd, bwd := append([]float32(nil), x...), append([]float32(nil), x...)
				r.Forward(fwd, sin, cos, B, T, NH)
				r.Backward(bwd, sin, cos, B, T, NH)
				if threads == 1 {
					want = [2][]float32{fwd, bwd}
					continue
				}
				for k, got := range [2][]float32{fwd, bwd} {
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[k][i]) {
							t.Fatalf("layout %v per-token %v threads %d pass %d: element %d is %v, serial %v", layout, perToken, threads, k, i, got[i], want[k][i])
						}
					}
				}
			}
		}
	}
}
