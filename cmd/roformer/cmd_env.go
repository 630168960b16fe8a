package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/kernels"
)

func init() {
	register(&command{name: "env", summary: "print the version, the BLAS in use and the thread count", run: cmdEnv})
}

type envOptions struct {
	threads int
	probe   bool
}

func cmdEnv(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("env", "", stderr)
	th := threadsFlag(fs)
	probe := fs.Bool("probe", false, "measure every matrix-product backend again, print each one's GFLOP/s, and keep the fastest; then measure each number format's ceiling (fp32, fp32-packed, bf16, int8) on --threads workers")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("env takes no arguments, got %q", fs.Args())
	}
	return runEnv(ctx, envOptions{threads: *th, probe: *probe}, stdout)
}

func runEnv(_ context.Context, opts envOptions, w io.Writer) error {
	if opts.threads < 1 {
		return usagef("--threads %d must be at least 1", opts.threads)
	}
	kernels.SetThreads(opts.threads)
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
	if err := blas.LoadError(); err != nil {
		fmt.Fprintf(w, "           (not loaded: %v)\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
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
