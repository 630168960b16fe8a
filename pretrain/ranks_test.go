package pretrain

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/distributed"
)

// onRanks runs f(rank, group) for every rank of an in-process group of n
// ranks, each in its own goroutine, and returns their errors.
func onRanks(n int, f func(r int, g distributed.Comm) error) []error {
	cs := distributed.Loopback(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range cs {
		wg.Go(func() { errs[r] = f(r, cs[r]) })
	}
	wg.Wait()
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// parallelRun trains the test job on n ranks with accumulation accum.
func parallelRun(t *testing.T, dir string, n, accum int) {
	t.Helper()
	noErrors(t, onRanks(n, func(r int, g distributed.Comm) error {
		job := testJob(t, dir, newFake(40, 8, 1))
		job.Options.Accum, job.Group = accum, g
		_, err := job.Run(context.Background())
		return err
	}))
}

// modelFloats reads the fake model's parameters from a run folder.
func modelFloats(t *testing.T, dir string) []float32 {
	t.Helper()
	b := mustRead(t, filepath.Join(dir, "model.bin"))[len(fakeMagic):]
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// closeRuns checks that a data-parallel run matches a single process's:
// losses within 1e-6 relative, weights within 1e-5, world_size on every
// line.
func closeRuns(t *testing.T, one, many string, ranks int) {
	t.Helper()
	a, b := readRecords(t, one), readRecords(t, many)
	if len(a) != len(b) {
		t.Fatalf("%d records against %d", len(a), len(b))
	}
	for i := range a {
		if a[i].WorldSize != 1 || b[i].WorldSize != ranks {
			t.Errorf("record %d: world_size %d and %d, want 1 and %d", i, a[i].WorldSize, b[i].WorldSize, ranks)
		}
		for _, p := range [][2]*float64{{a[i].Loss, b[i].Loss}, {a[i].EvalLoss, b[i].EvalLoss}, {a[i].GradNorm, b[i].GradNorm}} {
			if (p[0] == nil) != (p[1] == nil) {
				t.Fatalf("record %d: different kinds", i)
			}
			if p[0] != nil && math.Abs(*p[0]-*p[1]) > 1e-6*math.Abs(*p[0]) {
				t.Errorf("step %d: %v in one process, %v on %d ranks", a[i].Step, *p[0], *p[1], ranks)
			}
		}
		if a[i].EvalTokens != nil && *a[i].EvalTokens != *b[i].EvalTokens {
			t.Errorf("step %d: %d evaluation tokens in one process, %d on %d ranks", a[i].Step, *a[i].EvalTokens, *b[i].EvalTokens, ranks)
		}
	}
	wa, wb := modelFloats(t, one), modelFloats(t, many)
	worst := 0.0
	for i := range wa {
		worst = max(worst, math.Abs(float64(wa[i]-wb[i])))
	}
	if worst > 1e-5 {
		t.Errorf("weights differ by up to %.3g", worst)
	}
}

// N ranks with accumulation A equal one process with accumulation N·A.
func TestParallelEqualsAccum(t *testing.T) {
	for _, tc := range []struct {
		name         string
		ranks, accum int
	}{{"2x1", 2, 1}, {"2x2", 2, 2}, {"3x1", 3, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			one := straightRun(t, func(j *Loop) { j.Options.Accum = tc.ranks * tc.accum })
			many := t.TempDir()
			parallelRun(t, many, tc.ranks, tc.accum)
			closeRuns(t, one, many, tc.ranks)
		})
	}
}

// An interruption seen by one rank stops every rank at the same step;
// resuming on the same number of ranks ends byte-identical to an
// uninterrupted run, on another number within rounding, and a number that
// cannot share the micro-batches is refused.
func TestParallelInterruptResume(t *testing.T) {
	straight := t.TempDir()
	parallelRun(t, straight, 2, 1)
	interrupted := func() string {
		dir := t.TempDir()
		errs := onRanks(2, func(r int, g distributed.Comm) error {
			m := newFake(40, 8, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if r == 1 {
				m.onCall = func(call int) {
					if call == 7 {
						cancel()
					}
				}
			}
			job := testJob(t, dir, m)
			job.Group = g
			_, err := job.Run(ctx)
			return err
		})
		for r, err := range errs {
			if !errors.Is(err, ErrInterrupted) {
				t.Fatalf("rank %d: %v, want an interruption", r, err)
			}
		}
		if !strings.Contains(errs[0].Error(), errOtherRank.Error()) {
			t.Errorf("rank 0's error does not say another rank was interrupted: %v", errs[0])
		}
		st, _, err := ReadLatestState(dir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Step != 7 || st.Options.WorldSize != 2 {
			t.Fatalf("interrupted at step %d with world size %d, want 7 and 2", st.Step, st.Options.WorldSize)
		}
		return dir
	}
	resume := func(dir string, n int) []error {
		return onRanks(n, func(r int, g distributed.Comm) error {
			job := testJob(t, dir, newFake(40, 8, 3))
			job.Options, job.Group = TrainOptions{OutDir: dir}, g
			_, err := job.Resume(context.Background())
			return err
		})
	}
	t.Run("same_ranks", func(t *testing.T) {
		dir := interrupted()
		noErrors(t, resume(dir, 2))
		compareRuns(t, straight, dir, 20)
	})
	t.Run("one_process", func(t *testing.T) {
		dir := interrupted()
		noErrors(t, resume(dir, 1))
		one := straightRun(t, func(j *Loop) { j.Options.Accum = 2 })
		a, b := modelFloats(t, one), modelFloats(t, dir)
		for i := range a {
			if math.Abs(float64(a[i]-b[i])) > 1e-5 {
				t.Fatalf("weight %d: %v after resuming on one process, %v with --accum 2", i, b[i], a[i])
			}
		}
	})
	t.Run("three_ranks_refused", func(t *testing.T) {
		dir := interrupted()
		for r, err := range resume(dir, 3) {
			if err == nil || (r == 0 && !strings.Contains(err.Error(), "cannot share them evenly")) {
				t.Errorf("rank %d: %v, want a refusal", r, err)
			}
		}
	})
}

// Ranks that do not hold the same data stop with an error that says so.
func TestParallelDataMismatch(t *testing.T) {
	dir := t.TempDir()
	errs := onRanks(2, func(r int, g distributed.Comm) error {
		job := testJob(t, dir, newFake(40, 8, 1))
		job.Group = g
		if r == 1 {
			job.Train = job.Train[1:]
		}
		_, err := job.Run(context.Background())
		return err
	})
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d: no error", r)
		}
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "training data differ") {
		t.Errorf("rank 1: %v, want one about the training data", errs[1])
	}
}

// statefulFake is a fake model with random state of its own: a counter
// that starts at a per-rank value and counts the forward passes.
type statefulFake struct {
	*fakeModel
	count    uint64
	restored []byte
}

func (m *statefulFake) ForwardBackward(ctx context.Context, b *data.Batch) (float64, error) {
	m.count++
	return m.fakeModel.ForwardBackward(ctx, b)
}

func (m *statefulFake) TrainState() ([]byte, error) {
	return binary.LittleEndian.AppendUint64(nil, m.count), nil
}

func (m *statefulFake) SetTrainState(b []byte) error {
	m.restored = append([]byte(nil), b...)
	m.count = binary.LittleEndian.Uint64(b)
	return nil
}

// Each rank's own model state goes into the checkpoint and comes back to
// that rank; another number of ranks is refused.
func TestParallelRankModelStates(t *testing.T) {
	dir := t.TempDir()
	errs := onRanks(2, func(r int, g distributed.Comm) error {
		m := &statefulFake{fakeModel: newFake(40, 8, 1), count: uint64(1000 * r)}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		m.onCall = func(call int) {
			if call == 5 && r == 0 {
				cancel()
			}
		}
		job := testJob(t, dir, nil)
		job.Model, job.Group = m, g
		_, err := job.Run(ctx)
		return err
	})
	for r, err := range errs {
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	st, _, err := ReadLatestState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.RankModelStates) != 2 || st.ModelState != nil {
		t.Fatalf("checkpoint holds %d rank states (model state %v), want 2 and none", len(st.RankModelStates), st.ModelState)
	}
	for r, b := range st.RankModelStates {
		if got, want := binary.LittleEndian.Uint64(b), uint64(1000*r+st.Step); got != want {
			t.Errorf("rank %d's saved counter is %d, want %d", r, got, want)
		}
	}
	restored := make([][]byte, 2)
	noErrors(t, onRanks(2, func(r int, g distributed.Comm) error {
		m := &statefulFake{fakeModel: newFake(40, 8, 3)}
		job := testJob(t, dir, nil)
		job.Model, job.Group, job.Options = m, g, TrainOptions{OutDir: dir, Steps: st.Step}
		_, err := job.Resume(context.Background())
		restored[r] = m.restored
		return err
	}))
	for r := range restored {
		if string(restored[r]) != string(st.RankModelStates[r]) {
			t.Errorf("rank %d restored %x, saved %x", r, restored[r], st.RankModelStates[r])
		}
	}
	job := testJob(t, dir, nil)
	job.Model, job.Options = &statefulFake{fakeModel: newFake(40, 8, 3)}, TrainOptions{OutDir: dir}
	if _, err := job.Resume(context.Background()); err == nil || !strings.Contains(err.Error(), "per rank") {
		t.Errorf("resuming 2 ranks' states on one process: %v, want a refusal", err)
	}
}
