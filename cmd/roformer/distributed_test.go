package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/pretrain"
)

// The MPI tests run this test binary under mpirun: each rank runs
// TestHelperMPIRank, which runs the CLI with the arguments in mpiArgsEnv.
const (
	mpiArgsEnv   = "ROFORMER_TEST_MPI_ARGS"   // CLI arguments, a JSON list
	mpiPidDirEnv = "ROFORMER_TEST_MPI_PIDDIR" // each rank writes rank-<r>.pid here
)

// TestHelperMPIRank is one rank of an MPI test.
func TestHelperMPIRank(t *testing.T) {
	args := os.Getenv(mpiArgsEnv)
	if args == "" {
		t.Skip("one rank of the MPI tests (run by mpirun)")
	}
	if d := os.Getenv(mpiPidDirEnv); d != "" {
		os.WriteFile(filepath.Join(d, "rank-"+os.Getenv("OMPI_COMM_WORLD_RANK")+".pid"), fmt.Appendf(nil, "%d", os.Getpid()), 0o644)
	}
	var a []string
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatal(err)
	}
	if code := run(a, os.Stdout, os.Stderr); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func startMPI(t *testing.T, np int, pidDir string, args ...string) (*os.Process, *bytes.Buffer, func() error) {
	t.Helper()
	js, _ := json.Marshal(args)
	env := []string{mpiArgsEnv + "=" + string(js)}
	if pidDir != "" {
		env = append(env, mpiPidDirEnv+"="+pidDir)
	}
	cmd := testutil.Mpirun(t, np, env, os.Args[0], "-test.run=^TestHelperMPIRank$")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process, &out, cmd.Wait
}

func runMPI(t *testing.T, np int, args ...string) {
	t.Helper()
	_, out, wait := startMPI(t, np, "", args...)
	if err := wait(); err != nil {
		t.Fatalf("mpirun -np %d roformer %s: %v\n%s", np, strings.Join(args, " "), err, out)
	}
}

// metricLines returns the training and evaluation records of a run folder.
func metricLines(t *testing.T, dir string) []pretrain.Record {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, pretrain.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rs []pretrain.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r pretrain.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// smallConfig writes the config.json of a 2-layer model of hidden size 64
// for smallCorpus's 400-token vocabulary: these tests check the
// mechanics, so the model is small enough that mpirun's start dominates.
func smallConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	cfg := `{"vocab_size": 400, "hidden_size": 64, "embedding_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
"intermediate_size": 256, "max_position_embeddings": 64, "hidden_act": "gelu", "architectures": ["RoFormerForMaskedLM"], "model_type": "roformer"}`
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func relDiff(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-30) }

// compareRuns checks that run folder got (ranks ranks) matches want (one
// process): every logged loss within 1e-4 relative, every weight within
// 1e-4, and returns the largest differences seen.
func compareRunFolders(t *testing.T, want, got string, ranks int) (lossDiff, weightDiff float64) {
	t.Helper()
	a, b := metricLines(t, want), metricLines(t, got)
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("%d metrics lines in the single-process run, %d under MPI", len(a), len(b))
	}
	for i := range a {
		if b[i].WorldSize != ranks || a[i].WorldSize != 1 {
			t.Errorf("line %d: world_size %d and %d, want 1 and %d", i, a[i].WorldSize, b[i].WorldSize, ranks)
		}
		pairs := [][2]*float64{{a[i].Loss, b[i].Loss}, {a[i].EvalLoss, b[i].EvalLoss}}
		for _, p := range pairs {
			if (p[0] == nil) != (p[1] == nil) {
				t.Fatalf("line %d: different record kinds", i)
			}
			if p[0] != nil {
				d := relDiff(*p[1], *p[0])
				lossDiff = max(lossDiff, d)
				if d > 1e-4 {
					t.Errorf("step %d: loss %v under MPI, %v in one process (relative difference %.2g)", a[i].Step, *p[1], *p[0], d)
				}
			}
		}
	}
	fa, err := checkpoint.ReadSafetensors(filepath.Join(want, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	fb, err := checkpoint.ReadSafetensors(filepath.Join(got, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fa.Tensors) != len(fb.Tensors) {
		t.Fatalf("%d tensors against %d", len(fa.Tensors), len(fb.Tensors))
	}
	for name, ta := range fa.Tensors {
		tb, ok := fb.Tensors[name]
		if !ok || len(tb.Data) != len(ta.Data) {
			t.Fatalf("tensor %s missing or of another size under MPI", name)
		}
		for i := range ta.Data {
			weightDiff = max(weightDiff, math.Abs(float64(ta.Data[i])-float64(tb.Data[i])))
		}
	}
	if weightDiff > 1e-4 {
		t.Errorf("weights differ by up to %.3g (limit 1e-4)", weightDiff)
	}
	return lossDiff, weightDiff
}

// Two ranks with --batch B equal one process with --batch B --accum 2, and
// two ranks with --accum 2 equal one process with --accum 4: the same
// micro-batches, masks and dropout, only the sums in another order.
func TestPretrainMPIEqualsAccum(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun")
	}
	corpus := smallCorpus(t)
	base := []string{"pretrain", "--corpus", corpus, "--config", smallConfig(t), "--vocab-size", "400", "--steps", "4", "--seq", "32",
		"--batch", "2", "--eval-every", "2", "--seed", "3", "--threads", "1", "--quiet"}
	for _, tc := range []struct{ ranks, accum int }{{2, 1}, {2, 2}} {
		t.Run(fmt.Sprintf("ranks%d_accum%d", tc.ranks, tc.accum), func(t *testing.T) {
			dir := t.TempDir()
			one, many := filepath.Join(dir, "one"), filepath.Join(dir, "mpi")
			runMPI(t, tc.ranks, append(base, "--accum", fmt.Sprint(tc.accum), "--out", many)...)
			if code, _, stderr := runCLI(t, append(base, "--accum", fmt.Sprint(tc.accum*tc.ranks), "--out", one)...); code != 0 {
				t.Fatalf("one process: exit %d: %s", code, stderr)
			}
			l, w := compareRunFolders(t, one, many, tc.ranks)
			t.Logf("largest relative loss difference %.2g, weight difference %.2g", l, w)
		})
	}
}

// Killing one rank with SIGKILL ends the job with mpirun's message naming
// it; --resume under mpirun then ends byte-identical to an uninterrupted
// MPI run.
func TestPretrainMPIKillResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun")
	}
	corpus, cfg := smallCorpus(t), smallConfig(t)
	dir := t.TempDir()
	args := func(out string) []string {
		return []string{"pretrain", "--corpus", corpus, "--config", cfg, "--vocab-size", "400", "--steps", "40", "--seq", "32",
			"--batch", "2", "--save-every", "4", "--eval-every", "20", "--seed", "5", "--threads", "1", "--quiet", "--out", out}
	}
	straight, killed := filepath.Join(dir, "straight"), filepath.Join(dir, "killed")
	runMPI(t, 2, args(straight)...)

	pids := t.TempDir()
	_, out, wait := startMPI(t, 2, pids, args(killed)...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(killed, pretrain.LatestFile)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint within 60 s:\n%s", out)
		}
		time.Sleep(2 * time.Millisecond)
	}
	pid, err := os.ReadFile(filepath.Join(pids, "rank-1.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var p int
	fmt.Sscan(string(pid), &p)
	proc, err := os.FindProcess(p)
	if err != nil {
		t.Fatal(err)
	}
	proc.Kill() // SIGKILL
	if err := wait(); err == nil {
		t.Fatalf("mpirun succeeded after rank 1 was killed:\n%s", out)
	}
	if !strings.Contains(out.String(), "rank 1") || !strings.Contains(out.String(), "signal 9") {
		t.Errorf("mpirun's message does not name rank 1 and signal 9:\n%s", out)
	}
	st, _, err := pretrain.ReadLatestState(killed)
	if err != nil {
		t.Fatalf("after the kill: %v", err)
	}
	t.Logf("rank 1 killed; latest checkpoint at step %d", st.Step)
	if st.Step == 40 {
		t.Log("the run had finished before the kill; the resume below only re-publishes it")
	}
	runMPI(t, 2, "pretrain", "--resume", killed, "--threads", "1", "--quiet")
	for _, f := range []string{"model.safetensors", "config.json", filepath.Join("checkpoint-40", "model.safetensors"), filepath.Join("checkpoint-40", pretrain.OptimizerFile)} {
		a, err := os.ReadFile(filepath.Join(straight, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(killed, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the uninterrupted and the resumed MPI run", f)
		}
	}
}

// Fine-tuning on two ranks equals one process with --accum 2; rank 0
// alone writes the output folder.
func TestFinetuneMPIEqualsAccum(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun")
	}
	model := ftModel(t)
	dir := t.TempDir()
	train := ftData(t, dir, "train.jsonl", 1, 70, true) // the last step of an epoch leaves rank 1 without a micro-batch
	dev := ftData(t, dir, "dev.jsonl", 2, 24, true)
	args := func(out string) []string {
		return []string{"finetune", "--model", model, "--train", train, "--eval", dev, "--out", out, "--epochs", "2", "--lr", "1e-2",
			"--warmup-ratio", "0", "--max-length", "16", "--batch", "8", "--quiet", "--threads", "1"}
	}
	one, many := filepath.Join(dir, "one"), filepath.Join(dir, "mpi")
	runMPI(t, 2, args(many)...)
	if code, _, stderr := runCLI(t, append(args(one), "--accum", "2")...); code != 0 {
		t.Fatalf("one process: exit %d: %s", code, stderr)
	}
	type line struct {
		Loss      float64                `json:"loss"`
		Eval      struct{ Loss float64 } `json:"eval"`
		WorldSize int                    `json:"world_size"`
	}
	read := func(d string) []line {
		var ls []line
		for _, s := range strings.Split(strings.TrimSpace(mustRead(t, filepath.Join(d, "metrics.jsonl"))), "\n") {
			var l line
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		return ls
	}
	a, b := read(one), read(many)
	if len(a) != len(b) || len(a) != 2 {
		t.Fatalf("%d and %d metrics lines, want 2", len(a), len(b))
	}
	for i := range a {
		if b[i].WorldSize != 2 || relDiff(b[i].Loss, a[i].Loss) > 1e-4 || relDiff(b[i].Eval.Loss, a[i].Eval.Loss) > 1e-4 {
			t.Errorf("epoch %d: %+v on 2 ranks, %+v in one process", i+1, b[i], a[i])
		}
	}
	fa, err := checkpoint.ReadSafetensors(filepath.Join(one, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	fb, err := checkpoint.ReadSafetensors(filepath.Join(many, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for name, ta := range fa.Tensors {
		for i := range ta.Data {
			if d := math.Abs(float64(ta.Data[i] - fb.Tensors[name].Data[i])); d > 1e-4 {
				t.Fatalf("%s[%d] differs by %.3g", name, i, d)
			}
		}
	}
}
