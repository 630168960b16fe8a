package main

// The hostile-files suite of issue #47: files of a model folder that are
// not what they claim (a named pipe, a directory, a device), output folders
// that would overwrite a model or the input, and signals that must end a
// verb whatever it waits for. The cases that could hang run `roformer` in
// a child process (cappedCommand) with a deadline, so that a hang fails the
// test rather than stalling it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/internal/saving"
	"github.com/roformer-go/roformer/pretrain"
)

// lockedBuffer is a child's stderr, read while the child runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// child is `roformer args...` running in a child process.
type child struct {
	args   []string
	cmd    *exec.Cmd
	stderr lockedBuffer
	done   chan struct{}
}

// startChild starts `roformer args...` in a child (cappedCommand); the
// test kills it when it ends.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	c := &child{args: args, cmd: cappedCommand(t, args...), done: make(chan struct{})}
	c.cmd.Stdout = io.Discard
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); <-c.done })
	return c
}

// wait returns the child's exit code once it has ended, failing the test
// (with what the child said) when it has not within limit.
func (c *child) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-c.done:
		return c.cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		_ = c.cmd.Process.Kill()
		<-c.done
		t.Fatalf("roformer %s: still running after %v; stderr:\n%s", strings.Join(c.args, " "), limit, c.stderr.String())
		return -1
	}
}

// waitFor waits until the child's stderr holds s, failing the test when
// the child ends or limit passes first.
func (c *child) waitFor(t *testing.T, s string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(c.stderr.String(), s) {
		select {
		case <-c.done:
			t.Fatalf("the child ended before saying %q:\n%s", s, c.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child did not say %q within %v:\n%s", s, limit, c.stderr.String())
		}
	}
}

// makeNotRegular replaces path by a file of kind: "fifo", "directory",
// "symlink to a fifo" or "symlink to /dev/zero"; it returns the type the
// refusal names.
func makeNotRegular(t *testing.T, path, kind string) string {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	var err error
	want := "named pipe"
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o644)
	case "directory":
		err, want = os.Mkdir(path, 0o755), "directory"
	case "symlink to a fifo":
		blob := filepath.Join(t.TempDir(), "blob")
		if err = syscall.Mkfifo(blob, 0o644); err == nil {
			err = os.Symlink(blob, path)
		}
	case "symlink to /dev/zero":
		err, want = os.Symlink("/dev/zero", path), "character device"
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	if err != nil {
		t.Skipf("cannot make a %s: %v", kind, err)
	}
	return want
}

// copyFolder copies the folder src into a new temporary folder.
func copyFolder(t *testing.T, src string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shardedFolder is a tiny model folder whose weights are one shard behind
// model.safetensors.index.json.
func shardedFolder(t *testing.T) string {
	t.Helper()
	dir := hostileFolder(t)
	f, err := checkpoint.ReadSafetensors(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	const shard = "model-00001-of-00001.safetensors"
	if err := os.Rename(filepath.Join(dir, "model.safetensors"), filepath.Join(dir, shard)); err != nil {
		t.Fatal(err)
	}
	wm := map[string]string{}
	for _, n := range f.Names {
		wm[n] = shard
	}
	b, _ := json.Marshal(map[string]any{"weight_map": wm})
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestModelFileNotRegular: `roformer embed` on a model folder one of whose
// files (weights, shard index, shard, config.json, tokenizer files,
// sentence-transformers modules and their weights) is a named pipe, or
// the weights a directory, a symlink to a named pipe or a symlink to
// /dev/zero, refuses it at once: exit 1 naming the file and its type, no
// crash. Before issue #47 the open of a pipe blocked for ever.
func TestModelFileNotRegular(t *testing.T) {
	if testing.Short() {
		t.Skip("children with a deadline")
	}
	st := filepath.Join("..", "..", "sentence", "testdata", "st", "dense_tanh_normalize")
	tiny, sharded := hostileFolder(t), shardedFolder(t)
	work := t.TempDir()
	in := filepath.Join(work, "in.jsonl")
	if err := os.WriteFile(in, []byte("\"the movie was good\"\n\"a bad plot\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	type tc struct{ folder, file, kind string }
	var cases []tc
	for _, f := range []string{"config.json", "pytorch_model.bin", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
		"modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
		"1_Pooling/config.json", "2_Dense/config.json", "2_Dense/pytorch_model.bin"} {
		cases = append(cases, tc{st, f, "fifo"})
	}
	for _, k := range []string{"fifo", "directory", "symlink to a fifo", "symlink to /dev/zero"} {
		cases = append(cases, tc{tiny, "model.safetensors", k})
	}
	cases = append(cases, tc{tiny, "tokenizer.json", "fifo"},
		tc{sharded, "model.safetensors.index.json", "fifo"}, tc{sharded, "model-00001-of-00001.safetensors", "fifo"})
	// Every child starts at once (parallel subtests run two at a time), so
	// that hanging ones cost one deadline, not one each.
	type started struct {
		name, want string
		ch         *child
		start      time.Time
	}
	var runs []started
	for _, c := range cases {
		dir := copyFolder(t, c.folder)
		path := filepath.Join(dir, c.file)
		want := path + ": not a regular file: " + makeNotRegular(t, path, c.kind)
		out := filepath.Join(t.TempDir(), "out.jsonl")
		runs = append(runs, started{filepath.Base(c.folder) + "/" + c.file + "/" + c.kind, want,
			startChild(t, "embed", "--model", dir, "--input", in, "--output", out, "--threads", "1"), time.Now()})
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			code := r.ch.wait(t, time.Until(deadline))
			stderr := r.ch.stderr.String()
			if code != 1 || !strings.Contains(stderr, r.want) || crashed(stderr) {
				t.Errorf("exit %d, want 1 with %q:\n%s", code, r.want, stderr)
			}
			t.Logf("refused in %v: %s", time.Since(r.start).Round(time.Millisecond), lastLine(stderr))
		})
	}
}

// snapshotFiles returns the bytes of every file under dir, by path.
func snapshotFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		m[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNoVerbOverwritesModelFolder: every verb that writes a folder refuses
// a model folder as its output (pretrain --out wrote its config.json and
// model.safetensors before issue #47), and vocab refuses to write into its
// input; the folder's bytes are unchanged after the refusal.
func TestNoVerbOverwritesModelFolder(t *testing.T) {
	work := t.TempDir()
	corpus := smallCorpus(t)
	train := filepath.Join(work, "train.jsonl")
	if err := os.WriteFile(train, []byte(`{"text": "good movie", "label": "pos"}`+"\n"+`{"text": "bad plot", "label": "neg"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pairs := ftPairs(t, work, 4)
	// corpusDir holds a text of the corpus and a tokenizer folder vocab
	// wrote earlier, in which a rerun would overwrite its own input.
	corpusDir := filepath.Join(work, "corpus")
	if err := os.MkdirAll(filepath.Join(corpusDir, "tok"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corpusDir, "a.txt"), []byte("the whale and the ship\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corpusDir, "tok", "vocab.txt"), []byte("[PAD]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args func(model string) []string
		want string
	}{
		{"pretrain --out", func(m string) []string {
			return []string{"pretrain", "--corpus", corpus, "--size", "tiny", "--steps", "2", "--batch", "2", "--seq", "32", "--vocab-size", "400", "--out", m, "--quiet"}
		}, "holds a model (config.json, model.safetensors,"},
		{"finetune --out", func(m string) []string {
			return []string{"finetune", "--model", m, "--train", train, "--eval", train, "--out", m, "--epochs", "1", "--quiet"}
		}, "not empty"},
		{"finetune --objective mnrl --out", func(m string) []string {
			return []string{"finetune", "--model", m, "--objective", "mnrl", "--train", pairs, "--out", m, "--epochs", "1", "--quiet"}
		}, "not empty"},
		{"vocab --out", func(m string) []string {
			return []string{"vocab", "--corpus", corpus, "--size", "50", "--out", m}
		}, "holds config.json, model.safetensors"},
		{"vocab --corpus in --out", func(m string) []string {
			return []string{"vocab", "--corpus", filepath.Join(m, "vocab.txt"), "--size", "50", "--out", filepath.Dir(m) + "/only-vocab"}
		}, "is the --corpus file"},
		{"vocab --out inside --corpus", func(string) []string {
			return []string{"vocab", "--corpus", corpusDir, "--size", "50", "--out", filepath.Join(corpusDir, "tok")}
		}, "is inside the --corpus folder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			model := hostileFolder(t)
			if c.name == "vocab --corpus in --out" {
				// a folder holding only the vocab.txt that is the corpus
				only := filepath.Join(filepath.Dir(model), "only-vocab")
				if err := os.Mkdir(only, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Link(filepath.Join(model, "vocab.txt"), filepath.Join(only, "vocab.txt")); err != nil {
					t.Fatal(err)
				}
			}
			before, beforeCorpus := snapshotFiles(t, filepath.Dir(model)), snapshotFiles(t, corpusDir)
			code, _, stderr := runCLI(t, c.args(model)...)
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want 1 with %q:\n%s", code, c.want, stderr)
			}
			after, afterCorpus := snapshotFiles(t, filepath.Dir(model)), snapshotFiles(t, corpusDir)
			for _, pair := range [][2]map[string]string{{before, after}, {beforeCorpus, afterCorpus}} {
				if len(pair[0]) != len(pair[1]) {
					t.Errorf("the folder held %d files and now %d", len(pair[0]), len(pair[1]))
				}
				for p, b := range pair[0] {
					if pair[1][p] != b {
						t.Errorf("%s changed", p)
					}
				}
			}
		})
	}
}

// openWriter opens the named pipe fifo for writing once a reader has it
// open (the child, in its open), without blocking; the pipe then stays
// open and empty, so that the reader waits in its read.
func openWriter(t *testing.T, fifo string, limit time.Duration) *os.File {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			t.Cleanup(func() { f.Close() })
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reader opened %s within %v: %v", fifo, limit, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSignalEndsBlockedVerb: SIGTERM ends a verb waiting where no context
// reaches (embed's --input a named pipe: in its open, or in its read of a
// pipe that never writes) a second later, with exit 130 and a message
// that says so; a second signal ends it at once. Before issue #47 such a
// verb never ended.
func TestSignalEndsBlockedVerb(t *testing.T) {
	if testing.Short() {
		t.Skip("children with a deadline")
	}
	st := filepath.Join("..", "..", "sentence", "testdata", "st", "dense_tanh_normalize")
	tiny := hostileFolder(t)
	cases := []struct {
		name    string
		model   string
		blocked func(t *testing.T, c *child, fifo string) // returns once the child waits
		signals []os.Signal
		want    string
	}{
		{"in the open of a pipe", st, func(t *testing.T, c *child, _ string) {
			// The folder's description is the last line before the input's open.
			c.waitFor(t, "embed: sentence-transformers folder", 60*time.Second)
			time.Sleep(300 * time.Millisecond)
		}, []os.Signal{syscall.SIGTERM}, "roformer embed: interrupted (SIGTERM) and still running 1s later: exiting"},
		{"in the read of a pipe", tiny, func(t *testing.T, _ *child, fifo string) {
			openWriter(t, fifo, 60*time.Second)
			time.Sleep(100 * time.Millisecond)
		}, []os.Signal{syscall.SIGTERM}, "roformer embed: interrupted (SIGTERM) and still running 1s later: exiting"},
		{"a second signal", tiny, func(t *testing.T, _ *child, fifo string) {
			openWriter(t, fifo, 60*time.Second)
			time.Sleep(100 * time.Millisecond)
		}, []os.Signal{syscall.SIGTERM, syscall.SIGINT}, "roformer embed: interrupted again (SIGINT): exiting at once"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fifo := filepath.Join(t.TempDir(), "in.jsonl")
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Skipf("no named pipes: %v", err)
			}
			ch := startChild(t, "embed", "--model", c.model, "--input", fifo, "--output", filepath.Join(t.TempDir(), "out.jsonl"), "--threads", "1")
			c.blocked(t, ch, fifo)
			start := time.Now()
			for i, s := range c.signals {
				if i > 0 {
					time.Sleep(100 * time.Millisecond) // one at a time: the kernel would hand over SIGINT first
				}
				if err := ch.cmd.Process.Signal(s); err != nil {
					t.Fatal(err)
				}
			}
			code := ch.wait(t, 20*time.Second)
			took := time.Since(start)
			stderr := ch.stderr.String()
			if code != 130 || !strings.Contains(stderr, c.want) || crashed(stderr) {
				t.Errorf("exit %d, want 130 with %q:\n%s", code, c.want, stderr)
			}
			if len(c.signals) == 1 && took < signalGrace {
				t.Errorf("ended %v after the signal, before the %v grace", took, signalGrace)
			}
			t.Logf("ended %v after the signal: %s", took.Round(time.Millisecond), lastLine(stderr))
		})
	}
}

// TestPretrainSIGTERM: SIGTERM during `roformer pretrain` (a child) saves a
// checkpoint at once and exits 130 through the verb's own path (not the
// grace's), leaving latest whole; --resume continues the run.
func TestPretrainSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("a training child")
	}
	dir := filepath.Join(t.TempDir(), "run")
	ch := startChild(t, "pretrain", "--corpus", smallCorpus(t), "--size", "tiny", "--steps", "100000", "--save-every", "3", "--batch", "2", "--seq", "32",
		"--vocab-size", "400", "--eval-every", "0", "--threads", "2", "--out", dir, "--quiet")
	deadline := time.Now().Add(120 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, pretrain.LatestFile)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint within 120 s:\n%s", ch.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := ch.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := ch.wait(t, 60*time.Second)
	stderr := ch.stderr.String()
	if code != 130 || !strings.Contains(stderr, "checkpoint saved at step") || strings.Contains(stderr, "still running") || crashed(stderr) {
		t.Fatalf("exit %d, want 130 with the checkpoint saved:\n%s", code, stderr)
	}
	t.Logf("ended %v after SIGTERM: %s", time.Since(start).Round(time.Millisecond), lastLine(stderr))
	st, _, err := pretrain.ReadLatestState(dir)
	if err != nil {
		t.Fatalf("latest after SIGTERM: %v", err)
	}
	if code, _, stderr := runCLI(t, "pretrain", "--resume", dir, "--steps", strconv.Itoa(st.Step+2), "--quiet"); code != 0 {
		t.Fatalf("--resume after SIGTERM: exit %d: %s", code, stderr)
	}
}

// saveHelperEnv makes TestHelperSlowSave the child of TestSignalWaitsForSave.
const saveHelperEnv = "ROFORMER_TEST_SLOW_SAVE"

// slowSave is how long the save of TestHelperSlowSave takes after the
// signal: longer than signalGrace.
const slowSave = 3 * signalGrace

// TestHelperSlowSave is a verb that, on the signal, saves for slowSave
// (marked in progress, as pretrain's checkpoint is) and then never
// returns, so that only the CLI's own exit ends it.
func TestHelperSlowSave(t *testing.T) {
	if os.Getenv(saveHelperEnv) == "" {
		t.Skip("the child of TestSignalWaitsForSave")
	}
	ctx, stop := interruptOnSignal("slow-save", os.Stderr, true)
	defer stop()
	end := saving.Begin()
	fmt.Fprintln(os.Stderr, "ready")
	<-ctx.Done()
	time.Sleep(slowSave)
	fmt.Fprintln(os.Stderr, "saved")
	end()
	select {}
}

// TestSignalWaitsForSave: a save in progress when the grace is up is
// waited for, however long it takes, and the process then exits 130; no
// save begins after that.
func TestSignalWaitsForSave(t *testing.T) {
	if testing.Short() {
		t.Skip("a child with a deadline")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSlowSave$")
	cmd.Env = append(os.Environ(), saveHelperEnv+"=1")
	c := &child{args: []string{"slow-save"}, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.done })
	c.waitFor(t, "ready", 30*time.Second)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := c.wait(t, 30*time.Second)
	took, stderr := time.Since(start), c.stderr.String()
	for _, want := range []string{"waiting for the save in progress to end", "saved\n", "roformer slow-save: interrupted (SIGTERM) and still running 1s later: exiting"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code != 130 || took < slowSave {
		t.Errorf("exit %d after %v; want 130 after the %v save", code, took, slowSave)
	}
	t.Logf("ended %v after the signal", took.Round(time.Millisecond))
}
