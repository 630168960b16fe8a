package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/blas"
)

// env --probe prints, after the backends, one ceiling line per number
// format: a rate where this machine runs it (fp32 always), why not
// otherwise.
func TestEnvProbeCeilings(t *testing.T) {
	t.Setenv("ROFORMER_CACHE_DIR", t.TempDir()) // the probe rewrites its verdict
	prev := blas.Current()
	t.Cleanup(func() { blas.Set(prev) })
	code, out, stderr := runCLI(t, "env", "--probe", "--threads", "1")
	if code != 0 {
		t.Fatalf("env --probe: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	head, rest, ok := strings.Cut(out, "\nceilings   1 threads, ")
	if !ok || !strings.Contains(head, "GFLOP/s") {
		t.Fatalf("no backend measurements, then a ceilings line for 1 thread:\n%s", out)
	}
	lines := strings.Split(rest, "\n")
	if !strings.Contains(lines[0], blas.CeilingShapes()) {
		t.Errorf("ceilings line %q does not name the shapes %q", lines[0], blas.CeilingShapes())
	}
	_, oneDNNErr := blas.NewF32Matmul([]float32{1}, 1, 1)
	runs := map[string]bool{
		blas.FormatFP32:       true,
		blas.FormatFP32Packed: oneDNNErr == nil,
		blas.FormatBF16:       blas.BF16Supported() == nil,
		blas.FormatInt8:       oneDNNErr == nil,
	}
	for i, f := range blas.CeilingFormats {
		if i+1 >= len(lines) {
			t.Fatalf("no line for %s:\n%s", f, out)
		}
		fields := strings.Fields(lines[i+1])
		if len(fields) < 3 || fields[0] != f {
			t.Errorf("line %d %q does not start with %s", i+1, lines[i+1], f)
			continue
		}
		unit := "GFLOP/s"
		if f == blas.FormatInt8 {
			unit = "GOP/s"
		}
		measured := fields[2] == unit && fields[1] != "0.0"
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i+1]), f))
		if measured != runs[f] || (!measured && !strings.HasPrefix(rest, "not measured: ")) {
			t.Errorf("%s: line %q; this machine runs it: %v", f, lines[i+1], runs[f])
		}
	}
	if !strings.HasPrefix(lines[len(blas.CeilingFormats)+1], "vector ") {
		t.Errorf("the ceilings are not followed by the vector line:\n%s", out)
	}
}

// Plain env measures nothing: no ceilings.
func TestEnvNoCeilings(t *testing.T) {
	code, out, _ := runCLI(t, "env")
	if code != 0 || strings.Contains(out, "ceilings") {
		t.Errorf("env: exit %d, output %q", code, out)
	}
}

// env --model loads the folder and says where its weights lie and what
// the process holds: an int8 folder's codes stored, their layers prepared.
func TestEnvModelMemory(t *testing.T) {
	src := filepath.Join("..", "..", "sentence", "testdata", "st", "mean")
	code, out, stderr := runCLI(t, "env", "--model", src)
	if code != 0 || !strings.Contains(out, "\nweights    ") || !strings.Contains(out, "float32 ") {
		t.Fatalf("env --model: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	if _, err := blas.Int8(); err != nil {
		return
	}
	q := filepath.Join(t.TempDir(), "int8")
	if code, _, stderr := runCLI(t, "quantize", "--model", src, "--out", q); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	code, out, stderr = runCLI(t, "env", "--model", q)
	if code != 0 || !strings.Contains(out, ", int8)\n") || strings.Contains(out, "stored 0.0 KB") {
		t.Fatalf("env --model of an int8 folder: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
}

// --batch-invariant runs the products on go-asm and env says so; with
// bf16 (oneDNN's matmul) it is a usage error.
func TestEnvBatchInvariant(t *testing.T) {
	if !slices.ContainsFunc(blas.Available(), func(b blas.Backend) bool { return strings.HasPrefix(b.Name(), blas.KindGoAsm) }) {
		t.Skip("no go-asm here")
	}
	defer blas.Set(blas.Set(blas.Current()))
	code, out, _ := runCLI(t, "env", "--batch-invariant")
	if code != 0 || !strings.Contains(out, "\nblas       go-asm") || !strings.Contains(out, "\nbits       batch-invariant") {
		t.Errorf("env --batch-invariant: exit %d, output %q", code, out)
	}
	code, _, errOut := runCLI(t, "fill-mask", "--model", t.TempDir(), "--batch-invariant", "--precision", "bf16", "a [MASK]")
	if code != 2 || !strings.Contains(errOut, "--batch-invariant runs fp32 and int8") {
		t.Errorf("fill-mask --batch-invariant --precision bf16: exit %d, stderr %q", code, errOut)
	}
}
