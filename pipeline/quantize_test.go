package pipeline

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/model/roformer"
)

// A sentence-transformers folder quantized into int8 and bf16 is the same
// folder (tokenizer, modules, the Dense module's own weights) with the
// transformer's weights in one model.safetensors, the float32
// pytorch_model.bin left out; it opens in its precision and gives the
// vectors of the float32 folder within the precision's error.
func TestQuantizeSentenceFolder(t *testing.T) {
	src := filepath.Join("..", "sentence", "testdata", "st", "dense_tanh_normalize")
	fx := readSTFixture(t, src)
	inputs := make([]EmbedInput, len(fx.Texts))
	for i, s := range fx.Texts {
		inputs[i] = EmbedInput{Text: s}
	}
	embed := func(dir string, p roformer.Precision) ([][]float32, *Model) {
		m, err := Open(dir, OpenOptions{Precision: p})
		if err != nil {
			t.Fatal(err)
		}
		vecs, _, err := Embed(context.Background(), m.Model, m.Tokenizer, inputs, EmbedOptions{Sentence: m.Sentence, Truncate: true})
		if err != nil {
			t.Fatal(err)
		}
		return vecs, m
	}
	want, _ := embed(src, "")
	for _, tc := range []struct {
		p   roformer.Precision
		tol float64 // of unit vectors; measured: see the log
	}{{roformer.PrecisionInt8, 0.05}, {roformer.PrecisionBF16, 0.02}} {
		dst := filepath.Join(t.TempDir(), "out", string(tc.p))
		res, err := Quantize(src, dst, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"vocab.txt", "tokenizer_config.json", "modules.json", "1_Pooling/config.json", "2_Dense/pytorch_model.bin", "2_Dense/config.json"} {
			if !slices.Contains(res.Copied, f) {
				t.Errorf("%s: %s not copied: %v", tc.p, f, res.Copied)
			}
		}
		if !slices.Equal(res.Read, []string{"pytorch_model.bin"}) || len(res.Left) != 0 {
			t.Errorf("%s: read %v and left out %v, want the float32 pytorch_model.bin read", tc.p, res.Read, res.Left)
		}
		if _, err := os.Stat(filepath.Join(dst, "pytorch_model.bin")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the float32 weights are in the quantized folder (%v)", tc.p, err)
		}
		t.Logf("%s: weights %d → %d bytes", tc.p, res.WeightBytes, res.QuantizedBytes)
		// An int8 folder opens in int8 where the CPU runs it (else its
		// codes are dequantized); a bf16 one in fp32 unless asked, as
		// Hugging Face's from_pretrained does without torch_dtype.
		got, m := embed(dst, "")
		switch {
		case tc.p == roformer.PrecisionBF16 && m.Precision() != roformer.PrecisionFP32:
			t.Errorf("the bf16 folder opens in %s, not asked", m.Precision())
		case tc.p == roformer.PrecisionInt8 && m.Precision() != roformer.PrecisionInt8 && int8Runs():
			t.Errorf("the int8 folder opens in %s", m.Precision())
		}
		worst := 0.0
		for i := range want {
			for j := range want[i] {
				worst = max(worst, math.Abs(float64(got[i][j]-want[i][j])))
			}
		}
		t.Logf("%s: largest difference from the float32 folder's vectors %.3g (precision %s)", tc.p, worst, m.Precision())
		if worst > tc.tol {
			t.Errorf("%s: vectors differ from the float32 folder's by %.3g > %g", tc.p, worst, tc.tol)
		}
	}
}

// Quantize writes only into a new or empty folder, and leaves it as it was
// when it fails.
func TestQuantizeRefuses(t *testing.T) {
	src := filepath.Join("..", "sentence", "testdata", "st", "mean")
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Quantize(src, full, roformer.PrecisionInt8); err == nil {
		t.Fatal("Quantize wrote into a folder with a file in it")
	}
	if b, err := os.ReadFile(filepath.Join(full, "keep.txt")); err != nil || string(b) != "mine" {
		t.Fatalf("the folder's file is now %q (%v)", b, err)
	}
	if _, err := Quantize(src, filepath.Join(dir, "new"), roformer.PrecisionFP32); err == nil {
		t.Fatal("Quantize took fp32")
	}
	if _, err := Quantize(filepath.Join(dir, "missing"), filepath.Join(dir, "new"), roformer.PrecisionInt8); err == nil {
		t.Fatal("Quantize of a missing folder succeeded")
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 {
		t.Fatalf("failed calls left %d entries in the parent folder: %v", len(names), names)
	}
	// An empty folder is filled.
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Quantize(src, empty, roformer.PrecisionBF16); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty, OpenOptions{}); err != nil {
		t.Fatal(err)
	}
}

// int8Runs reports whether this machine computes in int8 (oneDNN).
func int8Runs() bool {
	_, err := blas.Int8()
	return err == nil
}
