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
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
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

// threadsHelp is the help of --threads.
const threadsHelp = "worker goroutines for the math (BLAS itself stays single-threaded)"

// threadsFlag registers --threads on fs; apply it with setupCompute.
func threadsFlag(fs *flag.FlagSet) *int {
	return fs.Int("threads", runtime.NumCPU(), threadsHelp)
}

// computeFlags registers --precision and --threads on fs, the flags of the
// verbs that run a model; apply them with setupCompute and openModel.
func computeFlags(fs *flag.FlagSet, precision *string, threads *int) {
	precisionFlag(fs, precision)
	fs.IntVar(threads, "threads", runtime.NumCPU(), threadsHelp)
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
// value, stays as it is. A file is a usage error that asks for its folder.
func resolveModel(model *string) error {
	if *model == "" {
		return nil
	}
	if fi, err := os.Stat(*model); err == nil && !fi.IsDir() {
		return usagef("--model %s is a file: give the model folder, the one that holds config.json (or the tokenizer files)", *model)
	}
	dir, err := hub.Resolve(*model)
	if err != nil {
		return err
	}
	*model = dir
	return nil
}

// openModel resolves a --model value (resolveModel), parses --precision
// and opens the folder with pipeline.Open; *model is left the folder's path.
func openModel(model *string, precision string, opts pipeline.OpenOptions) (*pipeline.Model, error) {
	if err := resolveModel(model); err != nil {
		return nil, err
	}
	prec, err := parsePrecision(precision)
	if err != nil {
		return nil, err
	}
	opts.Precision = prec
	return pipeline.Open(*model, opts)
}

// parsePrecision parses a --precision value; a bad one is a usage error.
func parsePrecision(s string) (roformer.Precision, error) {
	p, err := roformer.ParsePrecision(s)
	if err != nil {
		return "", usagef("--precision: %v", err)
	}
	return p, nil
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
