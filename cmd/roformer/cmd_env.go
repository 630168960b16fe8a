package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/kernels"
)

func init() {
	register(&command{name: "env", summary: "print the version, the BLAS in use and the thread count", run: cmdEnv})
}

type envOptions struct{ threads int }

func cmdEnv(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("env", "", stderr)
	th := threadsFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("env takes no arguments, got %q", fs.Args())
	}
	return runEnv(ctx, envOptions{threads: *th}, stdout)
}

func runEnv(_ context.Context, opts envOptions, w io.Writer) error {
	if opts.threads < 1 {
		return usagef("--threads %d must be at least 1", opts.threads)
	}
	kernels.SetThreads(opts.threads)
	if err := applyBLASEnv(); err != nil {
		return err
	}
	fmt.Fprintf(w, "roformer   %s\n", versionString())
	fmt.Fprintf(w, "go         %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "cpus       %d\n", runtime.NumCPU())
	fmt.Fprintf(w, "threads    %d (Go workers; BLAS single-threaded inside each)\n", kernels.Threads())
	fmt.Fprintf(w, "blas       %s\n", blas.Name())
	fmt.Fprintf(w, "vector     %s (element-wise kernels: exp, GELU, LayerNorm, RoPE, AdamW)\n", kernels.VectorPath())
	if err := blas.LoadError(); err != nil {
		fmt.Fprintf(w, "           (OpenBLAS not loaded: %v)\n", err)
	}
	return nil
}
