package main

import (
	"context"
	"fmt"
	"github.com/roformer-go/roformer/pipeline"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/kernels"
)

func init() {
	register(&command{name: "env", summary: "print the version, the BLAS in use and the thread count", run: cmdEnv})
}

type envOptions struct {
	threads          int
	probe            bool
	model, precision string
}

func cmdEnv(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("env", "", stderr)
	th := threadsFlag(fs)
	var o envOptions
	fs.StringVar(&o.model, "model", "", "also load this model folder (or Hugging Face id) and print its weights' bytes by form and the process's RSS")
	precisionFlag(fs, &o.precision)
	probe := fs.Bool("probe", false, "measure every matrix-product backend again, print each one's GFLOP/s, and keep the fastest; then measure each number format's ceiling (fp32, fp32-packed, bf16, int8) on --threads workers")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("env takes no arguments, got %q", fs.Args())
	}
	o.threads, o.probe = *th, *probe
	return runEnv(ctx, o, stdout)
}

func runEnv(_ context.Context, opts envOptions, w io.Writer) error {
	if opts.threads < 1 {
		return usagef("--threads %d must be at least 1", opts.threads)
	}
	kernels.SetThreads(opts.threads)
	if batchInvariant && !opts.probe {
		if err := blas.UseBatchInvariant(); err != nil {
			return fmt.Errorf("--batch-invariant: %w", err)
		}
	}
	var c blas.Choice
	if opts.probe {
		c = blas.Probe()
	} else {
		if err := applyBLASEnv(); err != nil {
			return err
		}
		c = blas.Chosen()
	}
	cpu := blas.CPU()
	fmt.Fprintf(w, "roformer   %s\n", versionString())
	fmt.Fprintf(w, "go         %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "cpu        %s\n", cpu)
	fmt.Fprintf(w, "cpus       %d\n", runtime.NumCPU())
	fmt.Fprintf(w, "threads    %d (Go workers; BLAS single-threaded inside each)\n", kernels.Threads())
	fmt.Fprintf(w, "blas       %s\n", c.Name)
	fmt.Fprintf(w, "           chosen: %s\n", c.Reason)
	if c.Cached {
		fmt.Fprintf(w, "           (verdict of %s, cached in %s; roformer env --probe measures again)\n", c.Measured.Format("2006-01-02 15:04 UTC"), c.CacheFile)
	}
	if opts.probe || len(c.Measurements) > 0 {
		for _, m := range c.Measurements {
			if m.Err != "" {
				fmt.Fprintf(w, "  %-20s %s\n", m.Candidate, m.Err)
				continue
			}
			fmt.Fprintf(w, "  %-20s %6.1f GFLOP/s  (%3.0f ms)  %s\n", m.Candidate, m.GFLOPS, m.Millis, m.Name)
		}
	}
	if h := c.Heads; h != nil {
		fmt.Fprintf(w, "heads      %s (the attention heads' products)\n", h.Name)
		fmt.Fprintf(w, "           chosen: %s\n", h.Reason)
	}
	if opts.probe {
		if err := printCeilings(w, kernels.Threads()); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "vector     %s (element-wise kernels: exp, GELU, LayerNorm, RoPE, AdamW)\n", kernels.VectorPath())
	if blas.BatchInvariant() {
		fmt.Fprintf(w, "bits       batch-invariant in fp32 and int8: a text's outputs are the same alone and in any batch (go-asm's products; the bits are this binary's on this instruction set)\n")
	} else {
		fmt.Fprintf(w, "bits       not batch-invariant: %s blocks its products by the number of rows (--batch-invariant runs them on go-asm)\n", blas.Chosen().Kind)
	}
	if err := blas.LoadError(); err != nil {
		fmt.Fprintf(w, "           (not loaded: %v)\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if opts.model != "" {
		return printModelMemory(w, opts)
	}
	return nil
}

// printModelMemory loads the --model folder as serve does (the loader's
// garbage returned to the system) and prints its weights' bytes by form
// (roformer.WeightMemory) and the process's RSS.
func printModelMemory(w io.Writer, opts envOptions) error {
	m, err := openModel(&opts.model, opts.precision, pipeline.OpenOptions{NoTokenizer: true})
	if err != nil {
		return err
	}
	debug.FreeOSMemory()
	mb := func(n int64) string {
		if n < 1e6 {
			return fmt.Sprintf("%.1f KB", float64(n)/1e3)
		}
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	wm := m.Model.WeightMemory()
	fmt.Fprintf(w, "model      %s (%s, %.1fM parameters, %s)\n", opts.model, m.Model.Head.HFClass(), float64(m.Model.NumParams())/1e6, m.Model.Precision())
	fmt.Fprintf(w, "weights    %s: float32 %s, mapped %s, stored %s, prepared %s\n", mb(wm.Total()), mb(wm.Float32), mb(wm.Mapped), mb(wm.Stored), mb(wm.Prepared))
	if rss, ok := currentRSS(); ok {
		peak, _ := peakRSS()
		fmt.Fprintf(w, "rss        %s (peak %s, loading included)\n", mb(rss), mb(peak))
	}
	runtime.KeepAlive(m)
	return nil
}

// printCeilings measures the rate of every number format on threads
// workers (blas.MeasureCeilings, about 1 s) and prints one line a format:
// its rate and what ran it, or why it was not measured.
func printCeilings(w io.Writer, threads int) error {
	cs, err := blas.MeasureCeilings(blas.CeilingOptions{Threads: threads})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "ceilings   %d threads, the linear layers of a BERT-base layer: %s\n", threads, blas.CeilingShapes())
	for _, c := range cs {
		if !c.Measured() {
			fmt.Fprintf(w, "  %-20s not measured: %s\n", c.Format, c.Reason)
			continue
		}
		fmt.Fprintf(w, "  %-20s %6.1f %-7s  (%3.0f ms)  %s\n", c.Format, c.Rate, c.Unit, c.Millis, c.Impl)
	}
	return nil
}
