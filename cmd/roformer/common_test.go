package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file given as --model is a usage error (exit 2) that asks for the
// folder, for every verb that reads a model folder.
func TestModelFlagFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte(`{"input_ids": [[1, 2]]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"inspect", "--model", file},
		{"forward", "--model", file, "--input", in, "--quiet"},
		{"fill-mask", "--model", file, "a [MASK]"},
		{"tokenize", "--model", file, "a"},
		{"rope", "--model", file},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, file+" is a file: give the model folder, the one that holds config.json") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and a message asking for the folder", args[0], code, stderr)
		}
	}
}
