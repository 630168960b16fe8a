package roformer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/roformer-go/roformer/blas"
)

// mappedPair saves a tiny masked-LM model and loads it twice: mapped (the
// default) and read (NoMap).
func mappedPair(t *testing.T, opts LoadOptions) (dir string, mapped, read *Loaded) {
	t.Helper()
	cfg := tinyConfig(func(c *Config) { c.HiddenSize, c.NumAttentionHeads, c.IntermediateSize = 24, 3, 40 })
	m := randomModel(t, cfg, HeadMaskedLM, 21)
	dir = t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	var err error
	if mapped, err = Load(dir, HeadMaskedLM, opts); err != nil {
		t.Fatal(err)
	}
	opts.NoMap = true
	if read, err = Load(dir, HeadMaskedLM, opts); err != nil {
		t.Fatal(err)
	}
	return dir, mapped, read
}

func tinyLogits(t *testing.T, m *Model) []float32 {
	t.Helper()
	ids := make([]int32, 2*9)
	for i := range ids {
		ids[i] = int32(i%10 + 1)
	}
	out, err := m.Forward(context.Background(), &Batch{B: 2, T: 9, InputIDs: ids}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return out.Logits.Data
}

// A model whose weights lie in the mapped file computes what the model
// read into memory computes: to the bit with this module's kernels and
// oneDNN, within float32 rounding with gonum's (whose sums start where the
// operand's alignment lets them).
func TestLoadMappedSameOutputs(t *testing.T) {
	_, mapped, read := mappedPair(t, LoadOptions{})
	if len(mapped.borrowed) == 0 {
		t.Fatal("nothing was bound in place: the file was not mapped")
	}
	if len(read.borrowed) != 0 {
		t.Fatalf("NoMap bound %d parameters in place", len(read.borrowed))
	}
	got, want := tinyLogits(t, mapped.Model), tinyLogits(t, read.Model)
	tol := 0.0
	if blas.Current().Name() == blas.Go().Name() {
		tol = 1e-6
	}
	for i := range want {
		if d := float64(got[i] - want[i]); d > tol || d < -tol {
			t.Fatalf("logit %d: mapped %v, read %v (tolerance %g, BLAS %s)", i, got[i], want[i], tol, blas.Current().Name())
		}
	}
	// q, k and v run fused only when copied into their block.
	for i := range mapped.Encoder.Layers {
		if _, _, ok := mapped.Encoder.Layers[i].fusedWeights(); !ok {
			t.Fatalf("layer %d: the mapped model lost the fused q/k/v layout", i)
		}
	}
}

// Training a mapped model copies its weights out of the mapping first
// (Params), so the file is never written and the run is the read model's.
func TestLoadMappedTrainsOwnCopy(t *testing.T) {
	dir, mapped, read := mappedPair(t, LoadOptions{})
	file := filepath.Join(dir, "model.safetensors")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Loaded{mapped, read} {
		ps := l.Params()
		for _, p := range ps {
			if p.Grad == nil || len(p.Grad) != len(p.Data) {
				t.Fatalf("%s: gradient of %d values for %d weights", p.Name, len(p.Grad), len(p.Data))
			}
			for i := range p.Data {
				p.Data[i] += 1 // writes the model's copy, never the file
			}
		}
	}
	if len(mapped.borrowed) != 0 {
		t.Fatalf("Params left %d parameters in the mapping", len(mapped.borrowed))
	}
	after, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("writing a mapped model's weights changed the file")
	}
	wp, rp := mapped.Weights(), read.Weights()
	for i := range wp {
		if !bytes.Equal(f32bytes(wp[i].Data), f32bytes(rp[i].Data)) {
			t.Fatalf("%s differs between the mapped and the read model", wp[i].Name)
		}
	}
}

// A mapped model prepared for int8 or bf16 keeps no float32 copy of a
// prepared weight in its own memory: the small parameters are copied out of
// the mapping and the rest released, and its outputs are the read model's.
func TestLoadMappedPrepared(t *testing.T) {
	for _, p := range []Precision{PrecisionInt8, PrecisionBF16} {
		t.Run(string(p), func(t *testing.T) {
			probe := randomModel(t, tinyConfig(nil), HeadMaskedLM, 1)
			if err := probe.SetPrecision(p); err != nil {
				t.Skipf("this machine cannot run %s: %v", p, err)
			}
			_, mapped, read := mappedPair(t, LoadOptions{Precision: p})
			got, want := tinyLogits(t, mapped.Model), tinyLogits(t, read.Model)
			for i := range want {
				// q, k and v run as three prepared layers here, one in the read model
				if d := got[i] - want[i]; d > 1e-3 || d < -1e-3 {
					t.Fatalf("logit %d: mapped %v, read %v", i, got[i], want[i])
				}
			}
			for _, w := range mapped.Weights() {
				small := strings.HasSuffix(w.Name, ".bias") || strings.Contains(w.Name, "LayerNorm")
				if small && inBorrowed(mapped.Model, w.Data) {
					t.Errorf("%s (%d values) still lies in the mapping", w.Name, len(w.Data))
				}
			}
		})
	}
}

func inBorrowed(m *Model, d []float32) bool {
	for _, p := range m.borrowed {
		if len(p.Data) > 0 && unsafe.SliceData(p.Data) == unsafe.SliceData(d) {
			return true
		}
	}
	return false
}

func f32bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// layoutTol is the absolute tolerance of a comparison that is exact but
// for where the operands lie (a mapped file, an arena, another model's
// memory): 0, but for gonum's BLAS, whose sums start where an operand's
// alignment lets them (measured: up to 1.6e-5 on hidden states near 1).
func layoutTol() float64 {
	if blas.Current().Name() == blas.Go().Name() {
		return 1e-4
	}
	return 0
}
