package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/pipeline"
)

// A sentence-transformers folder whose max_seq_length is 1,048,576, on a
// model of 64 positions (rotary), serves at most 64 tokens, as the plain
// folder does: a 200-token /embed is a 413, whether the server is loaded
// from the folder (pipeline.Open clamps it) or made by New from a Folder
// that says 1,048,576.
func TestSentenceMaxSeqLengthClamped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cls")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "sentence", "testdata", "st", "cls"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sentence_bert_config.json"), []byte(`{"max_seq_length": 1048576}`), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	m, err := pipeline.Open(dir, pipeline.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Sentence.MaxSeqLength = 1 << 20 // as a caller's own Folder may say
	made, err := New(m.Model, m.Tokenizer, Options{Sentence: m.Sentence})
	if err != nil {
		t.Fatal(err)
	}
	defer made.Close()
	long, _ := json.Marshal(map[string]any{"inputs": strings.Repeat("the ", 198)})
	for name, s := range map[string]*Server{"Load": loaded, "New": made} {
		if got := s.Info().MaxLength; got != 64 {
			t.Errorf("%s: max length %d, want max_position_embeddings 64", name, got)
		}
		if code, kind := teiCall(t, s, "/embed", string(long), nil); code != 413 || kind != "Validation" {
			t.Errorf("%s: a 200-token /embed: %d %s, want 413 Validation", name, code, kind)
		}
		var v [][]float32
		if code, kind := teiCall(t, s, "/embed", `{"inputs": "the a"}`, &v); code != 200 {
			t.Errorf("%s: a short /embed: %d %s", name, code, kind)
		}
	}
}

// MaxAttentionWork bounds MaxLength² × layers: a default limit (the
// config's max_position_embeddings, 1,048,576 on one layer) is lowered to
// the longest that fits, a limit given past it is refused naming the
// numbers.
func TestMaxAttentionWork(t *testing.T) {
	m, tok := testmodel.Tiny{Words: words, Seed: 1, MaxPositions: 1 << 20}.Build(t)
	for _, c := range []struct {
		opts Options
		want int // 0: New fails
	}{
		{Options{}, 16384},                           // 2^28 on one layer
		{Options{MaxAttentionWork: 1 << 20}, 1024},   // 2^20
		{Options{MaxAttentionWork: 1<<20 - 1}, 1023}, // one below
		{Options{MaxLength: 16384}, 16384},           // given, within
		{Options{MaxLength: 16385}, 0},               // given, past
		{Options{MaxLength: 1 << 20, MaxAttentionWork: 1 << 40}, 1 << 20},
	} {
		s, err := New(m, tok, c.opts)
		switch {
		case c.want == 0 && err == nil:
			t.Errorf("%+v: no error, max length %d", c.opts, s.Info().MaxLength)
		case c.want == 0:
			if !strings.Contains(err.Error(), "16385") || !strings.Contains(err.Error(), "--max-attention-work") {
				t.Errorf("%+v: %v (want the length and the flag named)", c.opts, err)
			}
		case err != nil:
			t.Errorf("%+v: %v", c.opts, err)
		case s.Info().MaxLength != c.want:
			t.Errorf("%+v: max length %d, want %d", c.opts, s.Info().MaxLength, c.want)
		}
		if s != nil {
			s.Close()
		}
	}
	for _, c := range []struct {
		work   int64
		layers int
		want   int
	}{{1 << 28, 16, 4096}, {1 << 28, 12, 4729}, {3, 1, 1}, {0, 1, 0}, {1<<63 - 1, 1, 3037000499}, {1<<63 - 1, 1024, 94906265}} {
		if got := maxLengthFor(c.work, c.layers); got != c.want {
			t.Errorf("maxLengthFor(%d, %d) = %d, want %d", c.work, c.layers, got, c.want)
		}
	}
}
