package pretrain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/train"
)

// Test vocabulary: 0 [PAD], 1 [CLS], 2 [SEP], 3 [MASK], words 4..39.
var testVocab = data.Vocab{Size: 40, PAD: 0, CLS: 1, SEP: 2, MASK: 3}

// testSeqs returns n sequences of length ≤ T: each row draws from one of
// four "topics" (a band of ids) with a skewed distribution, so that both the
// unigram and the context carry signal.
func testSeqs(n, T int, seed uint64) [][]int32 {
	x := seed*0x9E3779B97F4A7C15 + 7
	next := func() uint64 { x = x*6364136223846793005 + 1442695040888963407; return x >> 33 }
	seqs := make([][]int32, n)
	for i := range seqs {
		L := T - int(next()%4)
		topic := int(next() % 4)
		s := []int32{1}
		for len(s) < L-1 {
			r := next() % 100
			var id int
			switch {
			case r < 50:
				id = 4 + topic*9 + int(next()%3) // frequent words of the topic
			case r < 80:
				id = 4 + topic*9 + 3 + int(next()%6)
			default:
				id = 4 + int(next()%36)
			}
			s = append(s, int32(id))
		}
		seqs[i] = append(s, 2)
	}
	return seqs
}

func testJob(t *testing.T, dir string, m *fakeModel) Loop {
	t.Helper()
	all := testSeqs(120, 16, 1)
	tr, ev, err := data.SplitEval(all, 10)
	if err != nil {
		t.Fatal(err)
	}
	return Loop{Model: m, Train: tr, Eval: ev, Vocab: testVocab, Options: TrainOptions{
		Steps: 20, BatchSize: 4, SeqLen: 16, LR: 0.05, Warmup: 2, Schedule: "linear", WeightDecay: 0.01, Clip: 1,
		Seed: 42, SaveEvery: 4, EvalEvery: 10, EvalBatches: 2, LogEvery: 3, OutDir: dir, Threads: 1,
	}}
}

func readRecords(t *testing.T, dir string) []Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		r.TokensPerSec, r.Elapsed, r.AllreduceSec, r.AllreduceWaitSec = nil, nil, nil, nil // clock-dependent
		out = append(out, r)
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFakeModelGradient(t *testing.T) {
	m := newFake(12, 5, 3)
	b := data.Batch{B: 2, T: 4,
		InputIDs:      []int32{1, 3, 7, 2, 1, 9, 3, 2},
		AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 0},
		TokenTypeIDs:  make([]int32, 8),
		Labels:        []int32{-100, 5, 7, -100, -100, -100, 11, -100}}
	if _, err := m.ForwardBackward(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	loss := func() float64 { s, n, _ := m.forward(&b, false, 0); return s / float64(n) }
	for _, p := range m.Params() {
		for _, i := range []int{0, 3, len(p.Data) - 1, 5*3 + 2} {
			if i >= len(p.Data) {
				continue
			}
			old := p.Data[i]
			const h = 1e-2
			p.Data[i] = old + h
			up := loss()
			p.Data[i] = old - h
			down := loss()
			p.Data[i] = old
			fd := (up - down) / (2 * h)
			if d := math.Abs(fd - float64(p.Grad[i])); d > 1e-3+1e-2*math.Abs(fd) {
				t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", p.Name, i, p.Grad[i], fd)
			}
		}
	}
}

func TestTrainLossDecreases(t *testing.T) {
	defer func(v bool) { noSync = v }(noSync)
	noSync = false // the real, syncing path
	dir := t.TempDir()
	var out bytes.Buffer
	job := testJob(t, dir, newFake(40, 8, 1))
	job.Options.Steps = 60
	job.Options.LR = 0.1
	job.Options.EvalEvery = 20
	job.Options.SaveEvery = 20
	job.Options.LogEvery = 5
	job.Out = &out
	job.SaveExtra = func(d string) error { return os.WriteFile(filepath.Join(d, "vocab.txt"), []byte("[PAD]\n"), 0o644) }
	res, err := job.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, dir)
	var first, last, ev0, ev1 float64 = math.NaN(), 0, math.NaN(), 0
	for _, r := range recs {
		if r.Loss != nil {
			if math.IsNaN(first) {
				first = *r.Loss
			}
			last = *r.Loss
		}
		if r.EvalLoss != nil {
			if math.IsNaN(ev0) {
				ev0 = *r.EvalLoss
			}
			ev1 = *r.EvalLoss
		}
	}
	t.Logf("train loss %.3f → %.3f, eval loss %.3f → %.3f, result %+v", first, last, ev0, ev1, res)
	if !(last < first-0.5) || !(ev1 < ev0-0.2) {
		t.Errorf("loss did not decrease: train %.3f → %.3f, eval %.3f → %.3f", first, last, ev0, ev1)
	}
	if res.Step != 60 || res.Interrupted || res.EvalLoss != ev1 || math.Abs(res.EvalPerplexity-math.Exp(ev1)) > 1e-9 {
		t.Errorf("result %+v", res)
	}
	for _, f := range []string{"config.json", "model.bin", "vocab.txt", PlotFile, MetricsFile, LatestFile,
		"checkpoint-40/" + StateFile, "checkpoint-60/" + OptimizerFile, "checkpoint-60/vocab.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint-20")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("checkpoint-20 should have been pruned (keep 2): %v", err)
	}
	if png := mustRead(t, filepath.Join(dir, PlotFile)); !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Error("loss.png is not a PNG")
	}
	if !bytes.Equal(mustRead(t, filepath.Join(dir, "model.bin")), mustRead(t, filepath.Join(dir, "checkpoint-60", "model.bin"))) {
		t.Error("top-level model differs from the last checkpoint")
	}
	if got := string(mustRead(t, filepath.Join(dir, LatestFile))); got != "checkpoint-60\n" {
		t.Errorf("latest = %q", got)
	}
	for _, want := range []string{"step 60/60 | loss ", "eval step 60 | loss ", "saved " + filepath.Join(dir, "checkpoint-40")} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// A second Train into the same folder is refused.
	if _, err := testJob(t, dir, newFake(40, 8, 1)).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already holds a training run") {
		t.Errorf("second Train: %v", err)
	}
}

// straightRun trains job's options without interruption into a new folder.
func straightRun(t *testing.T, mod func(*Loop)) string {
	t.Helper()
	dir := t.TempDir()
	job := testJob(t, dir, newFake(40, 8, 1))
	if mod != nil {
		mod(&job)
	}
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// compareRuns checks that two run folders end with identical model and
// optimizer bytes and the same metrics (clock fields aside).
func compareRuns(t *testing.T, want, got string, steps int) {
	t.Helper()
	last := checkpointName(steps)
	for _, f := range []string{"model.bin", "config.json", filepath.Join(last, "model.bin"), filepath.Join(last, OptimizerFile)} {
		if !bytes.Equal(mustRead(t, filepath.Join(want, f)), mustRead(t, filepath.Join(got, f))) {
			t.Errorf("%s differs between the straight and the resumed run", f)
		}
	}
	a, b := readRecords(t, want), readRecords(t, got)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("metrics differ:\nstraight %s\nresumed  %s", ja, jb)
	}
}

func TestResumeIsExact(t *testing.T) {
	for _, tc := range []struct {
		name    string
		accum   int
		cancels []int // ForwardBackward call numbers at which ctx is cancelled, one per session
		wantAt  []int // step of the interruption checkpoint per session
	}{
		{"boundary", 1, []int{8}, []int{7}},         // cancel inside call 8 = first call of step 8
		{"mid_step_accum", 2, []int{14}, []int{6}},  // call 14 = second micro-batch of step 7
		{"twice", 1, []int{6, 9}, []int{5, 13}},     // second session resumes at 5, cancels at its 9th call
		{"right_after_save", 1, []int{5}, []int{4}}, // interruption at a step that was just saved
	} {
		t.Run(tc.name, func(t *testing.T) {
			mod := func(j *Loop) { j.Options.Accum = tc.accum }
			want := straightRun(t, mod)
			dir := t.TempDir()
			for i, c := range tc.cancels {
				ctx, cancel := context.WithCancel(context.Background())
				m := newFake(40, 8, 99) // different init: Resume must load the checkpoint's
				m.onCall = func(call int) {
					if call == c {
						cancel()
					}
				}
				job := testJob(t, dir, m)
				mod(&job)
				var res *Result
				var err error
				if i == 0 {
					job.Model = newFake(40, 8, 1)
					job.Model.(*fakeModel).onCall = m.onCall
					res, err = job.Run(ctx)
				} else {
					job.Options = TrainOptions{OutDir: dir}
					res, err = job.Resume(ctx)
				}
				cancel()
				if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) || res == nil || !res.Interrupted {
					t.Fatalf("session %d: err = %v, res = %+v", i, err, res)
				}
				if res.Step != tc.wantAt[i] || !strings.Contains(err.Error(), fmt.Sprintf("at step %d of 20", tc.wantAt[i])) {
					t.Fatalf("session %d: interrupted at step %d (%v), want %d", i, res.Step, err, tc.wantAt[i])
				}
			}
			job := testJob(t, dir, newFake(40, 8, 7))
			job.Options = TrainOptions{OutDir: dir}
			res, err := job.Resume(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Step != 20 {
				t.Errorf("resumed run ended at step %d", res.Step)
			}
			compareRuns(t, want, dir, 20)
		})
	}
}

func TestNonFiniteLossStops(t *testing.T) {
	dir := t.TempDir()
	m := newFake(40, 8, 1)
	m.nanAt = 10 // the 10th call is step 10's forward (accum 1)
	_, err := testJob(t, dir, m).Run(context.Background())
	if !errors.Is(err, train.ErrNonFinite) {
		t.Fatalf("err = %v, want train.ErrNonFinite", err)
	}
	for _, want := range []string{"step 10: loss is NaN", "last good checkpoint is " + filepath.Join(dir, "checkpoint-8")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	st, ckpt, err := ReadLatestState(dir)
	if err != nil || st.Step != 8 || filepath.Base(ckpt) != "checkpoint-8" {
		t.Errorf("latest checkpoint after NaN: %v %v %v", st, ckpt, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a final model was published after a NaN")
	}
}

func TestFailedSaveKeepsPrevious(t *testing.T) {
	want := straightRun(t, nil)
	for _, tc := range []struct {
		name   string
		inject func(m *fakeModel)
		msg    string
	}{
		{"model_write", func(m *fakeModel) {
			m.saveFn = func(n int) error {
				if n == 2 {
					return errors.New("write model.bin: no space left on device")
				}
				return nil
			}
		}, "model: write model.bin: no space left on device"},
		{"optimizer_write", func(m *fakeModel) {
			failWrite = func(path string) error {
				if strings.Contains(path, "checkpoint-8") && filepath.Base(path) == OptimizerFile {
					return errors.New("no space left on device")
				}
				return nil
			}
		}, "optimizer.bin: no space left on device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() { failWrite = nil }()
			dir := t.TempDir()
			m := newFake(40, 8, 1)
			tc.inject(m)
			_, err := testJob(t, dir, m).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "saving checkpoint-8 failed, the previous checkpoint is intact") ||
				!strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v", err)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".tmp-") || e.Name() == "checkpoint-8" {
					t.Errorf("left behind %s", e.Name())
				}
			}
			if st, _, err := ReadLatestState(dir); err != nil || st.Step != 4 {
				t.Fatalf("previous checkpoint: %v %v", st, err)
			}
			failWrite = nil
			job := testJob(t, dir, newFake(40, 8, 5))
			job.Options = TrainOptions{OutDir: dir}
			if _, err := job.Resume(context.Background()); err != nil {
				t.Fatal(err)
			}
			compareRuns(t, want, dir, 20)
		})
	}
}

func TestLoopResumeErrors(t *testing.T) {
	base := straightRun(t, func(j *Loop) { j.Options.Steps = 8 })
	copyRun := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		mod   func(j *Loop)
		want  string
	}{
		{"missing_folder", func(t *testing.T, dir string) { os.RemoveAll(dir) }, nil, "no checkpoint"},
		{"not_a_run", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, LatestFile)) }, nil, "has no latest file; is it a training run folder?"},
		{"bad_latest", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, LatestFile), []byte("../etc\n"), 0o644)
		}, nil, `names "../etc", not a checkpoint folder`},
		{"missing_checkpoint", func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, "checkpoint-8")) }, nil, "checkpoint-8/train_state.json: no such file"},
		{"corrupt_model", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "checkpoint-8", "model.bin")
			b := mustRead(t, p)
			b[100] ^= 0x10
			os.WriteFile(p, b, 0o644)
		}, nil, "checkpoint-8/model.bin is corrupt"},
		{"missing_optimizer", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "checkpoint-8", OptimizerFile)) }, nil, "checkpoint-8/optimizer.bin"},
		{"corrupt_state", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "checkpoint-8", StateFile), []byte("{not json"), 0o644)
		}, nil, "train_state.json is corrupt"},
		{"foreign_state", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "checkpoint-8", StateFile), []byte(`{"format":"something-else"}`), 0o644)
		}, nil, `is not a roformer training state (format "something-else")`},
		{"other_data", nil, func(j *Loop) { j.Train = j.Train[1:] }, "training data differ"},
		{"other_vocab", nil, func(j *Loop) { j.Vocab.Size = 41 }, "vocabulary of 40 ids, this job has 41"},
		{"other_model", nil, func(j *Loop) { j.Model = newFake(40, 6, 1) }, "fake: model.bin has"},
		{"fewer_steps", nil, func(j *Loop) { j.Options.Steps = 5 }, "at step 8, past the 5 steps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyRun(t)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			job := testJob(t, dir, newFake(40, 8, 1))
			job.Options = TrainOptions{OutDir: dir}
			if tc.mod != nil {
				tc.mod(&job)
			}
			_, err := job.Resume(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "pretrain: ") {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// Resuming a finished run re-publishes the model and changes nothing.
	dir := copyRun(t)
	job := testJob(t, dir, newFake(40, 8, 1))
	job.Options = TrainOptions{OutDir: dir}
	res, err := job.Resume(context.Background())
	if err != nil || res.Step != 8 {
		t.Fatalf("resume of a finished run: %v %v", res, err)
	}
	compareRuns(t, base, dir, 8)
}

func TestTerminalProgress(t *testing.T) {
	defer func(d time.Duration) { barThrottle = d }(barThrottle)
	barThrottle = 0
	dir := t.TempDir()
	var out bytes.Buffer
	job := testJob(t, dir, newFake(40, 8, 1))
	job.Out, job.IsTerminal = &out, true
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"eval step 10", "/20 loss ", "tok/s", "done: step 20"} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal output lacks %q", want)
		}
	}
	if strings.Contains(s, "| grad norm") {
		t.Error("terminal output has plain log lines as well as the bar")
	}
}

func TestTrainOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*TrainOptions)
		want string
	}{
		{"steps", func(o *TrainOptions) { o.Steps = 0 }, "steps 0"},
		{"schedule", func(o *TrainOptions) { o.Schedule = "step" }, `unknown schedule "step"`},
		{"out", func(o *TrainOptions) { o.OutDir = "" }, "no output folder"},
		{"clip", func(o *TrainOptions) { o.Clip = -1 }, "clip -1"},
		{"lr", func(o *TrainOptions) { o.LR = math.NaN() }, "learning rate NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultTrainOptions(100, "x")
			tc.mod(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if err := DefaultTrainOptions(100, "x").Validate(); err != nil {
		t.Error(err)
	}
}
