package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// TinyWords is the vocabulary of the folders ConfigFolder writes: BERT's
// special tokens and a few words.
var TinyWords = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s", "a"}

// ConfigFolder writes a tiny valid masked-LM model folder into dir
// (created if needed): config.json, model.safetensors (one layer, hidden
// size 16, two heads, intermediate size 32, len(TinyWords) tokens, seed 1)
// and the tokenizer's files (vocab.txt, tokenizer_config.json,
// special_tokens_map.json, tokenizer.json). Then it sets the config.json
// keys of overrides: a value is written as json.Marshal writes it, so a
// json.RawMessage is written verbatim (json.RawMessage("1e10") for a
// number in exponent form); a nil value deletes the key.
//
// With overrides such as {"vocab_size": 10000000000} or
// {"num_labels": 10000000000} the folder is a config.json that asks for far
// more memory than its few-KB checkpoint holds.
func ConfigFolder(dir string, overrides map[string]any) error {
	cfg := roformer.DefaultConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.EmbeddingSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = len(TinyWords), 16, 16, 1, 2, 32
	cfg.MaxPositionEmbeddings = 64
	m, err := roformer.New(cfg, roformer.HeadMaskedLM)
	if err != nil {
		return fmt.Errorf("hostile: %w", err)
	}
	m.Init(1)
	v, err := tokenizer.NewVocab(TinyWords)
	if err != nil {
		return fmt.Errorf("hostile: %w", err)
	}
	tok, err := tokenizer.New(v, tokenizer.DefaultConfig(tokenizer.Bert))
	if err != nil {
		return fmt.Errorf("hostile: %w", err)
	}
	if err := tok.Save(dir); err != nil {
		return fmt.Errorf("hostile: %w", err)
	}
	if err := m.Save(dir); err != nil {
		return fmt.Errorf("hostile: %w", err)
	}
	return OverrideConfig(filepath.Join(dir, "config.json"), overrides)
}

// OverrideConfig sets keys of the JSON object in the file at path, as
// ConfigFolder describes, keeping the other keys.
func OverrideConfig(path string, overrides map[string]any) error {
	if len(overrides) == 0 {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("hostile: %w", err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("hostile: %s: %w", path, err)
	}
	for k, v := range overrides {
		if v == nil {
			delete(obj, k)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("hostile: %s: key %q: %w", path, k, err)
		}
		obj[k] = b
	}
	out, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return fmt.Errorf("hostile: %s: %w", path, err)
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}

// ConfigCases are config.json overrides, each of which asks a loader for
// far more memory than a tiny checkpoint holds (or for sizes no model has);
// keyed by a short name for subtests. Each must be refused with an error
// naming the key.
var ConfigCases = map[string]map[string]any{
	"vocab_size_1e10":        {"vocab_size": 10000000000},
	"vocab_size_1e10_exp":    {"vocab_size": json.RawMessage("1e10")},
	"hidden_size_2^32":       {"hidden_size": 4294967296, "embedding_size": 4294967296},
	"num_labels_1e10":        {"num_labels": 10000000000, "id2label": nil, "label2id": nil},
	"intermediate_size_2^40": {"intermediate_size": int64(1) << 40},
	"layers_1e9":             {"num_hidden_layers": 1000000000},
	"type_vocab_size_1e9":    {"type_vocab_size": 1000000000},
	"max_positions_learned":  {"max_position_embeddings": 1 << 40, "position_embedding_type": "learned"},
	"product_overflow":       {"vocab_size": int64(1) << 40, "embedding_size": int64(1) << 40, "hidden_size": 16},
	"fractional":             {"hidden_size": 16.5},
	// Within the per-field limits but not the checkpoint's sizes: refused
	// by the comparison with the weights, before a model is allocated.
	"vocab_size_fits_limit":  {"vocab_size": 1 << 24},
	"hidden_size_fits_limit": {"hidden_size": 1 << 16, "embedding_size": 1 << 16, "num_attention_heads": 256},
	"layers_1024":            {"num_hidden_layers": 1024},
}

// HeadConfigCases are config.json overrides that only the heads which use
// them must refuse (sequence and token classification, for num_labels),
// naming the key; the base model loads from them, and allocates nothing by
// them.
var HeadConfigCases = map[string]map[string]any{
	"num_labels_2^20": {"num_labels": 1 << 20, "id2label": nil, "label2id": nil},
}

// VocabFolder writes ConfigFolder(dir, nil) and then replaces its
// vocab.txt with vocab. The tokenizer reads it (roformer tokenize,
// fill-mask, embed, serve); inspect and forward do not.
func VocabFolder(dir string, vocab []byte) error {
	if err := ConfigFolder(dir, nil); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "vocab.txt"), vocab, 0o644)
}

// VocabCases are hostile vocab.txt contents, made on demand (they are
// large), keyed by a short name: each must be refused naming vocab.txt and
// the numbers, within a small multiple of its size.
var VocabCases = map[string]func() []byte{
	"cr_20MB":        func() []byte { return CRVocab(20 << 20) },                     // 20,971,520 empty lines
	"lf_5M":          func() []byte { return bytes.Repeat([]byte{'\n'}, 5<<20) },     // 5,242,880 empty lines: over the token limit
	"one_line_100MB": func() []byte { return LongLineVocab(100 << 20) },              // over the size limit
	"crlf_mixed":     func() []byte { return bytes.Repeat([]byte("\r\n\r"), 3<<20) }, // 6,291,456 empty lines in 9 MB
}

// CRVocab returns n bytes of '\r': a vocab.txt of n empty lines under
// Python's universal newlines.
func CRVocab(n int) []byte { return bytes.Repeat([]byte{'\r'}, n) }

// LongLineVocab returns a vocab.txt of one line of n bytes ('a').
func LongLineVocab(n int) []byte { return bytes.Repeat([]byte{'a'}, n) }
