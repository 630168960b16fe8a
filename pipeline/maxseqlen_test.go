package pipeline

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// A sentence-transformers folder that leaves max_seq_length out (null, or no
// sentence_bert_config.json) takes min(max_position_embeddings,
// model_max_length), as sentence-transformers' Transformer module does; a
// given max_seq_length is kept up to max_position_embeddings, and clamped
// to it above (rotary positions would not stop a longer text). The fixture
// cls has max_seq_length null, max_position_embeddings 64 and
// model_max_length int(1e30); maxlen_lower has max_seq_length 10.
func TestOpenInfersMaxSeqLength(t *testing.T) {
	const positions = 64
	modelMaxLength := regexp.MustCompile(`"model_max_length": *[0-9.e+]+`)
	for _, c := range []struct {
		name, fixture string
		modelMax      string // "" keeps the fixture's tokenizer_config.json
		noBertConfig  bool
		want          int
		maxSeq        string // when not "", sentence_bert_config.json's max_seq_length
	}{
		{"given 1,048,576: clamped", "maxlen_lower", "", false, positions, "1048576"},
		{"given 65: clamped", "maxlen_lower", "", false, positions, "65"},
		{"given 64", "maxlen_lower", "", false, positions, "64"},
		{"null, no limit", "cls", "", false, positions, ""},
		{"null, model_max_length 12", "cls", "12", false, 12, ""},
		{"null, model_max_length above the positions", "cls", "100", false, positions, ""},
		{"no sentence_bert_config.json, model_max_length 9", "cls", "9", true, 9, ""},
		{"given 10, model_max_length 5", "maxlen_lower", "5", false, 10, ""},
	} {
		dir := filepath.Join(t.TempDir(), c.fixture)
		if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "sentence", "testdata", "st", c.fixture))); err != nil {
			t.Fatal(err)
		}
		if c.modelMax != "" {
			file := filepath.Join(dir, "tokenizer_config.json")
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !modelMaxLength.Match(raw) {
				t.Fatalf("%s: %s has no model_max_length to replace", c.name, file)
			}
			raw = modelMaxLength.ReplaceAll(raw, []byte(`"model_max_length": `+c.modelMax))
			if err := os.WriteFile(file, raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if c.maxSeq != "" {
			if err := os.WriteFile(filepath.Join(dir, "sentence_bert_config.json"), []byte(`{"max_seq_length": `+c.maxSeq+`, "do_lower_case": true}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if c.noBertConfig {
			if err := os.Remove(filepath.Join(dir, "sentence_bert_config.json")); err != nil {
				t.Fatal(err)
			}
		}
		m, err := Open(dir, OpenOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if m.Model.Config.MaxPositionEmbeddings != positions {
			t.Fatalf("%s: max_position_embeddings %d, the test wants %d", c.name, m.Model.Config.MaxPositionEmbeddings, positions)
		}
		if got := m.Sentence.MaxSeqLength; got != c.want {
			t.Errorf("%s: Sentence.MaxSeqLength %d, want %d", c.name, got, c.want)
		}
		if c.maxSeq != "" { // the clamp does not need the tokenizer
			if n, err := Open(dir, OpenOptions{NoTokenizer: true}); err != nil || n.Sentence.MaxSeqLength != c.want {
				t.Errorf("%s, without the tokenizer: %v, %v", c.name, n, err)
			}
		}
		o, err := EmbedOptions{Sentence: m.Sentence}.WithDefaults(m.Model)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if o.MaxLength != c.want {
			t.Errorf("%s: EmbedOptions.MaxLength %d, want %d", c.name, o.MaxLength, c.want)
		}
		// A caller's own Folder, not clamped by Open, is clamped by
		// WithDefaults (the fixtures' positions are rotary).
		if c.maxSeq != "" {
			own := *m.Sentence
			own.MaxSeqLength = 1 << 20
			if o, err := (EmbedOptions{Sentence: &own}).WithDefaults(m.Model); err != nil || o.MaxLength != positions {
				t.Errorf("%s: a Folder of max_seq_length 2^20: MaxLength %d, %v; want %d", c.name, o.MaxLength, err, positions)
			}
		}
	}
}
