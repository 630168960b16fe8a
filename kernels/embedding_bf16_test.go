package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/roformer-go/roformer/tensor"
)

// EmbeddingForwardBF16 from a table's BF16 bytes gives what
// EmbeddingForward gives from the table widened to float32, to the bit,
// with and without token types, over the rows one goroutine and several
// take.
func TestEmbeddingForwardBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	const V, TV, C = 50, 2, 24
	raw := make([]byte, 2*V*C)
	wide := make([]float32, V*C)
	for i := range wide {
		h := tensor.F32ToBF16(float32(r.NormFloat64()))
		raw[2*i], raw[2*i+1] = byte(h), byte(h>>8)
		wide[i] = tensor.BF16ToF32(h)
	}
	wtt := make([]float32, TV*C)
	for i := range wtt {
		wtt[i] = float32(r.NormFloat64())
	}
	for _, BT := range []int{1, 7, 64, 65, 300} {
		ids, types := make([]int32, BT), make([]int32, BT)
		for i := range ids {
			ids[i], types[i] = int32(r.IntN(V)), int32(r.IntN(TV))
		}
		for _, tt := range [][]float32{wtt, nil} {
			want, got := make([]float32, BT*C), make([]float32, BT*C)
			EmbeddingForward(want, ids, types, wide, tt, BT, C)
			EmbeddingForwardBF16(got, ids, types, raw, tt, BT, C)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("BT %d, types %v: out[%d] = %v, want %v", BT, tt != nil, i, got[i], want[i])
				}
			}
		}
	}
}
