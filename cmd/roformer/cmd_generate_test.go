package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

type genFixture struct {
	Mode         string `json:"mode"`
	MaxNewTokens int    `json:"max_new_tokens"`
	Inputs       struct {
		InputIDs [][]int32 `json:"input_ids"`
	} `json:"inputs"`
	Sequences [][]int32 `json:"sequences"`
}

func loadGenFixture(t *testing.T, name string) (string, genFixture) {
	t.Helper()
	dir := testutil.Shared(t, "fixtures", "roformer-family", name)
	var f struct {
		Generate genFixture `json:"generate"`
	}
	testutil.ReadJSON(t, filepath.Join(dir, "fixture.json"), &f)
	return filepath.Join(dir, "model"), f.Generate
}

func readSequences(t *testing.T, raw string) [][]int32 {
	t.Helper()
	var out struct {
		Sequences [][]int32 `json:"sequences"`
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("output is not {\"sequences\": ...}: %v\n%s", err, raw)
	}
	return out.Sequences
}

// Greedy generation through the CLI contract equals both fixtures (UniLM
// for sim_a, causal for causal_a); a ragged batch gives each row what it
// gets alone; beam and seeded sampling run and are reproducible.
func TestGenerateCLIFixtures(t *testing.T) {
	for _, name := range []string{"sim_a", "causal_a"} {
		t.Run(name, func(t *testing.T) {
			model, f := loadGenFixture(t, name)
			tmp := t.TempDir()
			in, _ := json.Marshal(map[string]any{"input_ids": f.Inputs.InputIDs})
			inPath := writeJSON(t, tmp, "in.json", string(in))
			args := []string{"generate", "--model", model, "--input", inPath, "--max-new-tokens", strconv.Itoa(f.MaxNewTokens), "--quiet", "--threads", "1"}
			if f.Mode == "unilm" {
				args = append(args, "--unilm")
			}
			outPath := filepath.Join(tmp, "out.json")
			code, _, stderr := runCLI(t, append(args, "--output", outPath)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			raw, _ := os.ReadFile(outPath)
			if got := readSequences(t, string(raw)); !slices.EqualFunc(got, f.Sequences, slices.Equal) {
				t.Errorf("sequences %v, want %v", got, f.Sequences)
			}
			// stdout, explicit greedy
			code, stdout, stderr := runCLI(t, append(args, "--strategy", "greedy")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := readSequences(t, stdout); !slices.EqualFunc(got, f.Sequences, slices.Equal) {
				t.Errorf("stdout sequences %v, want %v", got, f.Sequences)
			}
			// ragged: row 1 shortened; row 0 must still match the fixture
			short := f.Inputs.InputIDs[1][:3]
			in, _ = json.Marshal(map[string]any{"input_ids": [][]int32{f.Inputs.InputIDs[0], short}})
			ragged := writeJSON(t, tmp, "ragged.json", string(in))
			argsR := slices.Clone(args)
			argsR[4] = ragged
			code, stdout, stderr = runCLI(t, argsR...)
			if code != 0 {
				t.Fatalf("ragged: exit %d: %s", code, stderr)
			}
			got := readSequences(t, stdout)
			if !slices.Equal(got[0], f.Sequences[0]) || !slices.Equal(got[1][:3], short) || len(got[1]) != 3+f.MaxNewTokens {
				t.Errorf("ragged batch: %v, row 0 want %v", got, f.Sequences[0])
			}
			// beam search, sampling
			code, stdout, stderr = runCLI(t, append(args, "--strategy", "beam", "--num-beams", "3", "--length-penalty", "0.8", "--early-stopping", "never")...)
			if code != 0 {
				t.Fatalf("beam: exit %d: %s", code, stderr)
			}
			if got := readSequences(t, stdout); len(got) != 2 || len(got[0]) != len(f.Sequences[0]) {
				t.Errorf("beam: %v", got)
			}
			sample := append(args, "--strategy", "sample", "--top-k", "10", "--top-p", "0.9", "--temperature", "0.8", "--seed", "5", "--repetition-penalty", "1.2")
			_, a, _ := runCLI(t, sample...)
			_, b, stderr := runCLI(t, sample...)
			if a != b || len(readSequences(t, a)) != 2 {
				t.Errorf("seeded sampling: %q then %q (%s)", a, b, stderr)
			}
		})
	}
}

// A RoFormer-Sim folder with a small made-up vocabulary (the fixture has
// none): 61 tokens, [SEP] = 3 as config.json's eos_token_id.
func simWithVocab(t *testing.T) string {
	t.Helper()
	model, _ := loadGenFixture(t, "sim_a")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(model, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	vocab := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	for c := 'a'; c <= 'z'; c++ {
		vocab = append(vocab, string(c), "##"+string(c))
	}
	vocab = append(vocab, "the", "cat", "sat", "on")
	if len(vocab) != 61 {
		t.Fatalf("%d tokens", len(vocab))
	}
	os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(strings.Join(vocab, "\n")+"\n"), 0o644)
	return dir
}

// --text goes through the tokenizer ([CLS] text [SEP] in UniLM mode) and
// prints the decoded continuation; similar prints k candidates, best first,
// with cosines in [−1, 1].
func TestGenerateCLIText(t *testing.T) {
	dir := simWithVocab(t)
	out := filepath.Join(t.TempDir(), "out.json")
	code, stdout, stderr := runCLI(t, "generate", "--model", dir, "--text", "the cat sat", "--unilm", "--max-new-tokens", "6", "--output", out, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw, _ := os.ReadFile(out)
	seqs := readSequences(t, string(raw))
	if len(seqs) != 1 || !slices.Equal(seqs[0][:5], []int32{2, 57, 58, 59, 3}) || len(seqs[0]) != 11 {
		t.Errorf("sequences %v, want [CLS] the cat sat [SEP] + 6 ids", seqs)
	}
	if strings.Count(stdout, "\n") != 1 {
		t.Errorf("stdout %q, want one decoded line", stdout)
	}
	code, stdout, stderr = runCLI(t, "similar", "--model", dir, "--text", "the cat sat", "-n", "12", "-k", "4", "--seed", "3", "--max-new-tokens", "5", "--top-k", "20")
	if code != 0 {
		t.Fatalf("similar: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) == 0 || len(lines) > 4 {
		t.Fatalf("similar printed %q", stdout)
	}
	prev := 2.0
	for _, l := range lines {
		score, text, ok := strings.Cut(l, "\t")
		s, err := strconv.ParseFloat(score, 64)
		if !ok || err != nil || s > prev || s < -1 || s > 1 || text == "" {
			t.Errorf("similar line %q", l)
		}
		prev = s
	}
}

// Bad input: usage errors exit 2, others 1, each with a clear message.
func TestGenerateCLIErrors(t *testing.T) {
	model, f := loadGenFixture(t, "causal_a")
	causal := model
	tmp := t.TempDir()
	in, _ := json.Marshal(map[string]any{"input_ids": f.Inputs.InputIDs})
	good := writeJSON(t, tmp, "in.json", string(in))
	empty := writeJSON(t, tmp, "empty.json", `{"input_ids": [[1, 2], []]}`)
	noRows := writeJSON(t, tmp, "norows.json", `{"input_ids": []}`)
	notJSON := writeJSON(t, tmp, "bad.json", `{"input_ids": [[1, 2]`)
	outside := writeJSON(t, tmp, "outside.json", `{"input_ids": [[1, 999]]}`)
	base := []string{"generate", "--model", causal, "--quiet"}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--input", good}, 2, "--max-new-tokens 0 must be at least 1"},
		{[]string{"--max-new-tokens", "3"}, 2, "exactly one of --input and --text"},
		{[]string{"--input", good, "--text", "x", "--max-new-tokens", "3"}, 2, "exactly one of --input and --text"},
		{[]string{"--input", good, "--max-new-tokens", "3", "--strategy", "nucleus"}, 2, `--strategy "nucleus" is not greedy, sample or beam`},
		{[]string{"--input", good, "--max-new-tokens", "3", "--strategy", "beam", "--num-beams", "0"}, 2, "--num-beams 0 must be at least 1"},
		{[]string{"--input", good, "--max-new-tokens", "3", "--strategy", "sample", "--top-p", "1.5"}, 2, "--top-p 1.5 is outside (0, 1]"},
		{[]string{"--input", good, "--max-new-tokens", "3", "--strategy", "sample", "--top-p", "0"}, 2, "--top-p 0 is outside (0, 1]"},
		{[]string{"--input", good, "--max-new-tokens", "3", "--strategy", "sample", "--temperature", "0"}, 2, "--temperature 0 must be positive"},
		{[]string{"--input", good, "--max-new-tokens", "3", "--num-beams", "2"}, 2, "--num-beams 2 needs --strategy beam"},
		{[]string{"--input", good, "--max-new-tokens", "3", "--early-stopping", "maybe"}, 2, "--early-stopping"},
		{[]string{"--input", empty, "--max-new-tokens", "3"}, 1, "prompt 1 is empty"},
		{[]string{"--input", noRows, "--max-new-tokens", "3"}, 1, "input_ids is missing or has no rows"},
		{[]string{"--input", notJSON, "--max-new-tokens", "3"}, 1, "want {\"input_ids\""},
		{[]string{"--input", outside, "--max-new-tokens", "3"}, 1, "input_ids[0][1] = 999"},
		{[]string{"--input", good, "--max-new-tokens", "3", "--eos", "999"}, 1, "eos id 999"},
		{[]string{"--text", "hello", "--max-new-tokens", "3"}, 1, "--text needs the folder's tokenizer"},
	} {
		code, _, stderr := runCLI(t, append(slices.Clone(base), c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	// similar: a model without a pooler is refused; required flags
	code, _, stderr := runCLI(t, "similar", "--model", causal, "--text", "x")
	if code != 1 || !strings.Contains(stderr, "has no pooler") {
		t.Errorf("similar without a pooler: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "similar", "--model", causal)
	if code != 2 || !strings.Contains(stderr, "--model and --text are required") {
		t.Errorf("similar without --text: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "similar", "--model", causal, "--text", "x", "-n", "0")
	if code != 2 || !strings.Contains(stderr, "-n 0") {
		t.Errorf("similar -n 0: exit %d, %q", code, stderr)
	}
}

// A --num-beams whose cache would not fit is refused with the numbers
// before anything is allocated (exit 2).
func TestGenerateCostRefused(t *testing.T) {
	dir := simWithVocab(t)
	code, _, stderr := runCLI(t, "generate", "--model", dir, "--text", "the cat sat", "--unilm", "--strategy", "beam", "--num-beams", "100000000", "--max-new-tokens", "64", "--quiet")
	if code != 2 || !strings.Contains(stderr, "lower --num-beams") {
		t.Fatalf("100M beams: exit %d: %s", code, stderr)
	}
}
