package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

type tokenizeOutLine struct {
	InputIDs      []int    `json:"input_ids"`
	TokenTypeIDs  []int    `json:"token_type_ids"`
	AttentionMask []int    `json:"attention_mask"`
	Tokens        []string `json:"tokens"`
	Offsets       [][2]int `json:"offsets"`
}

func parseTokenizeOutput(t *testing.T, out string) []tokenizeOutLine {
	t.Helper()
	var lines []tokenizeOutLine
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		var o tokenizeOutLine
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("output line %d is not JSON: %v\n%s", i+1, err, l)
		}
		n := len(o.InputIDs)
		if len(o.TokenTypeIDs) != n || len(o.AttentionMask) != n || len(o.Tokens) != n || len(o.Offsets) != n {
			t.Fatalf("output line %d is ragged: %s", i+1, l)
		}
		lines = append(lines, o)
	}
	return lines
}

type tokFixture struct {
	RoFormer struct {
		Cases []struct {
			Text          string   `json:"text"`
			Tokens        []string `json:"tokens"`
			InputIDs      []int    `json:"input_ids"`
			TokenTypeIDs  []int    `json:"token_type_ids"`
			AttentionMask []int    `json:"attention_mask"`
		} `json:"cases"`
		Pairs []struct {
			TextA         string `json:"text_a"`
			TextB         string `json:"text_b"`
			InputIDs      []int  `json:"input_ids"`
			TokenTypeIDs  []int  `json:"token_type_ids"`
			AttentionMask []int  `json:"attention_mask"`
		} `json:"pairs"`
		Batch struct {
			Texts    []string `json:"texts"`
			InputIDs [][]int  `json:"input_ids"`
		} `json:"batch"`
	} `json:"roformer_tokenizer"`
	Bert struct {
		Cases []struct {
			Text     string `json:"text"`
			InputIDs []int  `json:"input_ids"`
		} `json:"cases"`
	} `json:"bert_tokenizer"`
}

func loadTokFixture(t *testing.T) (tokFixture, string) {
	t.Helper()
	dir := testutil.Shared(t, "fixtures", "hf-roformer", "tokenizer")
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx tokFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	return fx, dir
}

// The tokenize verb reproduces every fixture case, pair and batch row
// through the whole CLI path (JSON lines in, fixture folder, JSON lines out).
func TestTokenizeCLIFixtures(t *testing.T) {
	fx, dir := loadTokFixture(t)
	var in bytes.Buffer
	for _, c := range fx.RoFormer.Cases {
		b, _ := json.Marshal(map[string]string{"text": c.Text})
		in.Write(append(b, '\n'))
	}
	for _, p := range fx.RoFormer.Pairs {
		b, _ := json.Marshal(map[string]string{"text": p.TextA, "text_pair": p.TextB})
		in.Write(append(b, '\n'))
	}
	in.WriteString("\n") // blank lines are skipped
	inPath := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(inPath, in.Bytes(), 0o644)
	outPath := filepath.Join(t.TempDir(), "out.jsonl")
	code, _, stderr := runCLI(t, "tokenize", "--model", dir, "--input", inPath, "--output", outPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw, _ := os.ReadFile(outPath)
	lines := parseTokenizeOutput(t, string(raw))
	if len(lines) != len(fx.RoFormer.Cases)+len(fx.RoFormer.Pairs) {
		t.Fatalf("%d output lines for %d inputs", len(lines), len(fx.RoFormer.Cases)+len(fx.RoFormer.Pairs))
	}
	for i, c := range fx.RoFormer.Cases {
		o := lines[i]
		if !slices.Equal(o.InputIDs, c.InputIDs) || !slices.Equal(o.TokenTypeIDs, c.TokenTypeIDs) || !slices.Equal(o.AttentionMask, c.AttentionMask) {
			t.Errorf("case %d %q: got %v, want %v", i, c.Text, o.InputIDs, c.InputIDs)
		}
		if want := append(append([]string{"[CLS]"}, c.Tokens...), "[SEP]"); !slices.Equal(o.Tokens, want) {
			t.Errorf("case %d %q: tokens %q, want %q", i, c.Text, o.Tokens, want)
		}
		for k, off := range o.Offsets {
			if off[0] < 0 || off[1] > len(c.Text) || off[0] > off[1] {
				t.Errorf("case %d token %d: offsets %v outside %d bytes", i, k, off, len(c.Text))
			}
		}
	}
	for j, p := range fx.RoFormer.Pairs {
		o := lines[len(fx.RoFormer.Cases)+j]
		if !slices.Equal(o.InputIDs, p.InputIDs) || !slices.Equal(o.TokenTypeIDs, p.TokenTypeIDs) || !slices.Equal(o.AttentionMask, p.AttentionMask) {
			t.Errorf("pair %d: got %v %v, want %v %v", j, o.InputIDs, o.TokenTypeIDs, p.InputIDs, p.TokenTypeIDs)
		}
	}

	// The batch: padding=True, truncation=True, max_length=12 (stdin input).
	var bin bytes.Buffer
	for _, s := range fx.RoFormer.Batch.Texts {
		b, _ := json.Marshal(map[string]string{"text": s})
		bin.Write(append(b, '\n'))
	}
	var out bytes.Buffer
	o := tokenizeOptions{model: dir, stdin: &bin, maxLength: 12, truncation: "longest_first", padding: "longest"}
	if err := runTokenize(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	for i, l := range parseTokenizeOutput(t, out.String()) {
		if !slices.Equal(l.InputIDs, fx.RoFormer.Batch.InputIDs[i]) {
			t.Errorf("batch row %d: %v, want %v", i, l.InputIDs, fx.RoFormer.Batch.InputIDs[i])
		}
	}

	// TEXT arguments with --class bert: the BertTokenizer cases.
	args := []string{"tokenize", "--model", dir, "--class", "bert"}
	for _, c := range fx.Bert.Cases {
		args = append(args, c.Text)
	}
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	bl := parseTokenizeOutput(t, stdout)
	if len(bl) != len(fx.Bert.Cases) {
		t.Fatalf("%d lines for %d TEXT arguments", len(bl), len(fx.Bert.Cases))
	}
	for i, c := range fx.Bert.Cases {
		if !slices.Equal(bl[i].InputIDs, c.InputIDs) {
			t.Errorf("bert case %d %q: %v, want %v", i, c.Text, bl[i].InputIDs, c.InputIDs)
		}
	}
}

func tinyModelDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	vocab := "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nc\n<\n\"\n\\\nhello\nworld\n"
	os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(vocab), 0o644)
	return dir
}

func TestTokenizeCLIOptions(t *testing.T) {
	dir := tinyModelDir(t)
	run := func(o tokenizeOptions) ([]tokenizeOutLine, error) {
		o.model = dir
		if o.truncation == "" {
			o.truncation = "auto"
		}
		var out bytes.Buffer
		err := runTokenize(context.Background(), o, &out)
		if err != nil {
			return nil, err
		}
		return parseTokenizeOutput(t, out.String()), nil
	}
	lines, err := run(tokenizeOptions{texts: []string{"a b c a b c", "a"}, maxLength: 4, padding: "max_length", truncation: "longest_first"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lines[0].InputIDs, []int{2, 5, 6, 3}) || !slices.Equal(lines[1].InputIDs, []int{2, 5, 3, 0}) || !slices.Equal(lines[1].AttentionMask, []int{1, 1, 1, 0}) {
		t.Errorf("max_length 4: %v %v", lines[0].InputIDs, lines[1].InputIDs)
	}
	lines, err = run(tokenizeOptions{texts: []string{`a<"\b`}, noSpecialTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lines[0].Tokens, []string{"a", "<", `"`, `\`, "b"}) {
		t.Errorf("JSON escaping of tokens: %q", lines[0].Tokens)
	}
	// Small batches give the same lines as one big batch.
	var in strings.Builder
	for i := range 50 {
		in.WriteString(`{"text": "` + strings.Repeat("a ", i%7) + `hello"}` + "\n")
	}
	small, err := run(tokenizeOptions{stdin: strings.NewReader(in.String()), batchLines: 3})
	if err != nil {
		t.Fatal(err)
	}
	big, err := run(tokenizeOptions{stdin: strings.NewReader(in.String())})
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != 50 || len(big) != 50 {
		t.Fatalf("%d and %d lines, want 50", len(small), len(big))
	}
	for i := range small {
		if !slices.Equal(small[i].InputIDs, big[i].InputIDs) {
			t.Fatalf("line %d differs between batch sizes", i)
		}
	}
	for _, tc := range []struct {
		name, input, want string
	}{
		{"bad JSON", "{\"text\": \"a\"}\n{oops\n", "stdin line 2"},
		{"no text", "{\"txt\": \"a\"}\n", `no "text" field`},
		{"cannot truncate", "{\"text\": \"a\"}\n{\"text\": \"a b c a b c\"}\n", "input 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(tokenizeOptions{stdin: strings.NewReader(tc.input), maxLength: 3, truncation: "only_second"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestTokenizeCLIUsage(t *testing.T) {
	dir := tinyModelDir(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"no model", []string{"tokenize", "a"}, 2},
		{"input and texts", []string{"tokenize", "--model", dir, "--input", "x.jsonl", "a"}, 2},
		{"bad padding", []string{"tokenize", "--model", dir, "--padding", "both", "a"}, 2},
		{"bad truncation", []string{"tokenize", "--model", dir, "--truncation", "middle", "a"}, 2},
		{"bad class", []string{"tokenize", "--model", dir, "--class", "gpt2", "a"}, 2},
		{"negative max length", []string{"tokenize", "--model", dir, "--max-length", "-1", "a"}, 2},
		{"unknown flag", []string{"tokenize", "--model", dir, "--frobnicate", "a"}, 2},
		{"missing model folder", []string{"tokenize", "--model", filepath.Join(dir, "nope"), "a"}, 1},
		{"missing input file", []string{"tokenize", "--model", dir, "--input", filepath.Join(dir, "nope.jsonl")}, 1},
		{"help", []string{"tokenize", "-h"}, 0},
		{"ok", []string{"tokenize", "--model", dir, "hello world"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
		})
	}
}
