package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/tokenizer"
)

func TestVocabCLI(t *testing.T) {
	corpus := t.TempDir()
	os.WriteFile(filepath.Join(corpus, "a.txt"), []byte(strings.Repeat("The lower layers learn lowest features.\nNewer, wider models!\n", 20)), 0o644)
	os.MkdirAll(filepath.Join(corpus, "sub"), 0o755)
	os.WriteFile(filepath.Join(corpus, "sub", "b.txt"), []byte(strings.Repeat("今天天气非常好。我们今天去北京。\n", 5)), 0o644)
	os.WriteFile(filepath.Join(corpus, "ignored.md"), []byte("not read\n"), 0o644)

	out := filepath.Join(t.TempDir(), "wp")
	code, _, stderr := runCLI(t, "vocab", "--corpus", corpus, "--size", "80", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "80 tokens") {
		t.Errorf("summary line missing: %q", stderr)
	}
	tok, err := tokenizer.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 80 || tok.Kind() != tokenizer.Bert || tok.PadID() != 0 || tok.MaskID() != 4 {
		t.Errorf("size %d kind %v pad %d mask %d", tok.VocabSize(), tok.Kind(), tok.PadID(), tok.MaskID())
	}
	if ids := tok.EncodeIDs("the lowest layers"); slices.Contains(ids, tok.UnkID()) {
		t.Errorf("training text tokenizes with [UNK]: %q", tok.Tokenize("the lowest layers"))
	}

	out2 := filepath.Join(t.TempDir(), "zh")
	code, _, stderr = runCLI(t, "vocab", "--corpus", filepath.Join(corpus, "sub", "b.txt"), "--size", "40", "--out", out2, "--kind", "chinese-word", "--model-max-length", "512")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	zh, err := tokenizer.Load(out2)
	if err != nil {
		t.Fatal(err)
	}
	if zh.Kind() != tokenizer.RoFormer || zh.Config().ModelMaxLength != 512 {
		t.Errorf("kind %v, model_max_length %d", zh.Kind(), zh.Config().ModelMaxLength)
	}
	if got := zh.Tokenize("今天北京"); !slices.Equal(got, []string{"今天", "北京"}) {
		t.Errorf("Tokenize = %q", got)
	}
}

func TestVocabCLIUsage(t *testing.T) {
	corpus := filepath.Join(t.TempDir(), "c.txt")
	os.WriteFile(corpus, []byte("hello world\n"), 0o644)
	out := filepath.Join(t.TempDir(), "o")
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"missing flags", []string{"vocab", "--corpus", corpus}, 2},
		{"size too small", []string{"vocab", "--corpus", corpus, "--size", "3", "--out", out}, 2},
		{"bad kind", []string{"vocab", "--corpus", corpus, "--size", "50", "--out", out, "--kind", "bpe"}, 2},
		{"bad class", []string{"vocab", "--corpus", corpus, "--size", "50", "--out", out, "--class", "xlnet"}, 2},
		{"extra args", []string{"vocab", "--corpus", corpus, "--size", "50", "--out", out, "x"}, 2},
		{"missing corpus", []string{"vocab", "--corpus", corpus + ".nope", "--size", "50", "--out", out}, 1},
		{"ok", []string{"vocab", "--corpus", corpus, "--size", "50", "--out", out, "--class", "roformer", "--cased"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
		})
	}
}
