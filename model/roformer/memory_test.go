package roformer

import (
	"path/filepath"
	"testing"

	"github.com/roformer-go/roformer/tensor"
)

// WeightMemory counts each weight once, in the form it lies in: mapped
// float32 where Load bound it in place, own float32 once the model
// trains, codes or BF16 bytes where a quantized folder's are kept, and
// the prepared layers' copies.
func TestWeightMemory(t *testing.T) {
	m, dir := int8Model(t)
	all := int64(0)
	for _, p := range m.Weights() {
		all += 4 * int64(tensor.Numel(p.Shape))
	}
	l, err := Load(filepath.Join(dir, "fp32"), HeadMaskedLM, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := l.WeightMemory()
	t.Logf("fp32 mapped: %+v of %d", w, all)
	if w.Mapped == 0 || w.Float32+w.Mapped != all || w.Stored != 0 {
		t.Fatalf("fp32 folder, mapped: %+v, want %d bytes of float32 weights, most mapped", w, all)
	}
	l.Params() // trains: its own copy
	if w := l.WeightMemory(); w.Float32 != all || w.Mapped != 0 {
		t.Fatalf("after Params: %+v, want %d bytes of own float32", w, all)
	}
	if int8Runs := precisionSupported(PrecisionInt8) == nil; int8Runs {
		q, err := Load(filepath.Join(dir, "int8"), HeadMaskedLM, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w := q.WeightMemory()
		t.Logf("int8 folder: %+v", w)
		if w.Stored == 0 || w.Prepared == 0 || w.Float32+w.Mapped >= all/4 {
			t.Fatalf("int8 folder: %+v: want codes kept and prepared, float32 only for biases and norms (of %d)", w, all)
		}
	}
}
