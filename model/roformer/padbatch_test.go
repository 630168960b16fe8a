package roformer

import (
	"slices"
	"testing"
)

func TestPadBatch(t *testing.T) {
	ids := [][]int32{{5, 6}, {7, 8, 9}, {}}
	types := [][]int32{{0, 1}, {1, 1, 0}, {}}
	b := PadBatch(3, 4, 3, func(i int) ([]int32, []int32) { return ids[i], types[i] })
	for _, c := range []struct {
		name      string
		got, want []int32
	}{
		{"input_ids", b.InputIDs, []int32{5, 6, 3, 3, 7, 8, 9, 3, 3, 3, 3, 3}},
		{"token_type_ids", b.TokenTypeIDs, []int32{0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0}},
		{"attention_mask", b.AttentionMask, []int32{1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if b.B != 3 || b.T != 4 || b.PositionIDs != nil {
		t.Errorf("got B=%d T=%d position_ids %v, want 3, 4, nil", b.B, b.T, b.PositionIDs)
	}
}
