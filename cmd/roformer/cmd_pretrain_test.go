package main

import (
	"context"
	"errors"
	roformer "github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pretrain"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func smallCorpus(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "testdata", "Isaac.Newton-Opticks.txt"))
	if err != nil {
		t.Skipf("no corpus: %v", err)
	}
	p := filepath.Join(t.TempDir(), "corpus.txt")
	os.WriteFile(p, raw[:60000], 0o644)
	return p
}

// The CLI contract of pretrain, fill-mask and an interrupted run resumed.
func TestPretrainCLI(t *testing.T) {
	corpus := smallCorpus(t)
	dir := filepath.Join(t.TempDir(), "run")
	args := []string{"pretrain", "--corpus", corpus, "--size", "tiny", "--steps", "6", "--save-every", "2", "--batch", "2", "--seq", "32",
		"--vocab-size", "400", "--eval-every", "3", "--seed", "7", "--threads", "2", "--out", dir, "--quiet"}
	code, out, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"trained 6 steps", "held-out MLM loss", "metrics.jsonl", "loss.png", "fill-mask"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	for _, f := range []string{"model.safetensors", "config.json", "vocab.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	code, out, stderr = runCLI(t, "fill-mask", "--model", dir, "--top-k", "3", "the [MASK] of light")
	if code != 0 || strings.Count(out, "\n") != 4 {
		t.Fatalf("fill-mask: exit %d\n%s%s", code, out, stderr)
	}
	// A second start in the same folder is refused; --resume with other settings is a usage error.
	if code, _, stderr = runCLI(t, args...); code != 1 || !strings.Contains(stderr, "--resume") {
		t.Errorf("restart in a used folder: exit %d: %s", code, stderr)
	}
	if code, _, _ = runCLI(t, "pretrain", "--resume", dir, "--lr", "1"); code != 2 {
		t.Errorf("--resume with --lr: exit %d, want 2", code)
	}
	// Extending the finished run continues from its last checkpoint.
	if code, _, stderr = runCLI(t, "pretrain", "--resume", dir, "--steps", "8", "--quiet"); code != 0 {
		t.Fatalf("resume to 8 steps: exit %d: %s", code, stderr)
	}
}

// Cancelling the context (what SIGINT does) saves a checkpoint and reports
// errInterrupted (exit code 130); --resume finishes the run.
func TestPretrainInterrupt(t *testing.T) {
	corpus := smallCorpus(t)
	dir := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, err := os.Stat(filepath.Join(dir, pretrain.LatestFile)); err == nil {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	err := cmdPretrain(ctx, []string{"--corpus", corpus, "--size", "tiny", "--steps", "400", "--save-every", "1", "--batch", "2", "--seq", "32",
		"--vocab-size", "400", "--threads", "2", "--out", dir, "--quiet"}, io.Discard, io.Discard)
	if !errors.Is(err, errInterrupted) {
		t.Fatalf("got %v, want an interruption", err)
	}
	st, _, err := pretrain.ReadLatestState(dir)
	if err != nil {
		t.Fatalf("no checkpoint after the interruption: %v", err)
	}
	if st.Step >= 400 {
		t.Fatalf("interrupted run reached step %d", st.Step)
	}
	if c, _, stderr := runCLI(t, "pretrain", "--resume", dir, "--steps", fmtInt(st.Step+2), "--quiet"); c != 0 {
		t.Fatalf("resume: exit %d: %s", c, stderr)
	}
}

func fmtInt(i int) string { return strconv.Itoa(i) }

func TestPretrainBadConfig(t *testing.T) {
	corpus := smallCorpus(t)
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "config.json")
	os.WriteFile(bad, []byte(`{"hidden_size": 30, "num_attention_heads": 4, "vocab_size": 400}`), 0o644)
	code, _, stderr := runCLI(t, "pretrain", "--corpus", corpus, "--config", bad, "--vocab-size", "400", "--steps", "2", "--out", filepath.Join(tmp, "run"), "--quiet")
	if code != 1 || !strings.Contains(stderr, "hidden_size 30 is not divisible by num_attention_heads 4") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	code, _, stderr = runCLI(t, "pretrain", "--corpus", corpus, "--size", "huge", "--steps", "2", "--out", filepath.Join(tmp, "run2"), "--quiet")
	if code != 1 || !strings.Contains(stderr, "unknown size \"huge\"") {
		t.Errorf("unknown size: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(tmp, "run", "checkpoint-0")); err == nil {
		t.Error("a failed start left a checkpoint")
	}
}

// --arch v2 trains RoFormer-V2, and the folder it writes loads as V2.
func TestPretrainV2(t *testing.T) {
	corpus := smallCorpus(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, out, stderr := runCLI(t, "pretrain", "--corpus", corpus, "--size", "tiny", "--arch", "v2", "--steps", "3", "--batch", "2", "--seq", "32",
		"--vocab-size", "400", "--seed", "7", "--threads", "2", "--out", dir, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "trained 3 steps") {
		t.Errorf("output:\n%s", out)
	}
	l, err := roformer.Load(dir, roformer.HeadMaskedLM, roformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Config.RMSNorm() || l.Config.Bias() || l.LM.Transform.W != nil {
		t.Errorf("the trained folder is not RoFormer-V2: norm_type %q, bias %v", l.Config.NormType, l.Config.Bias())
	}
	if code, _, stderr := runCLI(t, "pretrain", "--arch", "v3"); code != 2 || !strings.Contains(stderr, "v3") {
		t.Errorf("--arch v3: exit %d, %s", code, stderr)
	}
}
