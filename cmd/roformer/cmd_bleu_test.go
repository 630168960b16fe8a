package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeLines writes each file's lines (one segment a line) into dir.
func writeLines(t *testing.T, dir string, files map[string][]string) {
	t.Helper()
	for name, lines := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func bleuJSON(t *testing.T, stdout string) bleuResult {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var r bleuResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	return r
}

// sacreBLEU's README example: corpus BLEU 48.530827 with two references
// (its test_bleu.py).
func TestBleuCLI(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, map[string][]string{
		"hyp":  {"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."},
		"ref1": {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
		"ref2": {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."},
		"base": {"The dog bit a man.", "Not surprising.", "The man bit him."},
	})
	p := func(n string) string { return filepath.Join(dir, n) }
	code, stdout, stderr := runCLI(t, "bleu", "--hyp", p("hyp"), "--ref", p("ref1"), "--ref", p("ref2"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := bleuJSON(t, stdout)
	if math.Abs(r.BLEU-48.530827) > 1e-6 || r.References != 2 || r.Segments != 3 || len(r.Precisions) != 4 || r.HypLen == 0 {
		t.Errorf("result %+v, want BLEU 48.530827 over 3 segments and 2 references", r)
	}
	if r.CHRF <= 0 || r.CHRF >= 100 || r.BLEUSignature != "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp" {
		t.Errorf("chrF %g, signature %q", r.CHRF, r.BLEUSignature)
	}
	if !strings.HasPrefix(stdout, "BLEU = 48.53 ") || !strings.Contains(stdout, "\nchrF2 = ") {
		t.Errorf("readable lines:\n%s", stdout)
	}
	// Bootstrap intervals, then a paired test against a baseline.
	code, stdout, stderr = runCLI(t, "bleu", "--hyp", p("hyp"), "--ref", p("ref1"), "--bootstrap", "200")
	if r := bleuJSON(t, stdout); code != 0 || r.BLEUCI == nil || r.BLEUCI.Samples != 200 || r.CHRFCI == nil || r.Paired != nil {
		t.Errorf("bootstrap: exit %d %s: %+v", code, stderr, r)
	}
	code, stdout, stderr = runCLI(t, "bleu", "--hyp", p("hyp"), "--ref", p("ref1"), "--baseline", p("base"))
	if r := bleuJSON(t, stdout); code != 0 || r.Paired == nil || r.Paired.Samples != 1000 || r.Paired.PBLEU <= 0 || r.Paired.PBLEU > 1 {
		t.Errorf("paired: exit %d %s: %+v", code, stderr, r)
	}
}

func TestBleuCLIErrors(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, map[string][]string{"hyp": {"a", "b"}, "ref": {"a"}})
	os.WriteFile(filepath.Join(dir, "bad"), []byte("a\n\xff\n"), 0o644)
	p := func(n string) string { return filepath.Join(dir, n) }
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--hyp", p("hyp")}, 2, "--ref is required"},
		{[]string{"--ref", p("ref")}, 2, "--hyp is required"},
		{[]string{"--hyp", p("hyp"), "--ref", p("hyp"), "--tokenize", "zh"}, 2, `--tokenize "zh"`},
		{[]string{"--hyp", p("hyp"), "--ref", p("ref")}, 1, "has 1 segments"},
		{[]string{"--hyp", p("bad"), "--ref", p("hyp")}, 1, "line 2 is not valid UTF-8"},
		{[]string{"--hyp", p("missing"), "--ref", p("hyp")}, 1, "missing"},
	} {
		code, _, stderr := runCLI(t, append([]string{"bleu"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}
