package roformer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/tensor"
)

// A RoFormerModel checkpoint saved alone has no "roformer." prefix; F16
// weights load too (converted to float32).
func TestBindWithoutPrefixAndF16(t *testing.T) {
	m := randomModel(t, tinyConfig(nil), HeadBase, 21)
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	f, err := checkpoint.ReadSafetensors(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []*checkpoint.Entry
	for _, n := range f.Names {
		e := f.Tensors[n]
		e.Name = strings.TrimPrefix(n, "roformer.")
		e.DType = "F16"
		entries = append(entries, e)
	}
	if err := checkpoint.WriteSafetensors(filepath.Join(dir, "model.safetensors"), entries, nil); err != nil {
		t.Fatal(err)
	}
	l, err := Load(dir, HeadBase, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.DTypes["F16"] == 0 || !strings.Contains(strings.Join(l.Report.Notes, " "), "prefix") {
		t.Errorf("dtypes %v, notes %q", l.DTypes, l.Report.Notes)
	}
	w := l.Encoder.Layers[0].Query.W.Data
	for i, v := range m.Encoder.Layers[0].Query.W.Data {
		if got := tensor.F16ToF32(tensor.F32ToF16(v)); w[i] != got {
			t.Fatalf("query weight %d: %v, want the F16 value %v", i, w[i], got)
		}
	}
}

// One error names every missing, mis-shaped and unexpected tensor.
func TestBindReportsEverything(t *testing.T) {
	m := randomModel(t, tinyConfig(nil), HeadMaskedLM, 22)
	sd := m.StateDict()
	sd["roformer.encoder.layer.0.attention.self.key.weight"] = &tensor.Tensor{Shape: []int{8, 7}, Data: make([]float32, 56)}
	delete(sd, "roformer.encoder.layer.1.output.LayerNorm.bias")
	delete(sd, "cls.predictions.transform.dense.weight")
	sd["pooler.dense.weight"] = &tensor.Tensor{Shape: []int{2}, Data: make([]float32, 2)}
	m2, _ := New(m.Config, HeadMaskedLM)
	_, err := m2.Bind(sd, BindOptions{})
	if err == nil {
		t.Fatal("bad checkpoint accepted")
	}
	for _, want := range []string{"2 missing", "roformer.encoder.layer.1.output.LayerNorm.bias [8]", "cls.predictions.transform.dense.weight [8 8]",
		"1 with the wrong shape", "key.weight: checkpoint has [8 7], the model needs [8 8]", "1 unexpected: pooler.dense.weight"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// Unexpected tensors alone are reported, not fatal (HF ignores them), unless Strict.
	sd = m.StateDict()
	sd["pooler.dense.weight"] = &tensor.Tensor{Shape: []int{2}, Data: make([]float32, 2)}
	rep, err := m2.Bind(sd, BindOptions{})
	if err != nil || len(rep.Unexpected) != 1 {
		t.Errorf("unexpected-only: err %v, report %+v", err, rep)
	}
	if _, err := m2.Bind(sd, BindOptions{Strict: true}); err == nil {
		t.Error("Strict accepted an unexpected tensor")
	}
}

// Saved folders reload to identical parameters, and the config round-trips.
func TestSaveLoadRoundTrip(t *testing.T) {
	for _, head := range []Head{HeadMaskedLM, HeadSequenceCls, HeadTokenCls, HeadQA, HeadMultipleChoice, HeadCausalLM} {
		m := randomModel(t, tinyConfig(func(c *Config) { c.EmbeddingSize = 6 }), head, 23)
		dir := t.TempDir()
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		l, err := Load(dir, head, LoadOptions{Bind: BindOptions{Strict: true}})
		if err != nil {
			t.Fatalf("%s: %v", head, err)
		}
		a, b := m.Params(), l.Params()
		for i := range a {
			if d, _ := tensor.MaxAbsDiff(a[i].Data, b[i].Data); d != 0 || a[i].Name != b[i].Name {
				t.Fatalf("%s: %s differs after the round trip", head, a[i].Name)
			}
		}
		raw, _ := os.ReadFile(filepath.Join(dir, "config.json"))
		if !strings.Contains(string(raw), `"`+head.HFClass()+`"`) {
			t.Errorf("%s: config.json architectures: %s", head, raw)
		}
	}
}
