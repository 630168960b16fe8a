package blas

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Number formats whose ceilings MeasureCeilings measures.
const (
	// FormatFP32 is float32 through the Sgemm of the backend in use
	// (Current), which packs the weights again on every product: the
	// products of training and of a model with nothing prepared.
	FormatFP32 = "fp32"
	// FormatFP32Packed is float32 through oneDNN's matmul with the weights
	// stored once in its blocked layout (NewF32Matmul): the products of
	// fp32 inference when oneDNN is the backend in use.
	FormatFP32Packed = "fp32-packed"
	// FormatBF16 is bfloat16 weights and inputs with float32 accumulation
	// (NewBF16Matmul; the input's rounding to bfloat16 included).
	FormatBF16 = "bf16"
	// FormatInt8 is uint8 inputs times int8 weights with int32
	// accumulation (NewS8Matmul, ForwardU8), without the quantization of
	// the inputs or the rescaling of the outputs. Its rate counts integer
	// operations: GOP/s.
	FormatInt8 = "int8"
)

// CeilingFormats lists the formats in the order MeasureCeilings reports them.
var CeilingFormats = []string{FormatFP32, FormatFP32Packed, FormatBF16, FormatInt8}

// MaxCeilingThreads bounds CeilingOptions.Threads: each worker has its own
// output buffer of 1.5 MiB.
const MaxCeilingThreads = 256

// ceilingRows is the number of rows of every product: the 128-row block a
// worker issues for a linear layer (see probeShapes).
const ceilingRows = 128

// ceilingShape is the weight of one linear layer, [n, k] (n outputs, k
// inputs), multiplied by a [ceilingRows, k] block of activations.
type ceilingShape struct{ n, k int }

// ceilingShapes are the linear layers of probeShapes: the rows that
// multiply activations by a weight's transpose, once, with no transpose
// of A. The attention products (per head, no weight) and the weight
// gradient have no packed, bf16 or int8 form to compare, so they are left
// out of every format alike.
var ceilingShapes = func() []ceilingShape {
	var cs []ceilingShape
	for _, s := range probeShapes {
		if !s.transA && s.transB && s.reps == 1 && s.m == ceilingRows {
			cs = append(cs, ceilingShape{n: s.n, k: s.k})
		}
	}
	return cs
}()

// CeilingShapes describes the products of a ceiling round, for reports:
// "128 rows × W [2304, 768], [3072, 768], [768, 3072]".
func CeilingShapes() string {
	parts := make([]string, len(ceilingShapes))
	for i, s := range ceilingShapes {
		parts[i] = fmt.Sprintf("[%d, %d]", s.n, s.k)
	}
	return fmt.Sprintf("%d rows × W %s", ceilingRows, strings.Join(parts, ", "))
}

// ceilingOps is the number of operations of one worker's round,
// 2·m·n·k summed over ceilingShapes.
func ceilingOps() float64 {
	ops := 0.0
	for _, s := range ceilingShapes {
		ops += 2 * float64(ceilingRows) * float64(s.n) * float64(s.k)
	}
	return ops
}

// Ceiling is the measured rate of one number format's products: what the
// library can deliver in that format, against which a model's MFU is read.
type Ceiling struct {
	Format  string  `json:"format"`           // FormatFP32, FormatFP32Packed, FormatBF16 or FormatInt8
	Rate    float64 `json:"rate"`             // GFLOP/s (GOP/s for int8) of all workers together; 0 when not measured
	Unit    string  `json:"unit"`             // "GFLOP/s" or "GOP/s"
	Threads int     `json:"threads"`          // workers, each running the products single-threaded
	Impl    string  `json:"impl,omitempty"`   // what ran: the backend's Name (fp32) or oneDNN's implementations
	Rounds  int     `json:"rounds,omitempty"` // timed rounds; Rate is the best of them
	Millis  float64 `json:"ms,omitempty"`     // time taken: preparation, warm-up and timed rounds
	Reason  string  `json:"reason,omitempty"` // why the format was not measured
}

// Measured reports whether c holds a rate (false: Reason says why not).
func (c Ceiling) Measured() bool { return c.Reason == "" && c.Rate > 0 }

// CeilingOptions says how MeasureCeilings measures.
type CeilingOptions struct {
	// Threads is the number of workers that run the products at once,
	// each single-threaded and on its own rows, as the kernels run them;
	// 1 to MaxCeilingThreads.
	Threads int
	// Formats are the formats to measure, from CeilingFormats, in any
	// order; nil measures all of them.
	Formats []string
	// Rounds is the most timed rounds a format gets after its warm-up
	// rounds, two, or one where the first spends the budget (0: 8).
	Rounds int
	// Budget is a format's time, from the end of its preparation (the
	// weights packed, the primitives created), after which no further
	// round starts; every measured format gets at least one timed round
	// (0: 300 ms).
	Budget time.Duration
}

// Defaults of CeilingOptions.
const (
	defaultCeilingRounds = 8
	defaultCeilingBudget = 300 * time.Millisecond
	ceilingWarmup        = 2 // oneDNN's kernels run slow on their first calls
)

// MeasureCeilings measures the rate of each number format this machine
// can run, on the linear layers of a BERT-base encoder layer (hidden 768,
// intermediate 3072): a round is, on each of o.Threads workers at once, a
// [128, k] block of activations times Wᵀ for the fused q/k/v weight
// [2304, 768] and the feed-forward weights [3072, 768] and [768, 3072],
// 1.66 G operations a worker. The rate of a round is
//
//	rate = Threads · Σ 2·m·n·k / (wall time of the round)
//
// and a format's rate is its best timed round. The products are the same
// on every call (fixed operands; the weights are shared by the workers,
// as a model's layers are), so only the machine's speed and load change
// the result. With the default Rounds and Budget all four formats take
// about 0.6 s together on an idle 2-core AMD Zen 4 (oneDNN), at most about
// 1.5 s on a loaded or slow machine; fewer Formats take less.
//
// It returns one Ceiling per format asked for, in the order of
// CeilingFormats; a format this machine cannot run (no oneDNN, no
// AVX512_BF16 or AMX-BF16) has Rate 0 and a Reason. It returns an error
// only for bad options: a thread count out of range, an unknown format.
func MeasureCeilings(o CeilingOptions) ([]Ceiling, error) {
	if o.Threads < 1 || o.Threads > MaxCeilingThreads {
		return nil, fmt.Errorf("blas: MeasureCeilings: %d threads, want 1 to %d", o.Threads, MaxCeilingThreads)
	}
	if o.Rounds < 0 || o.Budget < 0 {
		return nil, fmt.Errorf("blas: MeasureCeilings: rounds %d and budget %v must not be negative", o.Rounds, o.Budget)
	}
	if o.Rounds == 0 {
		o.Rounds = defaultCeilingRounds
	}
	if o.Budget == 0 {
		o.Budget = defaultCeilingBudget
	}
	want := map[string]bool{}
	for _, f := range o.Formats {
		known := false
		for _, k := range CeilingFormats {
			known = known || f == k
		}
		if !known {
			return nil, fmt.Errorf("blas: MeasureCeilings: unknown format %q (want %s)", f, strings.Join(CeilingFormats, ", "))
		}
		want[f] = true
	}
	ops := newCeilingOperands(o.Threads)
	var cs []Ceiling
	for _, f := range CeilingFormats {
		if len(o.Formats) > 0 && !want[f] {
			continue
		}
		c := Ceiling{Format: f, Unit: "GFLOP/s", Threads: o.Threads}
		if f == FormatInt8 {
			c.Unit = "GOP/s"
		}
		t0 := time.Now()
		round, impl, err := ops.prepare(f)
		if err != nil {
			c.Reason = err.Error()
		} else {
			c.Impl = impl
			c.Rate, c.Rounds = ops.measure(round, o.Rounds, o.Budget)
		}
		c.Millis = float64(time.Since(t0).Microseconds()) / 1000
		cs = append(cs, c)
	}
	return cs, nil
}

// ceilingOperands are the operands of every format, made on first use:
// the activations (shared, read-only), the weights, and one output buffer
// per worker.
type ceilingOperands struct {
	threads int
	inp     []float32   // [ceilingRows, max k]
	inpU8   []uint8     // [ceilingRows, max k]
	w       [][]float32 // per shape, [n, k]
	out     [][]float32 // per worker, [ceilingRows, max n]
	outS32  [][]int32   // per worker, [ceilingRows, max n]
	maxN    int
}

func newCeilingOperands(threads int) *ceilingOperands {
	return &ceilingOperands{threads: threads}
}

func (o *ceilingOperands) input() []float32 {
	if o.inp == nil {
		maxK := 0
		for _, s := range ceilingShapes {
			maxK = max(maxK, s.k)
			o.maxN = max(o.maxN, s.n)
		}
		o.inp = make([]float32, ceilingRows*maxK)
		for i := range o.inp {
			o.inp[i] = float32(i%7)*0.25 - 0.75
		}
	}
	return o.inp
}

func (o *ceilingOperands) weights() [][]float32 {
	if o.w == nil {
		o.w = make([][]float32, len(ceilingShapes))
		for i, s := range ceilingShapes {
			o.w[i] = make([]float32, s.n*s.k)
			for j := range o.w[i] {
				o.w[i][j] = float32(j%5)*0.125 - 0.25
			}
		}
	}
	return o.w
}

func (o *ceilingOperands) outputs() [][]float32 {
	o.input()
	if o.out == nil {
		o.out = make([][]float32, o.threads)
		for t := range o.out {
			o.out[t] = make([]float32, ceilingRows*o.maxN)
		}
	}
	return o.out
}

// prepare makes the products of format f and returns one worker's round
// and the name of what runs it, or why f cannot run here.
func (o *ceilingOperands) prepare(f string) (round func(worker int), impl string, err error) {
	inp, w := o.input(), o.weights()
	switch f {
	case FormatFP32:
		b := Current()
		out := o.outputs()
		return func(t int) {
			for i, s := range ceilingShapes {
				b.Sgemm(false, true, ceilingRows, s.n, s.k, 1, inp, s.k, w[i], s.k, 0, out[t], s.n)
			}
		}, b.Name() + " (Sgemm)", nil
	case FormatFP32Packed, FormatBF16:
		newMatmul := NewF32Matmul
		if f == FormatBF16 {
			if err := BF16Supported(); err != nil {
				return nil, "", err
			}
			newMatmul = NewBF16Matmul
		}
		ls := make([]*PackedMatmul, len(ceilingShapes))
		for i, s := range ceilingShapes {
			if ls[i], err = newMatmul(w[i], s.n, s.k); err != nil {
				return nil, "", err
			}
		}
		out := o.outputs()
		return func(t int) {
			for _, l := range ls {
				l.Forward(out[t], inp, ceilingRows, 0)
			}
		}, packedImpls(ls), nil
	case FormatInt8:
		ls := make([]*PackedMatmul, len(ceilingShapes))
		for i, s := range ceilingShapes {
			w8 := make([]int8, s.n*s.k)
			for j := range w8 {
				w8[j] = int8(j%5 - 2)
			}
			if ls[i], err = NewS8Matmul(w8, s.n, s.k); err != nil {
				return nil, "", err
			}
		}
		if o.inpU8 == nil {
			o.inpU8 = make([]uint8, len(inp))
			for i := range o.inpU8 {
				o.inpU8[i] = uint8(i % 7 * 16)
			}
		}
		if o.outS32 == nil {
			o.outS32 = make([][]int32, o.threads)
			for t := range o.outS32 {
				o.outS32[t] = make([]int32, ceilingRows*o.maxN)
			}
		}
		a, out := o.inpU8, o.outS32
		return func(t int) {
			for _, l := range ls {
				l.ForwardU8(out[t], a, ceilingRows)
			}
		}, packedImpls(ls), nil
	}
	return nil, "", errors.New("blas: unknown format " + f)
}

// packedImpls names oneDNN's implementations of the layers' primitives for
// ceilingRows rows, each once, in the order of the layers.
func packedImpls(ls []*PackedMatmul) string {
	var names []string
	for _, l := range ls {
		n := l.impl(ceilingRows, 0)
		dup := false
		for _, m := range names {
			dup = dup || m == n
		}
		if !dup {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// measure runs the warm-up rounds (the second only within the budget),
// then timed rounds until rounds are done or the budget is spent, at least
// one, and returns the best rate and the number of timed rounds.
func (o *ceilingOperands) measure(round func(int), rounds int, budget time.Duration) (float64, int) {
	ops := float64(o.threads) * ceilingOps()
	start := time.Now()
	for i := 0; i < ceilingWarmup && (i == 0 || time.Since(start) < budget); i++ {
		o.run(round)
	}
	best, n := 0.0, 0
	for n < rounds && (n == 0 || time.Since(start) < budget) {
		d := o.run(round)
		best = max(best, ops/d.Seconds()/1e9)
		n++
	}
	return best, n
}

// run runs one round on every worker at once, each on a locked OS thread,
// and returns its wall time.
func (o *ceilingOperands) run(round func(int)) time.Duration {
	var wg sync.WaitGroup
	t0 := time.Now()
	for t := 0; t < o.threads; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			round(t)
		}()
	}
	wg.Wait()
	return time.Since(t0)
}
