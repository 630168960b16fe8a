package pipeline

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/internal/saving"
	"github.com/roformer-go/roformer/model/roformer"
)

// QuantizeResult is what Quantize wrote.
type QuantizeResult struct {
	// Dir is the folder written; Transformer the folder in it that holds
	// the quantized config.json and model.safetensors (Dir, or the
	// sentence-transformers transformer module's folder).
	Dir, Transformer string
	// WeightBytes and QuantizedBytes are the sizes of the weight files
	// read (every shard of a sharded checkpoint) and of the
	// model.safetensors written.
	WeightBytes, QuantizedBytes int64
	// Paths relative to Dir: Read are the weight files read (replaced by
	// the model.safetensors written), Copied the other files of the
	// source folder, copied as they are (tokenizer files,
	// sentence-transformers modules), and Left the files left out: the
	// transformer's weights in other formats (pytorch_model.bin beside
	// model.safetensors, tf_model.h5, onnx/ …), which would hold the
	// float32 values the folder no longer has.
	Read, Copied, Left []string
}

// maxQuantizeDepth bounds the folders Quantize descends into below the
// source folder (a sentence-transformers folder is two deep; a link loop
// would be endless).
const maxQuantizeDepth = 6

// Quantize writes the model folder src into the new folder dst with the
// transformer's weights quantized in p, roformer.PrecisionInt8 or
// roformer.PrecisionBF16 (see Model.SaveQuantized for the formats), so
// that Open, `roformer serve` and the other commands load them as they
// are: an int8 folder runs in int8 without a float32 copy of its weights
// ever being made, in a quarter of the float32 folder's bytes.
//
// The weights are read with Open (the folder's head, float32), whatever
// their stored format; every other regular file of src (tokenizer files,
// a sentence-transformers folder's modules and their weights) is copied
// as it is, links followed. The transformer's weight files in other
// formats are left out. dst must not exist or be empty; it is written
// in a stage beside it and appears whole or not at all.
func Quantize(src, dst string, p roformer.Precision) (*QuantizeResult, error) {
	if p != roformer.PrecisionInt8 && p != roformer.PrecisionBF16 {
		return nil, fmt.Errorf("pipeline: Quantize: precision %q: want %s or %s", p, roformer.PrecisionInt8, roformer.PrecisionBF16)
	}
	if err := checkNewFolder(dst); err != nil {
		return nil, err
	}
	m, err := Open(src, OpenOptions{NoTokenizer: true})
	if err != nil {
		return nil, err
	}
	rel := ""
	if m.Sentence != nil {
		rel = m.Sentence.TransformerPath
	}
	res := &QuantizeResult{Dir: dst, Transformer: filepath.Join(dst, rel)}
	end := saving.Begin()
	defer end()
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dst)), 0o755); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	st, err := atomicfile.NewStage(dst)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	defer st.Discard()
	if err := copyFolder(src, st.Dir, "", filepath.Clean(rel), readFiles(m.Checkpoint), 0, res); err != nil {
		return nil, err
	}
	if err := m.Model.SaveQuantized(filepath.Join(st.Dir, rel), p); err != nil {
		return nil, err
	}
	fi, err := os.Stat(filepath.Join(st.Dir, rel, "model.safetensors"))
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	res.QuantizedBytes = fi.Size()
	if err := st.Publish(); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	sort.Strings(res.Read)
	sort.Strings(res.Copied)
	sort.Strings(res.Left)
	return res, nil
}

// checkNewFolder returns nil when dir does not exist or is an empty
// folder, and an error naming it otherwise: Quantize never writes over a
// model.
func checkNewFolder(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("pipeline: %s exists and is no folder; give a new folder", dir)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if len(names) > 0 {
		return fmt.Errorf("pipeline: %s holds %d entries (%s, …); give a new or empty folder", dir, len(names), names[0].Name())
	}
	return nil
}

// weightFile reports whether name, in the transformer's folder, is its
// weights in some format (or their index), or another export of them.
func weightFile(name string, dir bool) bool {
	if dir {
		return name == "onnx" || name == "openvino"
	}
	n := strings.ToLower(name)
	for _, e := range []string{".safetensors", ".safetensors.index.json", ".bin", ".bin.index.json", ".h5", ".msgpack", ".onnx", ".pt", ".pth", ".ckpt", ".gguf"} {
		if strings.HasSuffix(n, e) {
			return true
		}
	}
	return false
}

// readFiles reports whether a file of the transformer's folder is the
// checkpoint the loader read (roformer.Loaded.Checkpoint) or one of its
// shards: model.safetensors, or model-00001-of-00002.safetensors … beside
// model.safetensors.index.json.
func readFiles(checkpoint string) func(name string) bool {
	base := filepath.Base(checkpoint)
	index, sharded := strings.CutSuffix(base, ".index.json")
	ext := filepath.Ext(index)
	stem := strings.TrimSuffix(index, ext)
	return func(name string) bool {
		if name == base {
			return true
		}
		return sharded && strings.HasPrefix(name, stem+"-") && strings.HasSuffix(name, ext)
	}
}

// copyFolder copies the regular files under src/rel into dst/rel, but for
// the transformer folder's config.json and weights (written by
// SaveQuantized) and hidden entries (.git, .cache), following links to
// files and folders to maxQuantizeDepth.
func copyFolder(src, dst, rel, transformer string, read func(name string) bool, depth int, res *QuantizeResult) error {
	if depth > maxQuantizeDepth {
		return fmt.Errorf("pipeline: %s: folders nested deeper than %d", filepath.Join(src, rel), maxQuantizeDepth)
	}
	entries, err := os.ReadDir(filepath.Join(src, rel))
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	inTransformer := filepath.Clean(rel) == transformer
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		r := filepath.Join(rel, name)
		fi, err := os.Stat(filepath.Join(src, r)) // follows links: a Hub snapshot's files are links to its blobs
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		switch {
		case inTransformer && (name == "config.json" || weightFile(name, fi.IsDir())):
			if name != "config.json" {
				if !fi.IsDir() && read(name) {
					res.Read = append(res.Read, r)
					res.WeightBytes += fi.Size()
				} else {
					res.Left = append(res.Left, r)
				}
			}
		case fi.IsDir():
			if err := os.Mkdir(filepath.Join(dst, r), 0o755); err != nil {
				return fmt.Errorf("pipeline: %w", err)
			}
			if err := copyFolder(src, dst, r, transformer, read, depth+1, res); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := copyFile(filepath.Join(dst, r), filepath.Join(src, r)); err != nil {
				return err
			}
			res.Copied = append(res.Copied, r)
		default:
			res.Left = append(res.Left, r) // a FIFO, a device: nothing a model folder holds
		}
	}
	return nil
}

// copyFile copies the regular file src into the new file dst.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("pipeline: copying %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("pipeline: copying %s: %w", src, err)
	}
	return nil
}
