package pipeline

import (
	"math"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tensor"
)

func TestSparsePool(t *testing.T) {
	// 2 rows × 3 positions × 4 entries; row 1's last position is padding.
	logits := []float32{
		-1, 0.5, 2, -3,
		1, 0.25, -2, -3,
		0, 3, 1, -1,

		4, -1, -1, -1,
		-1, -1, 0.5, -1,
		9, 9, 9, 9, // masked out
	}
	out := &roformer.Output{Logits: &tensor.Tensor{Shape: []int{2, 3, 4}, Data: logits}}
	want := [][]float64{
		{math.Log(2), math.Log(4), math.Log(3), 0},
		{math.Log(5), 0, math.Log(1.5), 0},
	}
	masks := [][]int32{{1, 1, 1}, {1, 1, 0}}
	for i := range 2 {
		got, err := SparsePool(out, masks[i], i)
		if err != nil {
			t.Fatal(err)
		}
		for v := range want[i] {
			if math.Abs(float64(got[v])-want[i][v]) > 1e-6 {
				t.Errorf("row %d entry %d: %g, want %g", i, v, got[v], want[i][v])
			}
		}
	}
	if _, err := SparsePool(out, []int32{0, 0, 0}, 0); err == nil {
		t.Error("an all-0 mask: no error")
	}
	if _, err := SparsePool(&roformer.Output{}, masks[0], 0); err == nil {
		t.Error("no logits: no error")
	}
	if _, err := SparsePool(out, masks[0], 2); err == nil {
		t.Error("row 2 of 2: no error")
	}
}
