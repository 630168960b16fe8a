package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A configuration that adds more special tokens than MaxSpecialTokens, or
// one longer than MaxSpecialTokenBytes, is refused with the numbers (each
// special token is tried at every position that starts as it does, and
// they used to be deduplicated in quadratic time).
func TestSpecialTokenLimits(t *testing.T) {
	v, err := NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Kind: Bert, UnkToken: "[UNK]", SepToken: "[SEP]", PadToken: "[PAD]", ClsToken: "[CLS]", MaskToken: "[MASK]"}
	for i := range MaxSpecialTokens {
		cfg.AdditionalSpecialTokens = append(cfg.AdditionalSpecialTokens, fmt.Sprintf("<x%d>", i))
	}
	if _, err := New(v, cfg); err != nil {
		t.Fatalf("%d additional special tokens: %v", MaxSpecialTokens, err)
	}
	cfg.AdditionalSpecialTokens = append(cfg.AdditionalSpecialTokens, "<one more>")
	if _, err := New(v, cfg); err == nil || !strings.Contains(err.Error(), "4097 additional_special_tokens") {
		t.Fatalf("one too many: %v", err)
	}
	cfg.AdditionalSpecialTokens = []string{strings.Repeat("x", MaxSpecialTokenBytes+1)}
	if _, err := New(v, cfg); err == nil || !strings.Contains(err.Error(), "257 bytes") {
		t.Fatalf("too long: %v", err)
	}
}

// model_max_length above MaxModelMaxLength means no limit (0), as HF's
// int(1e30) does; a negative or non-numeric one is an error.
func TestParseModelMaxLength(t *testing.T) {
	for in, want := range map[string]int{"512": 512, "16777216": MaxModelMaxLength, "16777217": 0, "1099511627776": 0,
		"1000000000000000019884624838656": 0, "1e30": 0, "512.0": 512} {
		got, err := parseModelMaxLength(json.Number(in))
		if err != nil || got != want {
			t.Errorf("parseModelMaxLength(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "abc", "NaN"} {
		if _, err := parseModelMaxLength(json.Number(bad)); err == nil {
			t.Errorf("parseModelMaxLength(%s) accepted", bad)
		}
	}
}
