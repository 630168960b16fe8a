package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quantize writes a folder the other verbs open as they are (embed here),
// and refuses a folder that holds something, or a precision it does not
// write, before reading the model.
func TestQuantizeVerb(t *testing.T) {
	src := filepath.Join("..", "..", "sentence", "testdata", "st", "mean")
	out := filepath.Join(t.TempDir(), "int8")
	code, stdout, stderr := runCLI(t, "quantize", "--model", src, "--out", out)
	if code != 0 || !strings.Contains(stdout, "wrote "+out+": int8 weights in "+filepath.Join(out, "model.safetensors")) ||
		!strings.Contains(stdout, "modules.json") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	in, vecs := filepath.Join(t.TempDir(), "in.jsonl"), filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(in, []byte(`{"text": "hello world"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, "embed", "--model", out, "--input", in, "--output", vecs)
	if b, _ := os.ReadFile(vecs); code != 0 || !strings.Contains(string(b), `"embedding"`) {
		t.Fatalf("embed of the int8 folder: exit %d, wrote %q\nstdout:\n%s\nstderr:\n%s", code, b, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "quantize", "--model", src, "--out", out); code != 1 || !strings.Contains(stderr, "give a new or empty folder") {
		t.Fatalf("quantize into a full folder: exit %d, stderr:\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "quantize", "--model", src, "--out", t.TempDir(), "--precision", "fp32"); code != 2 || !strings.Contains(stderr, "want int8 or bf16") {
		t.Fatalf("--precision fp32: exit %d, stderr:\n%s", code, stderr)
	}
}
