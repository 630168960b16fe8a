package main

import (
	"encoding/json"
	"github.com/roformer-go/roformer/blas"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/model/roformer"
)

// benchJSON runs the bench verb and decodes the last line of stdout.
func benchJSON(t *testing.T, args ...string) (benchResult, string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{"bench"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	var r benchResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("last line of stdout is not a JSON object: %v\n%s", err, stdout)
	}
	return r, stdout
}

// A tiny model in both modes gives one JSON line with consistent numbers.
func TestBenchTiny(t *testing.T) {
	// tiny: L=4, H=E=256, NH=4, I=1024, V=8000. With B=2, T=8 (BT=16):
	//   per layer 2·16·(4·256² + 2·256·1024) + 4·2·8²·256 = 25,165,824 + 131,072 = 25,296,896
	//   encoder   4 layers                                                 = 101,187,584
	//   LM head   2·rows·(256·256 + 256·8000) = rows · 4,227,072
	const encoder, headPerRow = 101187584.0, 4227072.0
	cases := []struct {
		name      string
		args      []string
		flops     float64
		headRows  int
		wantLoss  bool
		wantProbe bool
	}{
		{"infer-mlm", []string{"--mode", "infer", "--peak-gflops", "100"}, encoder + 16*headPerRow, 16, false, false},
		{"infer-base", []string{"--mode", "infer", "--head", "base", "--peak-gflops", "100"}, encoder, 0, false, false},
		// round(0.15·16) = 2 labelled rows; training counts 3 × forward.
		{"train", []string{"--mode", "train", "--peak-gflops", "100"}, 3 * (encoder + 2*headPerRow), 2, true, false},
		{"train-probe", []string{"--mode", "train", "--mask-prob", "0.5"}, 3 * (encoder + 8*headPerRow), 8, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--size", "tiny", "--batch", "2", "--seq", "8", "--steps", "1", "--warmup", "0",
				"--threads", "2", "--json", "--quiet"}, c.args...)
			r, stdout := benchJSON(t, args...)
			if !strings.Contains(stdout, "throughput:") {
				t.Errorf("no human-readable summary before the JSON line:\n%s", stdout)
			}
			if r.Impl != "roformer-go" || r.Size != "tiny" || r.Batch != 2 || r.Seq != 8 || r.Threads != 2 || r.Steps != 1 || r.BLAS == "" {
				t.Errorf("identification fields wrong: %+v", r)
			}
			if r.FLOPsPerStep != c.flops {
				t.Errorf("flops_per_step = %.0f, want %.0f", r.FLOPsPerStep, c.flops)
			}
			if r.HeadRows != c.headRows {
				t.Errorf("head_rows = %d, want %d", r.HeadRows, c.headRows)
			}
			if !(r.MsPerStep > 0) || len(r.MsSteps) != 1 || r.MsPerStep != r.MsSteps[0] {
				t.Errorf("ms_per_step %v, ms_steps %v", r.MsPerStep, r.MsSteps)
			}
			if got, want := r.TokensPerSec, 16/(r.MsPerStep/1e3); math.Abs(got-want) > 1e-9*want {
				t.Errorf("tokens_per_sec = %v, want 16 tokens / %v ms = %v", got, r.MsPerStep, want)
			}
			if got, want := r.GFLOPS, c.flops/(r.MsPerStep/1e3)/1e9; math.Abs(got-want) > 1e-9*want {
				t.Errorf("gflops = %v, want %v", got, want)
			}
			if c.wantProbe {
				if !(r.PeakGFLOPS > 0) || !strings.HasPrefix(r.PeakSource, "measured") {
					t.Errorf("peak %v from %q, want a measured positive peak", r.PeakGFLOPS, r.PeakSource)
				}
			} else if r.PeakGFLOPS != 100 {
				t.Errorf("peak_gflops = %v, want the given 100", r.PeakGFLOPS)
			}
			if got, want := r.MFU, r.GFLOPS/r.PeakGFLOPS; math.Abs(got-want) > 1e-12 {
				t.Errorf("mfu = %v, want gflops/peak = %v", got, want)
			}
			if runtime.GOOS == "linux" && r.PeakRSS < 1<<20 {
				t.Errorf("peak_rss_bytes = %d, want at least 1 MiB", r.PeakRSS)
			}
			if c.wantLoss != (r.Loss != nil) {
				t.Fatalf("loss present %v, want %v", r.Loss != nil, c.wantLoss)
			}
			// Random init: the loss is close to ln(8000) ≈ 8.99.
			if r.Loss != nil && !(*r.Loss > 7 && *r.Loss < 11) {
				t.Errorf("loss = %v, want about ln(8000) = 8.99", *r.Loss)
			}
		})
	}
}

// A model folder is timed with its own configuration.
func TestBenchModelFolder(t *testing.T) {
	dir := testutil.Shared(t, "fixtures", "hf-roformer", "cases", "s03_embproj_h64_leftpad")
	l, err := roformer.Load(dir, roformer.HeadMaskedLM, roformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"infer", "train"} {
		t.Run(mode, func(t *testing.T) {
			r, _ := benchJSON(t, "--model", dir, "--mode", mode, "--batch", "2", "--seq", "5", "--steps", "2", "--warmup", "1",
				"--threads", "1", "--json", "--quiet", "--peak-gflops", "10")
			rows := 10
			if mode == "train" {
				rows = 2 // round(0.15·10) = 2 (1.5 rounds away from zero)
			}
			want := modelFLOPs(&l.Config, roformer.HeadMaskedLM, 2, 5, rows)
			if mode == "train" {
				want *= 3
			}
			if r.FLOPsPerStep != want || r.Params != l.NumParams() || r.Size != "model:"+dir {
				t.Errorf("got flops %v params %d size %q, want %v, %d, model:%s", r.FLOPsPerStep, r.Params, r.Size, want, l.NumParams(), dir)
			}
		})
	}
}

// modelFLOPs against sums worked out by hand.
func TestModelFLOPs(t *testing.T) {
	// A fixed small shape (not a --size preset, so that the sums below stay
	// valid when the presets change): L=2, H=E=128, NH=2, I=512, V=8000.
	tiny := roformer.DefaultConfig()
	tiny.NumHiddenLayers, tiny.HiddenSize, tiny.EmbeddingSize, tiny.NumAttentionHeads = 2, 128, 128, 2
	tiny.IntermediateSize, tiny.VocabSize = 512, 8000
	if err := tiny.Validate(); err != nil {
		t.Fatal(err)
	}
	proj := tiny
	proj.EmbeddingSize = 64
	cases := []struct {
		name    string
		cfg     roformer.Config
		head    roformer.Head
		B, T, n int
		want    float64
	}{
		// per layer: 2·32·(4·128² + 2·128·512) + 4·2·16²·128 = 12,582,912 + 262,144; × 2 layers
		{"tiny-base-2x16", tiny, roformer.HeadBase, 2, 16, 0, 25690112},
		// + 2·32·(128·128 + 128·8000) = 66,584,576
		{"tiny-mlm-2x16", tiny, roformer.HeadMaskedLM, 2, 16, 32, 92274688},
		// + 2·3·(128·128 + 128·8000) = 6,242,304 (three labelled rows)
		{"tiny-mlm-3rows", tiny, roformer.HeadMaskedLM, 2, 16, 3, 31932416},
		// E = 64: + project 2·32·64·128 = 524,288, head 2·32·(128·64 + 64·8000) = 33,292,288
		{"tiny-embproj", proj, roformer.HeadMaskedLM, 2, 16, 32, 59506688},
		// attention grows as T²: 1×4 vs 2×2 have equal BT, attention 4·1·16·128 vs 4·2·4·128 per layer
		{"tiny-base-1x4", tiny, roformer.HeadBase, 1, 4, 0, 2 * (2*4*(4*128*128+2*128*512) + 4*1*16*128)},
		{"tiny-base-2x2", tiny, roformer.HeadBase, 2, 2, 0, 2 * (2*4*(4*128*128+2*128*512) + 4*2*4*128)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := modelFLOPs(&c.cfg, c.head, c.B, c.T, c.n); got != c.want {
				t.Errorf("modelFLOPs = %.0f, want %.0f", got, c.want)
			}
		})
	}
}

// Every preset builds a valid configuration with the documented sizes.
func TestBenchPresets(t *testing.T) {
	cases := []struct {
		size                        string
		layers, hidden, heads, I, V int
	}{
		{"tiny", 4, 256, 4, 1024, 8000},
		{"small", 6, 384, 6, 1536, 12000},
		{"base", 12, 768, 12, 3072, 12000},
	}
	for _, c := range cases {
		t.Run(c.size, func(t *testing.T) {
			cfg, err := benchConfig(c.size)
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			got := []int{cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.IntermediateSize, cfg.VocabSize, cfg.EmbeddingSize, cfg.MaxPositionEmbeddings}
			want := []int{c.layers, c.hidden, c.heads, c.I, c.V, c.hidden, 512}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("layers, hidden, heads, I, V, E, max_pos = %v, want %v", got, want)
				}
			}
			if cfg.HiddenAct != "gelu" {
				t.Errorf("hidden_act %q, want gelu", cfg.HiddenAct)
			}
		})
	}
}

// Command-line mistakes exit with code 2 and say what is wrong.
func TestBenchUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"no-model", nil, "exactly one of --size"},
		{"both", []string{"--size", "tiny", "--model", "x"}, "exactly one of --size"},
		{"bad-size", []string{"--size", "huge"}, "valid: tiny, small, base"},
		{"bad-mode", []string{"--size", "tiny", "--mode", "serve"}, "valid: infer, train"},
		{"bad-head", []string{"--size", "tiny", "--head", "question-answering"}, "masked-lm and base"},
		{"train-base", []string{"--size", "tiny", "--mode", "train", "--head", "base"}, "needs --head masked-lm"},
		{"zero-batch", []string{"--size", "tiny", "--batch", "0"}, "at least 1"},
		{"zero-steps", []string{"--size", "tiny", "--steps", "0"}, "at least 1"},
		{"mask-prob", []string{"--size", "tiny", "--mask-prob", "0"}, "--mask-prob"},
		{"peak", []string{"--size", "tiny", "--peak-gflops", "-1"}, "--peak-gflops"},
		{"threads", []string{"--size", "tiny", "--threads", "0"}, "--threads"},
		{"extra-arg", []string{"--size", "tiny", "extra"}, "unexpected arguments"},
		{"precision", []string{"--size", "tiny", "--precision", "fp16"}, "want fp32, bf16 or int8"},
		{"train-int8", []string{"--size", "tiny", "--mode", "train", "--precision", "int8"}, "training runs in fp32"},
		{"decode-head", []string{"--size", "tiny", "--mode", "decode", "--head", "base"}, "runs the causal-lm head"},
		{"decode-one-token", []string{"--size", "tiny", "--mode", "decode", "--new-tokens", "1"}, "--new-tokens 1 must be at least 2"},
		{"decode-zero-seq", []string{"--size", "tiny", "--mode", "decode", "--seq", "0"}, "at least 1"},
		{"causal-infer", []string{"--size", "tiny", "--head", "causal-lm"}, "masked-lm and base"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"bench", "--quiet"}, c.args...)...)
			if code != 2 || !strings.Contains(stderr, c.msg) {
				t.Errorf("exit %d, stderr %q; want exit 2 mentioning %q", code, stderr, c.msg)
			}
		})
	}
}

// A missing model folder is a failure (exit 1), not a usage error.
func TestBenchMissingModel(t *testing.T) {
	code, _, stderr := runCLI(t, "bench", "--quiet", "--model", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "config.json") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming config.json", code, stderr)
	}
}

func TestBenchHelpers(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	for _, c := range []struct {
		n    int
		p    float64
		want int
	}{{16, 0.15, 2}, {1024, 0.15, 154}, {2048, 0.15, 307}, {3, 0.15, 1}, {4, 1, 4}} {
		if got := labelledCount(c.n, c.p); got != c.want {
			t.Errorf("labelledCount(%d, %v) = %d, want %d", c.n, c.p, got, c.want)
		}
	}
}

// --cpuprofile writes a pprof profile of the timed steps.
func TestBenchCPUProfile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cpu.prof")
	benchJSON(t, "--size", "tiny", "--batch", "1", "--seq", "8", "--steps", "1", "--warmup", "0", "--json", "--quiet",
		"--peak-gflops", "100", "--cpuprofile", p)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// pprof profiles are gzip-compressed protocol buffers.
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Errorf("profile %s is %d bytes and not gzip data", p, len(data))
	}
}

// bench --precision int8 runs and says so in its JSON (where oneDNN is
// installed; elsewhere it fails with the reason instead of running fp32).
func TestBenchInt8(t *testing.T) {
	args := []string{"bench", "--size", "tiny", "--batch", "2", "--seq", "8", "--steps", "1", "--warmup", "0",
		"--threads", "2", "--json", "--quiet", "--precision", "int8", "--peak-gflops", "100"}
	code, stdout, stderr := runCLI(t, args...)
	if _, err := blas.Int8(); err != nil {
		if code != 1 || !strings.Contains(stderr, "oneDNN") {
			t.Errorf("without oneDNN: exit %d, stderr %q; want exit 1 naming oneDNN", code, stderr)
		}
		return
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var r benchResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatal(err)
	}
	if r.Precision != "int8" || r.CPU == "" || !(r.TokensPerSec > 0) {
		t.Errorf("precision %q, cpu %q, tokens/s %v", r.Precision, r.CPU, r.TokensPerSec)
	}
}

// --mode decode times greedy cached generation: the prefill, every new
// token after the first, and the keys the side-by-side script reads.
func TestBenchDecode(t *testing.T) {
	args := []string{"bench", "--size", "tiny", "--mode", "decode", "--batch", "2", "--seq", "8", "--new-tokens", "4",
		"--steps", "2", "--warmup", "0", "--threads", "2", "--json", "--quiet", "--peak-gflops", "100"}
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "per token:") || !strings.Contains(stdout, "prefill:") {
		t.Errorf("no human-readable summary before the JSON line:\n%s", stdout)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	last := []byte(lines[len(lines)-1])
	var raw map[string]any
	if err := json.Unmarshal(last, &raw); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, stdout)
	}
	for _, k := range []string{"impl", "mode", "size", "batch", "seq", "threads", "cpu", "params", "tokens_per_sec", "ms_per_step",
		"ms_steps", "flops_per_step", "peak_rss_bytes", "new_tokens", "context", "prefill_ms", "prefill_ms_runs", "ms_per_token", "decode_timing"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("key %q missing from %s", k, last)
		}
	}
	var r benchResult
	if err := json.Unmarshal(last, &r); err != nil {
		t.Fatal(err)
	}
	if r.Mode != "decode" || r.Head != "causal-lm" || r.Size != "tiny" || r.Batch != 2 || r.Seq != 8 || r.Context != 8 || r.NewTokens != 4 || r.Steps != 2 {
		t.Errorf("identification fields wrong: %+v", r)
	}
	// Three tokens after the first in each of two runs.
	if len(r.MsSteps) != 6 || len(r.PrefillRuns) != 2 || r.DecodeTiming != timingPerStep {
		t.Errorf("ms_steps %v, prefill_ms_runs %v, timing %q; want 6 tokens, 2 runs, timed per step", r.MsSteps, r.PrefillRuns, r.DecodeTiming)
	}
	if !(r.MsPerToken > 0) || r.MsPerToken != r.MsPerStep || r.MsPerToken != median(r.MsSteps) || !(r.PrefillMs > 0) {
		t.Errorf("ms_per_token %v, ms_per_step %v, prefill %v", r.MsPerToken, r.MsPerStep, r.PrefillMs)
	}
	if got, want := r.TokensPerSec, 2/(r.MsPerToken/1e3); math.Abs(got-want) > 1e-9*want {
		t.Errorf("tokens_per_sec = %v, want 2 rows / %v ms = %v", got, r.MsPerToken, want)
	}
	cfg, _ := benchConfig("tiny")
	if want := decodeFLOPs(&cfg, 2, 8, 4); r.FLOPsPerStep != want {
		t.Errorf("flops_per_step = %v, want %v", r.FLOPsPerStep, want)
	}
	// The decode keys stay out of the other jobs' JSON.
	_, out := benchJSON(t, "--size", "tiny", "--batch", "1", "--seq", "4", "--steps", "1", "--warmup", "0", "--json", "--quiet", "--peak-gflops", "100")
	if strings.Contains(out, "prefill_ms") || strings.Contains(out, "new_tokens") {
		t.Errorf("decode keys in an infer job's JSON:\n%s", out)
	}
}

// decodeFLOPs against a sum worked out by hand.
func TestDecodeFLOPs(t *testing.T) {
	// tiny: L=4, H=E=256, I=1024, V=8000; B=2, T=8, n=4: keys 8 + 2 = 10.
	//   per layer 2·2·(4·256² + 2·256·1024) + 4·2·10·256 = 3,145,728 + 20,480
	//   head      2·2·(256·256 + 256·8000) = 8,454,144
	cfg, err := benchConfig("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decodeFLOPs(&cfg, 2, 8, 4), 4*(3145728.0+20480)+8454144; got != want {
		t.Errorf("decodeFLOPs = %.0f, want %.0f", got, want)
	}
}

// --mode train --precision bf16 times mixed-precision training steps
// (where the processor has bfloat16 products) and records the precision.
func TestBenchTrainBF16(t *testing.T) {
	if err := blas.BF16Supported(); err != nil {
		t.Skip(err)
	}
	r, _ := benchJSON(t, "--size", "tiny", "--batch", "2", "--seq", "8", "--steps", "1", "--warmup", "0",
		"--threads", "2", "--json", "--quiet", "--mode", "train", "--precision", "bf16", "--peak-gflops", "100")
	if r.Precision != "bf16" || r.Loss == nil || !(*r.Loss > 7 && *r.Loss < 11) {
		t.Errorf("precision %q, loss %v; want bf16 and about ln(8000) = 8.99", r.Precision, r.Loss)
	}
}
