package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/hub"
	"github.com/roformer-go/roformer/kernels"
)

// version is the toolkit's version; the VCS revision is appended when the
// binary was built from a checkout.
const version = "0.1.0-dev"

func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v
}

// threadsFlag registers --threads on fs; apply it with setupCompute.
func threadsFlag(fs *flag.FlagSet) *int {
	return fs.Int("threads", runtime.NumCPU(), "worker goroutines for the math (BLAS itself stays single-threaded)")
}

// setupCompute chooses the matrix-product backend (ROFORMER_BLAS or the
// probe's verdict), sets the thread count and says which backend is in use.
func setupCompute(threads int, stderr io.Writer, quiet bool) error {
	if threads < 1 {
		return usagef("--threads %d must be at least 1", threads)
	}
	if err := applyBLASEnv(); err != nil {
		return err
	}
	kernels.SetThreads(threads)
	if !quiet {
		fmt.Fprintf(stderr, "roformer: matrix products via %s; %d threads\n", blas.Name(), threads)
	}
	return nil
}

// applyBLASEnv chooses the matrix-product backend (ROFORMER_BLAS, or the
// cached measurement; see blas.Init) and returns the error of an explicit
// choice that cannot be loaded.
func applyBLASEnv() error {
	if err := blas.Init(); err != nil {
		return fmt.Errorf("ROFORMER_BLAS=%s: %w", os.Getenv("ROFORMER_BLAS"), err)
	}
	return nil
}

// precisionFlag registers --precision on fs.
func precisionFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "precision", "fp32", "number format of the linear layers' products: fp32 (on oneDNN with the weights repacked once for its matmul), bf16 (needs AVX512_BF16 or AMX) or int8 (dynamic quantization; needs oneDNN)")
}

// resolveModel replaces a --model value that names a Hugging Face model
// (org/name or org/name@revision) and is no folder with its snapshot folder
// in the Hugging Face cache (see hub.Resolve); a folder path, or an empty
// value, stays as it is.
func resolveModel(model *string) error {
	if *model == "" {
		return nil
	}
	dir, err := hub.Resolve(*model)
	if err != nil {
		return err
	}
	*model = dir
	return nil
}

// loadResolved resolves a --model value as resolveModel does and loads the
// folder with load.
func loadResolved[T any](model string, load func(dir string) (T, error)) (T, error) {
	if err := resolveModel(&model); err != nil {
		var zero T
		return zero, err
	}
	return load(model)
}
