package finetune

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/roformer-go/roformer/contrastive"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/model/roformer"
)

// TestEmbedStepRSS measures the memory and time of MNRL steps on the main
// job's model (pretrain's default: the tiny preset, 4 layers of 256, a
// vocabulary of 8000) at 64 pairs of 92 tokens, one process per setting,
// as ROFORMER_EMBED_RSS says: the mini-batch size (0: without gradient
// caching), then optionally ",STEPS" (default 3). It prints the peak RSS
// (VmHWM) before and after each step and each step's wall and CPU time:
//
//	go test -c -o /tmp/ft.test ./finetune
//	ROFORMER_EMBED_RSS=0 /tmp/ft.test -test.run EmbedStepRSS -test.v
//	ROFORMER_EMBED_RSS=8 /tmp/ft.test -test.run EmbedStepRSS -test.v
func TestEmbedStepRSS(t *testing.T) {
	env := os.Getenv("ROFORMER_EMBED_RSS")
	if env == "" {
		t.Skip("a measurement: set ROFORMER_EMBED_RSS=MINI[,STEPS]")
	}
	f := strings.Split(env, ",")
	mini, err := strconv.Atoi(f[0])
	mustf(t, err, "ROFORMER_EMBED_RSS %q", env)
	steps := 3
	if len(f) > 1 {
		steps, err = strconv.Atoi(f[1])
		mustf(t, err, "ROFORMER_EMBED_RSS %q", env)
	}
	const B, T, V = 64, 92, 8000
	cfg, err := roformer.Preset("tiny", V)
	mustf(t, err, "Preset")
	m, err := roformer.New(cfg, roformer.HeadBase)
	mustf(t, err, "New")
	m.Init(1)
	r := testutil.Rand(1)
	feats := make([]pairFeature, B)
	rows := make([]*pairFeature, B)
	for i := range feats {
		feats[i].ids = make([][]int32, 2)
		for c := range 2 {
			x := make([]int32, T)
			for k := range x {
				x[k] = int32(5 + r.IntN(V-5))
			}
			feats[i].ids[c] = x
		}
		rows[i] = &feats[i]
	}
	tr := &embedTrainer{j: EmbedJob{Model: m, Pooling: PoolMean, Objective: contrastive.Objective{Kind: contrastive.KindMNRL, Scale: 20}}, cols: 2,
		states: []*stateCache{{m: m}, {m: m}}, mini: mini}
	t.Logf("model %d parameters; VmHWM before the first step %s", m.NumParams(), vmHWM(t))
	for i := range steps {
		t0, c0 := time.Now(), cpuTime()
		_, err := tr.microStep(context.Background(), rows, uint64(i))
		mustf(t, err, "step %d", i+1)
		t.Logf("step %d (mini-batch %d): %.0f ms wall, %.0f ms CPU; VmHWM %s", i+1, mini, float64(time.Since(t0).Microseconds())/1e3,
			float64((cpuTime()-c0).Microseconds())/1e3, vmHWM(t))
	}
}

// cpuTime is the process's user and system time (under other jobs' load,
// steadier than the wall clock).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func vmHWM(t *testing.T) string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
