// Package testmodel builds the tiny RoFormer models that the tests of the
// packages above model/roformer run on: a BERT tokenizer over a handful of
// words and a one-layer model, in memory or saved to a folder as a
// pretrained model would be.
//
// It imports model/roformer and tokenizer, so it is for the tests of the
// packages that import those (server, pipeline, finetune, cmd/roformer);
// the tests of model/roformer and tokenizer themselves use internal/testutil.
package testmodel

import (
	"path/filepath"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// Config returns roformer.DefaultConfig with the tiny shape: one layer,
// hidden and embedding size 16, two attention heads, intermediate size 32,
// and a vocabulary of vocab tokens.
func Config(vocab int) roformer.Config {
	cfg := roformer.DefaultConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.EmbeddingSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = vocab, 16, 16, 1, 2, 32
	return cfg
}

// Tokenizer returns a BERT tokenizer (tokenizer.DefaultConfig(Bert)) over
// words, in order: the id of a word is its index.
func Tokenizer(t testing.TB, words []string) *tokenizer.Tokenizer {
	t.Helper()
	v, err := tokenizer.NewVocab(words)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(v, tokenizer.DefaultConfig(tokenizer.Bert))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Tiny describes a tiny model: Config(len(Words)) with a head, initialised
// with a seed. The zero value of an optional field keeps the default.
type Tiny struct {
	Words        []string      // the vocabulary, special tokens first
	Head         roformer.Head // the head; "" is roformer.HeadMaskedLM
	Seed         uint64        // the seed of Model.Init
	MaxPositions int           // MaxPositionEmbeddings, when not 0
	Labels       []string      // the label names (Config.SetLabels), when not nil
	Scale        float32       // when not 0, every parameter is multiplied by it after Init, so that the predictions are far from uniform
}

// Build returns the model and a tokenizer over Words.
func (s Tiny) Build(t testing.TB) (*roformer.Model, *tokenizer.Tokenizer) {
	t.Helper()
	tok := Tokenizer(t, s.Words)
	cfg := Config(len(s.Words))
	if s.MaxPositions != 0 {
		cfg.MaxPositionEmbeddings = s.MaxPositions
	}
	if s.Labels != nil {
		cfg.SetLabels(s.Labels)
	}
	head := s.Head
	if head == "" {
		head = roformer.HeadMaskedLM
	}
	m, err := roformer.New(cfg, head)
	if err != nil {
		t.Fatal(err)
	}
	m.Init(s.Seed)
	if s.Scale != 0 {
		for _, p := range m.Params() {
			for i := range p.Data {
				p.Data[i] *= s.Scale
			}
		}
	}
	return m, tok
}

// Folder builds the model and saves it with its tokenizer into a folder
// "pretrained" in a fresh temporary folder, standing in for a pretrained
// model; it returns the folder's path.
func (s Tiny) Folder(t testing.TB) string {
	t.Helper()
	m, tok := s.Build(t)
	dir := filepath.Join(t.TempDir(), "pretrained")
	Save(t, dir, m, tok)
	return dir
}

// Save writes the tokenizer's files and then the model (config.json and
// model.safetensors) into dir, as `roformer pretrain` leaves a folder.
func Save(t testing.TB, dir string, m *roformer.Model, tok *tokenizer.Tokenizer) {
	t.Helper()
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
}
