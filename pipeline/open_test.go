package pipeline_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

var openWords = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"}

// Open reads the head the config names (or the one asked for), the weights
// as saved and the tokenizer, at the top of the folder or in tokenizer/.
func TestOpen(t *testing.T) {
	dir := testmodel.Tiny{Words: openWords, Head: roformer.HeadMaskedLM, Seed: 3}.Folder(t)
	m, err := pipeline.Open(dir, pipeline.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Head != roformer.HeadMaskedLM || m.Dir != dir || m.Tokenizer == nil || m.Tokenizer.VocabSize() != len(openWords) {
		t.Fatalf("head %s, dir %s, tokenizer %v; want masked-lm, %s and %d tokens", m.Head, m.Dir, m.Tokenizer, dir, len(openWords))
	}
	want, err := roformer.Load(dir, roformer.HeadMaskedLM, roformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range m.Params() {
		if q := want.Params()[i]; p.Name != q.Name || !slices.Equal(p.Data, q.Data) {
			t.Fatalf("parameter %s differs from roformer.Load's %s", p.Name, q.Name)
		}
	}

	base, err := pipeline.Open(dir, pipeline.OpenOptions{Head: roformer.HeadBase, NoTokenizer: true})
	if err != nil || base.Head != roformer.HeadBase || base.Tokenizer != nil {
		t.Fatalf("base without tokenizer: %v, %+v", err, base)
	}

	// The tokenizer in tokenizer/ (pretrain's layout).
	nested := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		if err := os.Link(filepath.Join(dir, f), filepath.Join(nested, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Tokenizer.Save(filepath.Join(nested, "tokenizer")); err != nil {
		t.Fatal(err)
	}
	n, err := pipeline.Open(nested, pipeline.OpenOptions{})
	if err != nil || n.Tokenizer.VocabSize() != len(openWords) {
		t.Fatalf("tokenizer/ subfolder: %v", err)
	}
}

// A head the folder has no weights for is roformer.ErrHeadMissing; a
// folder without tokenizer files is an error unless NoTokenizer.
func TestOpenErrors(t *testing.T) {
	dir := testmodel.Tiny{Words: openWords, Head: roformer.HeadBase}.Folder(t)
	if _, err := pipeline.Open(dir, pipeline.OpenOptions{Head: roformer.HeadSequenceCls}); !errors.Is(err, roformer.ErrHeadMissing) {
		t.Errorf("a missing head: %v, want ErrHeadMissing", err)
	}
	os.Remove(filepath.Join(dir, "vocab.txt"))
	os.Remove(filepath.Join(dir, "tokenizer.json"))
	if _, err := pipeline.Open(dir, pipeline.OpenOptions{}); err == nil {
		t.Error("a folder without tokenizer files opened with its tokenizer")
	}
	if _, err := pipeline.Open(dir, pipeline.OpenOptions{NoTokenizer: true}); err != nil {
		t.Errorf("NoTokenizer: %v", err)
	}
}
