package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExperimentDecayCLI(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, "experiment", "decay", "--dim", "8", "--max-distance", "20", "--out", dir, "--quiet", "--quick")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "decay.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Dim      int       `json:"dim"`
		Distance []int     `json:"distance"`
		Bound    []float64 `json:"bound"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.Dim != 8 || len(d.Distance) != 21 || len(d.Bound) != 21 || d.Bound[0] != 2.5 {
		t.Errorf("decay.json: dim %d, %d distances, %d bounds, bound(0) %v; want 8, 21, 21, 2.5", d.Dim, len(d.Distance), len(d.Bound), d.Bound[0])
	}
	for _, f := range []string{"decay.png", "decay.svg", "decay.csv", "summary.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("no %s", f)
		}
	}
	if !strings.Contains(stdout, dir) {
		t.Errorf("stdout does not name the results folder: %s", stdout)
	}
}

func TestExperimentCLIErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no name", []string{"experiment"}, 2, "name an experiment"},
		{"unknown", []string{"experiment", "glue"}, 2, `unknown experiment "glue" (valid: relative, decay, mlm-pe, char-lm, long-text, long-text-zh, extrapolate, finetune-compare, translate)`},
		{"help", []string{"experiment", "mlm-pe", "-h"}, 0, "-encodings"},
		{"list", []string{"experiment", "--help"}, 0, "long-text"},
		{"bad encoding", []string{"experiment", "mlm-pe", "--encodings", "rotary,absolute"}, 2, `unknown position_embedding_type "absolute"`},
		{"bad seeds", []string{"experiment", "mlm-pe", "--seeds", "1,x"}, 2, `--seeds: "x" is not a non-negative integer`},
		{"bad targets", []string{"experiment", "mlm-pe", "--targets", "6,low"}, 2, `--targets: "low" is not a number`},
		{"bad variant", []string{"experiment", "char-lm", "--variants", "performer"}, 2, "ATTENTION-POSITION"},
		{"bad length", []string{"experiment", "long-text", "--lengths", "512,-1"}, 2, "--lengths"},
		{"short length", []string{"experiment", "long-text", "--lengths", "2"}, 2, "too short"},
		{"bad position", []string{"experiment", "translate", "--positions", "rotary,learned"}, 2, `--positions: position "learned" is not rotary or sinusoidal`},
		{"bad translate arm", []string{"experiment", "translate", "--arms", "pre-ln,sandwich"}, 2, `--arms: arm "sandwich" is not pre-ln or post-ln`},
		{"bad alpha grid", []string{"experiment", "translate", "--alpha-grid", "0,high"}, 2, `--alpha-grid: "high" is not a number`},
		{"translate help", []string{"experiment", "translate", "-h"}, 0, "-alpha-grid"},
		{"long-text-zh help", []string{"experiment", "long-text-zh", "-h"}, 0, "-pretrain-steps"},
		{"bad arm", []string{"experiment", "long-text-zh", "--arms", "rotary-1024"}, 2, "ENCODING-LENGTH-WINDOWS"},
		{"negative pretraining steps", []string{"experiment", "long-text-zh", "--pretrain-steps", "-1"}, 2, "--pretrain-steps -1 must be positive"},
		{"bad pretraining seeds", []string{"experiment", "long-text-zh", "--pretrain-seeds", "1,two"}, 2, `--pretrain-seeds: "two" is not a non-negative integer`},
		{"pretraining seed twice", []string{"experiment", "long-text-zh", "--pretrain-seeds", "1,1", "--quiet", "--out", "OUT"}, 1, "seed 1 listed twice"},
		{"long-text-zh merge nothing", []string{"experiment", "long-text-zh", "--merge", "NOWHERE", "--quiet", "--out", "OUT"}, 1, "NOWHERE"},
		{"extrapolate below the training length", []string{"experiment", "extrapolate", "--quick", "--lengths", "64,256", "--quiet", "--out", "OUT"}, 1, "below the training length 128"},
		{"extrapolate unknown task", []string{"experiment", "extrapolate", "--quick", "--tasks", "foo", "--quiet", "--out", "OUT"}, 1, `unknown task "foo"`},
		{"extrapolate help", []string{"experiment", "extrapolate", "-h"}, 0, "-tasks"},
		{"finetune-compare unknown task", []string{"experiment", "finetune-compare", "--quick", "--tasks", "mnli", "--quiet", "--out", "OUT"}, 1, `unknown task "mnli"`},
		{"finetune-compare help", []string{"experiment", "finetune-compare", "-h"}, 0, "-scratch"},
		{"finetune-compare bad epochs", []string{"experiment", "finetune-compare", "--finetune-epochs", "-1"}, 2, "--finetune-epochs -1 must be positive"},
		{"finetune-compare bad fine-tuning seeds", []string{"experiment", "finetune-compare", "--finetune-seeds", "1,x"}, 2, `--finetune-seeds: "x" is not a non-negative integer`},
		{"finetune-compare no pretrained run", []string{"experiment", "finetune-compare", "--pretrained", "NOWHERE", "--quiet", "--out", "OUT"}, 1, "rotary-seed1/config.json is missing"},
		{"flag of another experiment", []string{"experiment", "decay", "--steps", "3"}, 2, "flag provided but not defined: -steps"},
		{"odd dim", []string{"experiment", "decay", "--dim", "7", "--quiet", "--out", "OUT"}, 1, "dimension 7 must be even"},
		{"stray argument", []string{"experiment", "decay", "extra"}, 2, "unexpected arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			for i, a := range args {
				if a == "OUT" {
					args[i] = t.TempDir()
				}
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != c.code || !strings.Contains(stdout+stderr, c.want) {
				t.Errorf("exit %d (want %d)\nstdout: %s\nstderr: %s\nwant the output to mention %q", code, c.code, stdout, stderr, c.want)
			}
		})
	}
}

// The true --quick forms (a few minutes each on 2 cores; char-lm and
// long-text fetch their npm tarballs). Run with
// ROFORMER_EXPERIMENT_QUICK=1 go test ./cmd/roformer -run ExperimentQuick.
func TestExperimentQuick(t *testing.T) {
	if testing.Short() || os.Getenv("ROFORMER_EXPERIMENT_QUICK") == "" {
		t.Skip("set ROFORMER_EXPERIMENT_QUICK=1 to run the --quick experiments (minutes; char-lm and long-text need npm, finetune-compare npm and apt-get)")
	}
	cache := filepath.Join(t.TempDir(), "cache")
	if c := os.Getenv("ROFORMER_EXPERIMENT_CACHE"); c != "" {
		cache = c
	}
	for _, name := range []string{"relative", "decay", "mlm-pe", "char-lm", "long-text", "long-text-zh", "finetune-compare", "translate"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"experiment", name, "--out", dir, "--quiet"}
			switch name {
			case "decay", "relative", "mlm-pe":
				args = append(args, "--quick")
			default:
				args = append(args, "--quick", "--cache", cache)
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			raw, err := os.ReadFile(filepath.Join(dir, "summary.md"))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s:\n%s", name, raw)
		})
	}
}

// --resummarize rewrites a results folder without training.
func TestExperimentResummarizeCLI(t *testing.T) {
	code, _, stderr := runCLI(t, "experiment", "long-text", "--resummarize", t.TempDir(), "--quiet")
	if code != 1 || !strings.Contains(stderr, "results.json") {
		t.Errorf("empty folder: exit %d, %s", code, stderr)
	}
}
