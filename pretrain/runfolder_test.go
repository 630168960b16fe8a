package pretrain

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/saving"
)

// A new run refuses a folder holding anything but what a run of its own
// writes before its first checkpoint (issue #47: a fine-tuned model
// folder's config.json and model.safetensors were overwritten): Start and
// Loop.Run both, before writing anything, the folder's bytes unchanged. A
// folder that is missing, empty, or left by a run stopped before its first
// checkpoint is used.
func TestNewRunFolderRefusesOthers(t *testing.T) {
	model := map[string]string{
		"config.json":           `{"model_type": "roformer"}`,
		"model.safetensors":     "\x08\x00\x00\x00\x00\x00\x00\x00{}      ",
		"vocab.txt":             "[PAD]\n[UNK]\n",
		"tokenizer_config.json": `{"do_lower_case": true}`,
	}
	cases := []struct {
		name  string
		files map[string]string
		want  string // "" when the folder is used
	}{
		{"fine-tuned model folder", model, "holds a model (config.json, model.safetensors, tokenizer_config.json, vocab.txt)"},
		{"weights alone", map[string]string{"pytorch_model.bin": "x"}, "holds a model (pytorch_model.bin)"},
		{"other files", map[string]string{"notes.md": "x", "a": "", "b": "", "c": "", "d": ""}, "holds files that are not a pretraining run's (a, b, c, d and 1 more)"},
		{"a run's files beside a model", map[string]string{RunFile: "{}", MetricsFile: "", "model.safetensors": "x"}, "holds a model (model.safetensors)"},
		{"missing", nil, ""},
		{"empty", map[string]string{}, ""},
		{"a run stopped before its first checkpoint", map[string]string{RunFile: "{}", "tokenizer/vocab.txt": "[PAD]\n", MetricsFile: "", PlotFile: "", ".tmp-latest-123": ""}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			if c.files != nil {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, body := range c.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			unchanged := func(what string) {
				t.Helper()
				for name, body := range c.files {
					if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, []byte(body)) {
						t.Errorf("%s: %s = %q, %v; want its bytes unchanged", what, name, got, err)
					}
				}
				ents, _ := os.ReadDir(dir)
				if len(ents) != len(c.files) {
					t.Errorf("%s: the folder holds %d entries, want the %d it held", what, len(ents), len(c.files))
				}
			}
			_, err := testJob(t, dir, newFake(40, 8, 1)).Run(context.Background())
			if c.want == "" {
				if err != nil {
					t.Fatalf("Loop.Run: %v; want the folder used", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "choose an empty or new folder") {
				t.Errorf("Loop.Run: err = %v; want one containing %q", err, c.want)
			}
			unchanged("Loop.Run")
			_, _, err = Start(context.Background(), testOptions(t, dir, 4), nil, false)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Start: err = %v; want one containing %q", err, c.want)
			}
			unchanged("Start")
		})
	}
}

// Every file a run saves (checkpoints, the latest pointer, the model
// published into the run folder) is written while the save is marked in
// progress (internal/saving), so that the CLI's exit a second after a
// signal waits for it instead of losing it.
func TestSavesMarkedInProgress(t *testing.T) {
	dir := t.TempDir()
	var unmarked []string
	saves := 0
	failWrite = func(path string) error {
		if filepath.Base(path) == MetricsFile || filepath.Base(path) == PlotFile {
			return nil // a log and a picture, rewritten by the next run
		}
		saves++
		if saving.InProgress() == 0 {
			unmarked = append(unmarked, path)
		}
		return nil
	}
	defer func() { failWrite = nil }()
	if _, err := testJob(t, dir, newFake(40, 8, 1)).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if saves == 0 || len(unmarked) > 0 {
		t.Errorf("%d of %d saved files written with no save marked in progress: %v", len(unmarked), saves, unmarked)
	}
	if n := saving.InProgress(); n != 0 {
		t.Errorf("after the run, %d saves are still marked in progress", n)
	}
}
