package pretrain

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

const helperEnv = "ROFORMER_TRAIN_KILL_HELPER_DIR"

// TestHelperTrainProcess is the child of TestKillAndResume: a 40-step run
// slowed to about 3 ms a step so that the parent can kill it mid-way.
func TestHelperTrainProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process for TestKillAndResume")
	}
	m := newFake(40, 8, 1)
	m.sleep = func() { time.Sleep(3 * time.Millisecond) }
	job := testJob(t, dir, m)
	job.Options.Steps = 40
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestKillAndResume kills a training process with SIGKILL at a random
// moment after its first checkpoint, resumes the run in-process and checks
// that it ends byte-identical to an uninterrupted run.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a subprocess")
	}
	want := straightRun(t, func(j *Loop) { j.Options.Steps = 40 })
	for round := 0; round < 2; round++ {
		dir := t.TempDir()
		delay, _ := killAfterFirstCheckpoint(t, "TestHelperTrainProcess", helperEnv, dir, 20*time.Second, 100*time.Millisecond)
		st, _, err := ReadLatestState(dir)
		if err != nil {
			t.Fatalf("after the kill: %v", err)
		}
		t.Logf("round %d: killed %v after the first checkpoint; latest checkpoint at step %d", round, delay, st.Step)
		job := testJob(t, dir, newFake(40, 8, 3))
		job.Options = TrainOptions{OutDir: dir}
		if _, err := job.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
		compareRuns(t, want, dir, 40)
	}
}

// killAfterFirstCheckpoint runs the test binary's test helper as a child
// with env=dir, waits up to wait for the first checkpoint in dir, lets the
// child go on for a random time below maxDelay and kills it with SIGKILL
// (no chance to save). It returns that time and how the child ended.
func killAfterFirstCheckpoint(t *testing.T, helper, env, dir string, wait, maxDelay time.Duration) (time.Duration, *os.ProcessState) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$")
	cmd.Env = append(os.Environ(), env+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		if _, err := os.Stat(filepath.Join(dir, LatestFile)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the child saved no checkpoint within %v", wait)
		}
		time.Sleep(time.Millisecond)
	}
	delay := time.Duration(rand.N(int64(maxDelay/time.Millisecond))) * time.Millisecond
	time.Sleep(delay)
	cmd.Process.Kill()
	cmd.Wait()
	return delay, cmd.ProcessState
}

// TestMain skips fsync in every test but TestTrainLossDecreases, which runs
// the real path: syncing guards against power loss, which no test can
// observe, and costs seconds on a busy shared disk.
func TestMain(m *testing.M) {
	noSync = true
	os.Exit(m.Run())
}
