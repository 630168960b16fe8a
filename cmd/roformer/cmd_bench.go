package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/train"
)

func init() {
	register(&command{name: "bench", summary: "time inference or training steps and report tokens/s, GFLOP/s, MFU and peak RSS", run: cmdBench})
}

// benchOptions are the flags of the bench verb.
type benchOptions struct {
	model, size, head, mode string
	batch, seq, threads     int
	steps, warmup           int
	newTokens               int     // decode: tokens generated per row
	peakGFLOPS              float64 // 0: measure with the SGEMM probe
	maskProb                float64 // fraction of labelled tokens in training
	lr, weightDecay         float64
	seed                    uint64
	json, quiet             bool
	cpuProfile              string // write a pprof CPU profile of the timed steps here
	precision               string // fp32, bf16 or int8 (inference)
}

// benchVocab is the vocabulary size of the --size presets (issue #5's
// jobs use 12,000 for small and base, the char-level Chinese RoFormers' size).
var benchVocab = map[string]int{"tiny": 8000, "small": 12000, "base": 12000}

func benchSizeNames() string { return strings.Join(roformer.Presets(), ", ") }

// benchConfig returns the configuration of a --size preset
// (roformer.Preset: RoFormerConfig's defaults with the preset's sizes,
// max_position_embeddings 512, exact GELU).
func benchConfig(size string) (roformer.Config, error) {
	v, ok := benchVocab[size]
	if !ok {
		return roformer.Config{}, usagef("unknown --size %q (valid: %s)", size, benchSizeNames())
	}
	return roformer.Preset(size, v)
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "--size tiny|small|base | --model DIR [flags]", stderr)
	var o benchOptions
	fs.StringVar(&o.model, "model", "", "model folder to time (its config.json and weights); excludes --size")
	fs.StringVar(&o.size, "size", "", "random-initialised preset: "+benchSizeNames()+" (all max_position 512, gelu)")
	fs.StringVar(&o.head, "head", "masked-lm", "head: masked-lm or base (inference only)")
	fs.StringVar(&o.mode, "mode", "infer", "infer (Forward, no dropout), train (ForwardBackward with dropout + AdamW step) or decode (greedy Generate with the key/value cache, causal-LM head)")
	fs.IntVar(&o.batch, "batch", 8, "rows per step")
	fs.IntVar(&o.seq, "seq", 128, "tokens per row (decode: the prompt's length, the context)")
	fs.IntVar(&o.steps, "steps", 5, "timed steps (the median is reported); decode: timed Generate runs")
	fs.IntVar(&o.newTokens, "new-tokens", 32, "decode: new tokens per row (at least 2: the first comes from the prompt pass)")
	fs.IntVar(&o.warmup, "warmup", 1, "untimed steps before the timed ones")
	fs.Float64Var(&o.peakGFLOPS, "peak-gflops", 0, "peak GFLOP/s for MFU; 0 measures it with an SGEMM probe on all threads")
	fs.Float64Var(&o.maskProb, "mask-prob", 0.15, "training: fraction of tokens that carry an MLM label")
	fs.Float64Var(&o.lr, "lr", 1e-4, "training: AdamW learning rate")
	fs.Float64Var(&o.weightDecay, "weight-decay", 0.01, "training: AdamW weight decay (not on biases and LayerNorm)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the initialisation, the token ids, the labels and dropout")
	fs.BoolVar(&o.json, "json", false, "end the output with one line holding the results as a JSON object")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed steps to this file (go tool pprof)")
	fs.BoolVar(&o.quiet, "quiet", false, "print only the JSON line (with --json) and no progress on stderr")
	computeFlags(fs, &o.precision, &o.threads)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if err := setupCompute(o.threads, stderr, o.quiet); err != nil {
		return err
	}
	return runBench(ctx, o, stdout, stderr)
}

// benchResult is the JSON object of --json. The PyTorch twin
// (bench/pytorch/bench.py) writes the same keys.
type benchResult struct {
	Impl         string    `json:"impl"`
	Mode         string    `json:"mode"`
	Size         string    `json:"size"`
	Head         string    `json:"head"`
	Batch        int       `json:"batch"`
	Seq          int       `json:"seq"`
	Threads      int       `json:"threads"`
	BLAS         string    `json:"blas"`
	Precision    string    `json:"precision"`
	CPU          string    `json:"cpu"`
	Vector       string    `json:"vector"`
	Params       int       `json:"params"`
	Steps        int       `json:"steps"`
	Warmup       int       `json:"warmup"`
	TokensPerSec float64   `json:"tokens_per_sec"`
	MsPerStep    float64   `json:"ms_per_step"` // median
	MsMin        float64   `json:"ms_min"`
	MsMax        float64   `json:"ms_max"`
	MsSteps      []float64 `json:"ms_steps"`
	FLOPsPerStep float64   `json:"flops_per_step"`
	GFLOPS       float64   `json:"gflops"`
	PeakGFLOPS   float64   `json:"peak_gflops"`
	PeakSource   string    `json:"peak_source"`
	MFU          float64   `json:"mfu"`
	PeakRSS      int64     `json:"peak_rss_bytes"`
	StartRSS     int64     `json:"start_rss_bytes"`
	HeadRows     int       `json:"head_rows"` // rows through the LM head per step
	Loss         *float64  `json:"loss,omitempty"`
	Note         string    `json:"note"`

	// The ceiling of the format the linear products ran in (fp32,
	// fp32-packed, bf16 or int8), measured by blas.MeasureCeilings at the
	// run's thread count before the timed steps, and the MFU against it
	// (0 when the ceiling has a Reason instead of a rate). Go only: the
	// PyTorch twin does not write these keys.
	Ceiling    *blas.Ceiling `json:"ceiling,omitempty"`
	MFUCeiling float64       `json:"mfu_ceiling,omitempty"`

	// --mode decode only: a step is one decode step (one new token per
	// row), ms_steps the latency of every new token after the first in
	// every timed run, ms_per_step their median (= ms_per_token), and
	// tokens_per_sec batch / ms_per_token.
	NewTokens    int       `json:"new_tokens,omitempty"`
	Context      int       `json:"context,omitempty"`         // the prompt's length (= seq)
	PrefillMs    float64   `json:"prefill_ms,omitempty"`      // median over runs: the prompt pass and the first new token
	PrefillRuns  []float64 `json:"prefill_ms_runs,omitempty"` // each timed run's
	MsPerToken   float64   `json:"ms_per_token,omitempty"`    // median per-token latency after the first
	DecodeTiming string    `json:"decode_timing,omitempty"`   // how the steps were timed
}

func runBench(ctx context.Context, o benchOptions, stdout, stderr io.Writer) error {
	if err := resolveModel(&o.model); err != nil {
		return err
	}
	head, prec, err := o.check()
	if err != nil {
		return err
	}
	if o.mode == "decode" {
		return runDecodeBench(ctx, o, head, prec, stdout, stderr)
	}
	threads, progress, startRSS := benchStart(o, stderr)
	m, size, err := benchModel(o, head, prec)
	if err != nil {
		return err
	}
	if o.mode != "train" {
		prec = m.Precision()
	}
	in := newBenchInputs(o, head, m.Config.VocabSize)
	flops := modelFLOPs(&m.Config, head, o.batch, o.seq, in.headRows)
	if o.mode == "train" {
		flops *= 3 // forward + backward (two products per forward product)
	}
	// The peak for MFU.
	peak, peakSource := o.peakGFLOPS, "given (--peak-gflops)"
	if peak == 0 {
		if peak, peakSource, err = probePeakGFLOPS(ctx, threads); err != nil {
			return err
		}
	}
	ceiling := benchCeiling(ceilingFormat(o.mode, prec), threads)
	fmt.Fprintf(progress, "roformer bench: %s %s %s, batch %d × seq %d, %d threads; %.1fM parameters\n",
		size, head, o.mode, o.batch, o.seq, threads, float64(m.NumParams())/1e6)
	step, loss, err := benchStep(ctx, o, m, in)
	if err != nil {
		return err
	}
	times, err := timeSteps(ctx, o, step, progress)
	if err != nil {
		return err
	}
	rss, rssOK := peakRSS()

	med, BT := median(times), o.batch*o.seq
	res := benchResult{
		Impl: "roformer-go", Mode: o.mode, Size: size, Head: string(head), Batch: o.batch, Seq: o.seq,
		Threads: threads, BLAS: blas.Name(), Precision: string(prec), CPU: blas.CPU().String(), Vector: kernels.VectorPath(), Params: m.NumParams(), Steps: o.steps, Warmup: o.warmup,
		TokensPerSec: float64(BT) / (med / 1e3), MsPerStep: med, MsMin: slices.Min(times), MsMax: slices.Max(times),
		MsSteps: times, FLOPsPerStep: flops, GFLOPS: flops / (med / 1e3) / 1e9,
		PeakGFLOPS: peak, PeakSource: peakSource, PeakRSS: rss, StartRSS: startRSS, HeadRows: in.headRows, Loss: loss,
		Note: benchNote(o, head, in.headRows),
	}
	res.MFU = res.GFLOPS / peak
	res.setCeiling(ceiling)
	return printBench(stdout, o, res, rssOK)
}

// check validates the options and returns the head and the precision.
func (o *benchOptions) check() (roformer.Head, roformer.Precision, error) {
	if (o.model == "") == (o.size == "") {
		return "", "", usagef("give exactly one of --size (%s) and --model DIR", benchSizeNames())
	}
	if o.mode != "infer" && o.mode != "train" && o.mode != "decode" {
		return "", "", usagef("unknown --mode %q (valid: infer, train, decode)", o.mode)
	}
	if o.mode == "decode" {
		// Decoding needs the causal-LM head; --head keeps its default.
		if o.head != "masked-lm" && o.head != string(roformer.HeadCausalLM) {
			return "", "", usagef("--mode decode runs the causal-lm head, not --head %s", o.head)
		}
		o.head = string(roformer.HeadCausalLM)
		if o.newTokens < 2 {
			return "", "", usagef("--new-tokens %d must be at least 2 in --mode decode (the first new token comes from the prompt pass)", o.newTokens)
		}
	}
	head, err := roformer.ParseHead(o.head)
	if err != nil || (head != roformer.HeadMaskedLM && head != roformer.HeadBase && (o.mode != "decode" || head != roformer.HeadCausalLM)) {
		return "", "", usagef("--head %q: bench supports masked-lm and base", o.head)
	}
	if o.mode == "train" && head != roformer.HeadMaskedLM {
		return "", "", usagef("--mode train needs --head masked-lm (the MLM loss is what is trained)")
	}
	if o.batch < 1 || o.seq < 1 || o.steps < 1 || o.warmup < 0 {
		return "", "", usagef("--batch %d, --seq %d and --steps %d must be at least 1, --warmup %d at least 0", o.batch, o.seq, o.steps, o.warmup)
	}
	if !(o.maskProb > 0 && o.maskProb <= 1) {
		return "", "", usagef("--mask-prob %v must be in (0, 1]", o.maskProb)
	}
	prec, err := parsePrecision(o.precision)
	if err != nil {
		return "", "", err
	}
	if prec == roformer.PrecisionInt8 && o.mode == "train" {
		return "", "", usagef("--precision int8 is for inference; training runs in fp32 or bf16")
	}
	if !(o.peakGFLOPS >= 0) || math.IsInf(o.peakGFLOPS, 0) {
		return "", "", usagef("--peak-gflops %v must be a finite number ≥ 0", o.peakGFLOPS)
	}
	return head, prec, nil
}

// benchModel loads the --model folder or initialises the --size preset,
// and returns it with the size's name for the report.
func benchModel(o benchOptions, head roformer.Head, prec roformer.Precision) (*roformer.Model, string, error) {
	var m *roformer.Model
	size := o.size
	infer := o.mode == "infer" || o.mode == "decode"
	if o.model != "" {
		// Inference in the precision asked, or the folder's own (an int8
		// folder's codes are not dequantized to be quantized again).
		open := pipeline.OpenOptions{Head: head, NoTokenizer: true, Precision: roformer.PrecisionFP32}
		if infer {
			open.Precision = prec
		}
		l, err := pipeline.Open(o.model, open)
		if err != nil {
			return nil, "", err
		}
		m, size = l.Model, "model:"+o.model
		if infer {
			return m, size, nil
		}
	} else {
		cfg, err := benchConfig(o.size)
		if err != nil {
			return nil, "", err
		}
		if head == roformer.HeadCausalLM {
			cfg.IsDecoder = true // as HF's RoFormerForCausalLM wants it
		}
		if m, err = roformer.New(cfg, head); err != nil {
			return nil, "", err
		}
		m.Init(o.seed)
	}
	if infer {
		if prec == "" {
			prec = roformer.PrecisionFP32 // prepared for inference, as pipeline.Open does a folder
		}
		if err := m.SetPrecision(prec); err != nil {
			return nil, "", err
		}
	} else if err := m.SetTrainingPrecision(prec); err != nil {
		return nil, "", err
	}
	return m, size, nil
}

// benchInputs are the inputs of every step.
type benchInputs struct {
	batch    *roformer.Batch
	labels   *roformer.Labels // training only
	headRows int              // rows through the LM head per step
}

// newBenchInputs draws random ids (fixed seed), no padding. In training
// exactly round(maskProb·B·T) tokens (at least one), at random positions,
// carry a random target id and the rest −100, so that both implementations
// run the LM head on the same number of rows.
func newBenchInputs(o benchOptions, head roformer.Head, vocab int) benchInputs {
	r := rand.New(rand.NewPCG(o.seed, 0x62656e6368))
	BT := o.batch * o.seq
	in := benchInputs{batch: &roformer.Batch{InputIDs: make([]int32, BT), B: o.batch, T: o.seq}}
	lo := min(5, vocab-1) // past the usual special tokens
	for i := range in.batch.InputIDs {
		in.batch.InputIDs[i] = int32(lo + r.IntN(vocab-lo))
	}
	if head == roformer.HeadMaskedLM {
		in.headRows = BT
	}
	if o.mode == "train" {
		in.headRows = labelledCount(BT, o.maskProb)
		in.labels = &roformer.Labels{IDs: make([]int32, BT)}
		for i := range in.labels.IDs {
			in.labels.IDs[i] = -100
		}
		for _, pos := range r.Perm(BT)[:in.headRows] {
			in.labels.IDs[pos] = int32(lo + r.IntN(vocab-lo))
		}
	}
	return in
}

// benchStep returns one step of the job (i counts the steps from 0,
// warm-up included) and, in training, where the loss of the latest step
// is kept (nil in inference). A training step is the toolkit's own
// (train.Stepper) without the gradient norm, as the PyTorch twin times it:
// ZeroGrad, ForwardBackward with dropout, AdamW at a constant rate.
func benchStep(ctx context.Context, o benchOptions, m *roformer.Model, in benchInputs) (func(i int) error, *float64, error) {
	if o.mode == "infer" {
		se := m.NewSession() // workspace and outputs reused: no allocation per step once warm
		return func(int) error {
			_, err := se.Forward(ctx, in.batch, nil, roformer.Options{})
			return err
		}, nil, nil
	}
	st := m.NewState(o.batch, o.seq, true)
	stepper, err := train.NewStepper(m.Params(), optim.DefaultAdamWConfig(o.weightDecay), optim.Schedule{Kind: optim.Constant, PeakLR: o.lr})
	if err != nil {
		return nil, nil, err
	}
	stepper.NoGradNorm = true
	loss := new(float64)
	return func(i int) error {
		u, err := stepper.Step(i, func(int) (float64, error) {
			res, err := m.ForwardBackward(ctx, st, in.batch, in.labels, roformer.StepOptions{Dropout: true, Seed: o.seed + uint64(i)})
			if err != nil {
				return 0, err
			}
			return res.Loss, nil
		})
		if nf := (*train.NonFiniteError)(nil); errors.As(err, &nf) {
			return fmt.Errorf("bench: training loss became %v", nf.Loss)
		} else if err != nil {
			return err
		}
		*loss = u.Loss
		return nil
	}, loss, nil
}

// timeSteps runs the warm-up steps, then the timed ones (under the CPU
// profile when asked), and returns the time of each in milliseconds.
func timeSteps(ctx context.Context, o benchOptions, step func(int) error, progress io.Writer) ([]float64, error) {
	for i := 0; i < o.warmup; i++ {
		if err := step(i); err != nil {
			return nil, err
		}
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", o.cpuProfile, err)
		}
		defer pprof.StopCPUProfile()
	}
	times := make([]float64, o.steps)
	for i := range times {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := step(o.warmup + i); err != nil {
			return nil, err
		}
		times[i] = float64(time.Since(t0).Nanoseconds()) / 1e6
		fmt.Fprintf(progress, "  step %d/%d: %.1f ms\n", i+1, o.steps, times[i])
	}
	return times, nil
}

// benchNote says what was timed and counted.
func benchNote(o benchOptions, head roformer.Head, headRows int) string {
	var note string
	switch o.mode {
	case "infer":
		note = "inference: Forward in eval mode (no dropout), full [B,T,V] logits"
		if head == roformer.HeadBase {
			note = "inference: Forward in eval mode (no dropout), last hidden state only"
		}
	case "train":
		note = fmt.Sprintf("training: ZeroGrad + ForwardBackward (dropout on) + AdamW step; MLM loss on %d of %d tokens (%.0f%%), LM head run on those rows only; FLOPs = 3 × forward",
			headRows, o.batch*o.seq, 100*o.maskProb)
	}
	return note + "; FLOPs count only matrix products (2·M·N·K, attention QKᵀ and PV included)"
}

// printBench writes the report, and with --json its JSON line.
func printBench(stdout io.Writer, o benchOptions, res benchResult, rssOK bool) error {
	med := res.MsPerStep
	fmt.Fprintf(stdout, "job:        %s %s %s, batch %d × seq %d, %d threads, %s, %s vector kernels\n", res.Size, res.Head, o.mode, o.batch, o.seq, res.Threads, res.BLAS, res.Vector)
	fmt.Fprintf(stdout, "steps:      %d timed after %d warm-up: median %.1f ms (min %.1f, max %.1f, spread %.1f%%)\n",
		o.steps, o.warmup, med, res.MsMin, res.MsMax, 100*(res.MsMax-res.MsMin)/med)
	return printBenchTail(stdout, o, res, rssOK)
}

// printBenchTail prints what every job reports after its timings:
// throughput, MFU, peak memory, the loss of a training job, the note and,
// with --json, the JSON line.
func printBenchTail(stdout io.Writer, o benchOptions, res benchResult, rssOK bool) error {
	fmt.Fprintf(stdout, "throughput: %.1f tokens/s, %.2f GFLOP/s (%.3g GFLOP per step)\n", res.TokensPerSec, res.GFLOPS, res.FLOPsPerStep/1e9)
	fmt.Fprintf(stdout, "MFU:        %.1f%% of %.1f GFLOP/s, %s\n", 100*res.MFU, res.PeakGFLOPS, res.PeakSource)
	if c := res.Ceiling; c != nil && c.Measured() {
		fmt.Fprintf(stdout, "            %.1f%% of the %s ceiling, %.1f %s on %d threads (%s; %s)\n",
			100*res.MFUCeiling, c.Format, c.Rate, c.Unit, c.Threads, c.Impl, blas.CeilingShapes())
	} else if c != nil {
		fmt.Fprintf(stdout, "            %s ceiling not measured: %s\n", c.Format, c.Reason)
	}
	if rssOK {
		fmt.Fprintf(stdout, "peak RSS:   %.1f MiB (%.1f MiB at start)\n", float64(res.PeakRSS)/(1<<20), float64(res.StartRSS)/(1<<20))
	} else {
		fmt.Fprintf(stdout, "peak RSS:   not available on %s\n", runtime.GOOS)
	}
	if res.Loss != nil {
		fmt.Fprintf(stdout, "loss:       %.4f after the last step\n", *res.Loss)
	}
	fmt.Fprintf(stdout, "note:       %s\n", res.Note)
	if o.json {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return nil
}

// modelFLOPs counts the floating-point operations of the matrix products of
// one forward pass of the encoder and head on B rows of T tokens, a product
// of an [M, K] and a [K, N] matrix counting 2·M·N·K:
//
//	embeddings_project (E ≠ H)   2·BT·E·H
//	per layer: q, k, v, output   4 · 2·BT·H·H
//	           feed-forward      2 · 2·BT·H·I
//	           q·kᵀ and probs·v  2 · 2·B·T·T·H   (over all heads, d = H/NH)
//	LM head on headRows rows     2·rows·H·E + 2·rows·E·V
//
// Element-wise work (LayerNorm, softmax, GELU, RoPE) is not counted. A
// training step (forward and backward) is conventionally 3× this.
func modelFLOPs(cfg *roformer.Config, head roformer.Head, B, T, headRows int) float64 {
	E, H, I, V := float64(cfg.EmbeddingSize), float64(cfg.HiddenSize), float64(cfg.IntermediateSize), float64(cfg.VocabSize)
	bt, b, t := float64(B*T), float64(B), float64(T)
	f := 0.0
	if cfg.EmbeddingSize != cfg.HiddenSize {
		f += 2 * bt * E * H
	}
	perLayer := 4*2*bt*H*H + 2*2*bt*H*I + 2*2*b*t*t*H
	f += float64(cfg.NumHiddenLayers) * perLayer
	if head == roformer.HeadMaskedLM || head == roformer.HeadCausalLM {
		n := float64(headRows)
		f += 2*n*H*E + 2*n*E*V
	}
	return f
}

// Probe sizes: each worker multiplies its own [probeM, probeK] block by a
// shared [probeK, probeN] matrix, as MatmulForward splits a layer's rows.
const (
	probeM, probeN, probeK     = 512, 1024, 1024
	probeMinReps, probeMaxReps = 3, 50
	probeTime                  = 400 * time.Millisecond
)

// probePeakGFLOPS measures what the BLAS in use delivers on `threads`
// goroutines running single-threaded SGEMMs at once (the way the kernels use
// it): the best of a few repetitions after one warm-up.
func probePeakGFLOPS(ctx context.Context, threads int) (float64, string, error) {
	r := rand.New(rand.NewPCG(7, 7))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.Float64() - 0.5)
		}
		return s
	}
	b := fill(probeK * probeN)
	as, cs := make([][]float32, threads), make([][]float32, threads)
	for w := range as {
		as[w], cs[w] = fill(probeM*probeK), make([]float32, probeM*probeN)
	}
	// One warm-up round, then rounds until probeTime has passed (at least
	// probeMinReps): the best round is the peak.
	best, reps := math.Inf(1), 0
	start := time.Now()
	for rep := 0; rep <= probeMinReps || (time.Since(start) < probeTime && rep <= probeMaxReps); rep++ {
		if err := ctx.Err(); err != nil {
			return 0, "", err
		}
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := 0; w < threads; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				blas.Sgemm(false, false, probeM, probeN, probeK, 1, as[w], probeK, b, probeN, 0, cs[w], probeN)
			}(w)
		}
		wg.Wait()
		if rep == 0 {
			continue
		}
		reps++
		best = min(best, time.Since(t0).Seconds())
	}
	flops := float64(threads) * 2 * probeM * probeN * probeK
	src := fmt.Sprintf("measured: best of %d rounds of %d concurrent %d×%d×%d SGEMMs through %s", reps, threads, probeM, probeN, probeK, blas.Name())
	return flops / best / 1e9, src, nil
}

// ceilingFormat is the blas.MeasureCeilings format of a run's linear
// products: bf16 and int8 as asked; fp32 inference on oneDNN runs its
// matmul with the weights packed once (roformer.SetPrecision), training
// and fp32 on other backends the backend's Sgemm.
func ceilingFormat(mode string, prec roformer.Precision) string {
	switch {
	case prec == roformer.PrecisionBF16:
		return blas.FormatBF16
	case prec == roformer.PrecisionInt8:
		return blas.FormatInt8
	case mode != "train" && prec == roformer.PrecisionFP32 && blas.Chosen().Kind == blas.KindOneDNN:
		return blas.FormatFP32Packed
	}
	return blas.FormatFP32
}

// benchCeiling measures the ceiling of format f on threads workers, once
// (a few hundred ms); a ceiling that cannot be measured comes back with
// its reason.
func benchCeiling(f string, threads int) *blas.Ceiling {
	cs, err := blas.MeasureCeilings(blas.CeilingOptions{Threads: threads, Formats: []string{f}})
	if err != nil {
		return &blas.Ceiling{Format: f, Threads: threads, Reason: err.Error()}
	}
	return &cs[0]
}

// setCeiling records the ceiling and the MFU against it.
func (r *benchResult) setCeiling(c *blas.Ceiling) {
	r.Ceiling = c
	if c != nil && c.Measured() {
		r.MFUCeiling = r.GFLOPS / c.Rate
	}
}

// labelledCount is the number of MLM-labelled tokens of a training batch:
// round(p·n), at least 1.
func labelledCount(n int, p float64) int {
	return max(1, min(n, int(math.Round(p*float64(n)))))
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// benchStart returns the job's thread count, where progress goes, and the
// process's resident memory before the model exists.
func benchStart(o benchOptions, stderr io.Writer) (threads int, progress io.Writer, startRSS int64) {
	progress = stderr
	if o.quiet {
		progress = io.Discard
	}
	startRSS, _ = peakRSS()
	return max(1, o.threads), progress, startRSS
}

// runDecodeBench is --mode decode: greedy Generate (HF's causal mode, the
// key/value cache) from prompts of o.seq random ids, o.newTokens new
// tokens per row, o.steps timed runs after o.warmup untimed ones. Each run
// yields the prefill time (the prompt pass and the first new token) and
// the latency of every later new token; the report is their medians.
func runDecodeBench(ctx context.Context, o benchOptions, head roformer.Head, prec roformer.Precision, stdout, stderr io.Writer) error {
	threads, progress, startRSS := benchStart(o, stderr)
	m, size, err := benchModel(o, head, prec)
	if err != nil {
		return err
	}
	if o.mode != "train" {
		prec = m.Precision()
	}
	in := newBenchInputs(o, head, m.Config.VocabSize)
	prompts := make([][]int32, o.batch)
	for r := range prompts {
		prompts[r] = in.batch.InputIDs[r*o.seq : (r+1)*o.seq]
	}
	flops := decodeFLOPs(&m.Config, o.batch, o.seq, o.newTokens)
	peak, peakSource := o.peakGFLOPS, "given (--peak-gflops)"
	if peak == 0 {
		if peak, peakSource, err = probePeakGFLOPS(ctx, threads); err != nil {
			return err
		}
	}
	ceiling := benchCeiling(ceilingFormat(o.mode, prec), threads)
	fmt.Fprintf(progress, "roformer bench: %s decode, batch %d, context %d, %d new tokens, %d threads; %.1fM parameters\n",
		size, o.batch, o.seq, o.newTokens, threads, float64(m.NumParams())/1e6)
	for i := 0; i < o.warmup; i++ {
		if _, _, _, err := timeGenerate(ctx, m, prompts, o.newTokens); err != nil {
			return err
		}
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: %s: %w", o.cpuProfile, err)
		}
		defer pprof.StopCPUProfile()
	}
	var tokens, prefills []float64
	timing := ""
	for i := 0; i < o.steps; i++ {
		prefill, lat, how, err := timeGenerate(ctx, m, prompts, o.newTokens)
		if err != nil {
			return err
		}
		tokens, prefills, timing = append(tokens, lat...), append(prefills, prefill), how
		fmt.Fprintf(progress, "  run %d/%d: prefill %.1f ms, median %.2f ms per new token\n", i+1, o.steps, prefill, median(lat))
	}
	rss, rssOK := peakRSS()

	med := median(tokens)
	res := benchResult{
		Impl: "roformer-go", Mode: o.mode, Size: size, Head: string(head), Batch: o.batch, Seq: o.seq,
		Threads: threads, BLAS: blas.Name(), Precision: string(prec), CPU: blas.CPU().String(), Vector: kernels.VectorPath(), Params: m.NumParams(), Steps: o.steps, Warmup: o.warmup,
		TokensPerSec: float64(o.batch) / (med / 1e3), MsPerStep: med, MsMin: slices.Min(tokens), MsMax: slices.Max(tokens),
		MsSteps: tokens, FLOPsPerStep: flops, GFLOPS: flops / (med / 1e3) / 1e9,
		PeakGFLOPS: peak, PeakSource: peakSource, PeakRSS: rss, StartRSS: startRSS, HeadRows: o.batch,
		NewTokens: o.newTokens, Context: o.seq, PrefillMs: median(prefills), PrefillRuns: prefills, MsPerToken: med, DecodeTiming: timing,
		Note: fmt.Sprintf("decode: greedy generate.Generate over the model's Decoder (causal, key/value cache), prompt of %d random ids, %d new tokens per row; "+
			"a step is one new token per row after the first (the first comes from the prompt pass: prefill_ms); "+
			"FLOPs per step: one token through the encoder and LM head, attention over the mean cached length %d; "+
			"FLOPs count only matrix products (2*M*N*K, attention QK^T and PV included)", o.seq, o.newTokens, o.seq+o.newTokens/2),
	}
	res.MFU = res.GFLOPS / peak
	res.setCeiling(ceiling)

	fmt.Fprintf(stdout, "job:        %s decode, batch %d, context %d, %d new tokens, %d threads, %s, %s vector kernels\n", res.Size, o.batch, o.seq, o.newTokens, threads, res.BLAS, res.Vector)
	fmt.Fprintf(stdout, "prefill:    median %.1f ms over %d runs (prompt pass and first new token)\n", res.PrefillMs, o.steps)
	fmt.Fprintf(stdout, "per token:  median %.2f ms over %d new tokens (min %.2f, max %.2f), timed %s\n", med, len(tokens), res.MsMin, res.MsMax, timing)
	return printBenchTail(stdout, o, res, rssOK)
}

// Ways timeGenerate times the steps of a run.
const (
	timingPerStep = "per step (the encoder's per-layer context checks)"
	timingDiff    = "as (time(N tokens) - time(1 token)) / (N-1)"
)

// stepClock is a context that notes the time of every Err call. The
// encoder checks its context once per layer, so a decode run of N steps
// makes N equal groups of calls, and the first call of each group marks
// the start of a step.
type stepClock struct {
	context.Context
	mu    sync.Mutex
	times []time.Time
}

func (c *stepClock) Err() error {
	c.mu.Lock()
	c.times = append(c.times, time.Now())
	c.mu.Unlock()
	return c.Context.Err()
}

// timeGenerate runs one greedy generation of n new tokens per row and
// returns the prefill time (from the call to the start of the second step:
// the prompt pass and the first new token) and the latency of each of the
// n-1 later tokens, in milliseconds, and how they were timed. If the
// context checks do not mark the steps, a second run of one new token
// times the prefill, and every later token gets the mean of the rest.
func timeGenerate(ctx context.Context, m *roformer.Model, prompts [][]int32, n int) (float64, []float64, string, error) {
	opts := generate.Options{MaxNewTokens: n, EOS: -1}
	dec, err := m.NewDecoder(roformer.DecoderOptions{Mode: roformer.DecodeCausal})
	if err != nil {
		return 0, nil, "", err
	}
	clock := &stepClock{Context: ctx}
	t0 := time.Now()
	gen, err := generate.Generate(clock, dec, prompts, opts)
	end := time.Now()
	if err != nil {
		return 0, nil, "", err
	}
	if got, want := len(gen.Sequences[0]), len(prompts[0])+n; got != want {
		return 0, nil, "", fmt.Errorf("bench: Generate returned %d ids per row, want %d", got, want)
	}
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	if calls := len(clock.times); calls > 0 && calls%n == 0 {
		per := calls / n
		lat := make([]float64, n-1)
		for k := 1; k < n; k++ {
			stop := end
			if k+1 < n {
				stop = clock.times[(k+1)*per]
			}
			lat[k-1] = ms(stop.Sub(clock.times[k*per]))
		}
		return ms(clock.times[per].Sub(t0)), lat, timingPerStep, nil
	}
	total := ms(end.Sub(t0))
	opts.MaxNewTokens = 1
	t1 := time.Now()
	if _, err := generate.Generate(ctx, dec, prompts, opts); err != nil {
		return 0, nil, "", err
	}
	prefill := ms(time.Since(t1))
	lat := make([]float64, n-1)
	for i := range lat {
		lat[i] = max(total-prefill, 0) / float64(n-1)
	}
	return prefill, lat, timingDiff, nil
}

// decodeFLOPs counts the matrix products of one decode step (one new
// token per row through the encoder and the LM head), averaged over the
// n-1 steps after the prompt pass of a context of T tokens: step k (k = 1
// … n-1) attends to T+k keys, T + n/2 on average.
//
//	embeddings_project (E ≠ H)   2·B·E·H
//	per layer: q, k, v, output   4 · 2·B·H·H
//	           feed-forward      2 · 2·B·H·I
//	           q·kᵀ and probs·v  2 · 2·B·(T + n/2)·H
//	LM head                      2·B·H·E + 2·B·E·V
func decodeFLOPs(cfg *roformer.Config, B, T, n int) float64 {
	E, H, I, V := float64(cfg.EmbeddingSize), float64(cfg.HiddenSize), float64(cfg.IntermediateSize), float64(cfg.VocabSize)
	b, keys := float64(B), float64(T)+float64(n)/2
	f := 0.0
	if cfg.EmbeddingSize != cfg.HiddenSize {
		f += 2 * b * E * H
	}
	f += float64(cfg.NumHiddenLayers) * (4*2*b*H*H + 2*2*b*H*I + 2*2*b*keys*H)
	return f + 2*b*H*E + 2*b*E*V
}
