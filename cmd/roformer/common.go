package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

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

// batchInvariant is --batch-invariant, which every verb that runs a model
// has (threadsFlag and computeFlags register it); setupCompute applies it.
var batchInvariant bool

// batchInvariantHelp is the help of --batch-invariant.
const batchInvariantHelp = "run the matrix products on go-asm, whose sums do not depend on the rows beside a row: a text's outputs are the same bits alone and in any batch, at any padded length and --threads (the default where the probe chose go-asm; roformer env says)"

// threadsFlag registers --threads and --batch-invariant on fs; apply them
// with setupCompute.
func threadsFlag(fs *flag.FlagSet) *int {
	fs.BoolVar(&batchInvariant, "batch-invariant", false, batchInvariantHelp)
	return fs.Int("threads", runtime.NumCPU(), threadsHelp)
}

// computeFlags registers --precision, --threads and --batch-invariant on
// fs, the flags of the verbs that run a model; apply them with
// setupCompute and openModel.
func computeFlags(fs *flag.FlagSet, precision *string, threads *int) {
	precisionFlag(fs, precision)
	fs.IntVar(threads, "threads", runtime.NumCPU(), threadsHelp)
	fs.BoolVar(&batchInvariant, "batch-invariant", false, batchInvariantHelp)
}

// setupCompute chooses the matrix-product backend (go-asm with
// --batch-invariant, else ROFORMER_BLAS or the probe's verdict), sets the
// thread count and says which backend is in use.
func setupCompute(threads int, stderr io.Writer, quiet bool) error {
	if threads < 1 {
		return usagef("--threads %d must be at least 1", threads)
	}
	if err := applyBLASEnv(); err != nil {
		return err
	}
	if batchInvariant {
		if err := blas.UseBatchInvariant(); err != nil {
			return fmt.Errorf("--batch-invariant: %w", err)
		}
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
		if v := os.Getenv("ROFORMER_BLAS"); v != "" {
			return fmt.Errorf("ROFORMER_BLAS=%s: %w", v, err)
		}
		return err
	}
	return nil
}

// precisionFlag registers --precision on fs.
func precisionFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "precision", "", "number format of the linear layers' products: fp32 (the weights packed once for the backend's products: go-asm's panels or oneDNN's matmul), bf16 (attention's products too; needs AVX512_BF16 or AMX) or int8 (dynamic quantization; needs oneDNN); default int8 for an int8 folder that roformer quantize wrote, else fp32")
}

// resolveModel replaces a --model value that names a Hugging Face model
// (org/name or org/name@revision) and is no folder with its snapshot folder
// in the Hugging Face cache (see hub.Resolve); a folder path, or an empty
// value, stays as it is. A file is a usage error that asks for its folder
// (checkModelPath).
func resolveModel(model *string) error {
	if *model == "" {
		return nil
	}
	if err := checkModelPath(*model); err != nil {
		return err
	}
	dir, err := hub.Resolve(*model)
	if err != nil {
		return err
	}
	*model = dir
	return nil
}

// modelFileExts are the endings of the files in a model folder (weights,
// configuration, vocabularies): a --model value ending in one names a file.
var modelFileExts = []string{".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".json", ".txt", ".h5", ".msgpack", ".onnx", ".gguf", ".model"}

// modelFileExt returns the ending of name among modelFileExts, or "".
func modelFileExt(name string) string {
	for _, e := range modelFileExts {
		if strings.HasSuffix(strings.ToLower(name), e) {
			return e
		}
	}
	return ""
}

// checkModelPath returns a usage error, asking for the folder that holds
// config.json, for a --model value that is a file (path/to/model.safetensors,
// also written with a trailing slash), or that does not exist, ends as a
// model file's name does (modelFileExts) and is no Hub id in the cache: such
// a value is a file meant, and hub.Resolve would take an org/name.ext for a
// Hub id and suggest downloading it. The error names the file's folder when
// that folder holds config.json or tokenizer files. An empty value, a
// folder, or anything else is nil (a missing folder fails where it is
// opened; a Hub id is resolved by resolveModel).
func checkModelPath(ref string) error {
	if ref == "" {
		return nil
	}
	const ask = "give the model folder, the one that holds config.json (or the tokenizer files)"
	clean := filepath.Clean(ref)
	hint := ""
	dir := filepath.Dir(clean)
	for _, f := range []string{"config.json", "tokenizer.json", "vocab.txt"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil && fi.Mode().IsRegular() {
			hint = ": --model " + dir
			break
		}
	}
	fi, err := os.Stat(clean)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		return usagef("--model %s is a file: %s%s", ref, ask, hint)
	}
	ext := modelFileExt(clean)
	if ext == "" {
		return nil
	}
	if _, _, ok := hub.ParseRef(ref); ok {
		if _, err := hub.Resolve(ref); err == nil {
			return nil // a Hub id in the cache, whatever its name
		}
	}
	return usagef("--model %s is no folder, and its name is a file's (%s): %s%s", ref, ext, ask, hint)
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
	if batchInvariant && p == roformer.PrecisionBF16 {
		return "", usagef("--batch-invariant runs fp32 and int8: bf16's products are oneDNN's matmul, which blocks the work by the number of rows")
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
