package roformer

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/blas"
)

// LMLogits on chosen rows of a SkipHead pass gives the logits of Forward's
// LM head at those positions, for one row, a few, and chunks of several
// sizes across rows, for the masked-LM head and RoFormer-V2's bare tied
// decoder: bit for bit on go-asm and gonum, whose product of a row does not
// depend on the rows beside it, and within rounding on the libraries
// (OpenBLAS and oneDNN choose their kernels by the number of rows).
func TestLMLogitsRowsMatchHead(t *testing.T) {
	ctx := context.Background()
	for _, be := range blas.Available() {
		prev := blas.Set(be)
		kind := blas.Chosen().Kind
		exact := kind == blas.KindGo || kind == blas.KindGoAsm
		for _, c := range []struct {
			name string
			mod  func(*Config)
		}{
			{"masked-lm", nil},
			{"v2-bare", func(c *Config) { c.NormType, c.UseBias = "rms_norm", new(bool) }},
		} {
			t.Run(strings.Fields(be.Name())[0]+"/"+c.name, func(t *testing.T) {
				cfg := tinyConfig(c.mod)
				cfg.VocabSize, cfg.MaxPositionEmbeddings = 37, 64
				m := randomModel(t, cfg, HeadMaskedLM, 3)
				B, T := 3, 23 // rows not multiples of the kernels' blocks
				ids := make([]int32, B*T)
				for i := range ids {
					ids[i] = int32((i*7 + 3) % 37)
				}
				b := &Batch{InputIDs: ids, B: B, T: T}
				full, err := m.Forward(ctx, b, nil, Options{})
				if err != nil {
					t.Fatal(err)
				}
				enc, err := m.Forward(ctx, b, nil, Options{SkipHead: true})
				if err != nil {
					t.Fatal(err)
				}
				if enc.Logits != nil {
					t.Fatal("SkipHead computed logits")
				}
				H, V := cfg.HiddenSize, cfg.VocabSize
				hs := enc.LastHiddenState.Data
				for _, chunk := range []int{1, 2, 5, 16, 17, B * T} {
					logits := make([]float32, chunk*V)
					for lo := 0; lo < B*T; lo += chunk {
						n := min(chunk, B*T-lo)
						if err := m.LMLogits(logits, hs[lo*H:(lo+n)*H], n); err != nil {
							t.Fatal(err)
						}
						for k, x := range logits[:n*V] {
							want := full.Logits.Data[lo*V+k]
							if exact && math.Float32bits(x) != math.Float32bits(want) || math.Abs(float64(x-want)) > 1e-5*max(1, math.Abs(float64(want))) {
								t.Fatalf("chunk %d, row %d, entry %d: %v, Forward's head %v", chunk, lo+k/V, k%V, x, want)
							}
						}
					}
				}
				if err := m.LMLogits(make([]float32, V), hs, 2); err == nil {
					t.Error("room for one row of logits, two asked: no error")
				}
			})
		}
		blas.Set(prev)
	}
	base := randomModel(t, tinyConfig(nil), HeadBase, 1)
	if err := base.LMLogits(nil, nil, 0); err == nil {
		t.Error("a model without an LM head: no error")
	}
}

// LMLogits takes its scratch (the transform's output and its LayerNorm's,
// [N, E] each) from lmPool: chunk after chunk, a warm call allocates less
// than one [N, E] buffer (the kernels' per-call headers), where it used to
// allocate three of them.
func TestLMLogitsScratchPooled(t *testing.T) {
	cfg := tinyConfig(func(c *Config) { c.HiddenSize, c.EmbeddingSize, c.IntermediateSize = 64, 64, 128 })
	m := randomModel(t, cfg, HeadMaskedLM, 4)
	const N = 32
	H, E, V := cfg.HiddenSize, cfg.EmbeddingSize, cfg.VocabSize
	hidden, logits := make([]float32, N*H), make([]float32, N*V)
	for i := range hidden {
		hidden[i] = float32(math.Sin(float64(i)))
	}
	for _, n := range []int{N, 5, N} { // warm, then a smaller chunk on the same scratch
		if err := m.LMLogits(logits, hidden, n); err != nil {
			t.Fatal(err)
		}
	}
	n := N
	perCall := warmBytes(func() {
		if err := m.LMLogits(logits, hidden, n); err != nil {
			t.Fatal(err)
		}
		n = N - (N-n+1)%8 // chunks of N down to N−7 rows
	})
	if limit := float64(4 * N * E); perCall > limit {
		t.Errorf("a warm LMLogits of %d rows allocates %.0f bytes; one [N, E] buffer is %.0f", N, perCall, limit)
	}
	t.Logf("warm LMLogits of up to %d rows: %.0f bytes per call", N, perCall)
}

// warmBytes returns the bytes fn allocates a call: the least of a few
// measurements with the collector off and on one P, so that neither a
// collection (which empties the kernels' scratch pools) nor a task run on
// another P (whose pool is another) counts.
func warmBytes(fn func()) float64 {
	least := math.Inf(1)
	for range 3 {
		const rounds = 4
		runtime.GC()
		// the collector off while measuring: a collection in the rounds
		// empties the kernels' sync.Pool scratch, which the next call then
		// allocates again (seen in CI: 216 KB a pass on a loaded machine)
		gc := debug.SetGCPercent(-1)
		// and on one P: sync.Pool keeps its scratch per P, and a task that
		// a loaded machine schedules on another P than before misses it
		procs := runtime.GOMAXPROCS(1)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range rounds {
			fn()
		}
		runtime.ReadMemStats(&after)
		runtime.GOMAXPROCS(procs)
		debug.SetGCPercent(gc)
		least = min(least, float64(after.TotalAlloc-before.TotalAlloc)/rounds)
	}
	return least
}
