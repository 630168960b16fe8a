package sentence

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/internal/atomicfile"
)

// WrittenVersion is the sentence-transformers version Save writes in
// config_sentence_transformers.json: the files are those that version
// writes (and later ones read).
const WrittenVersion = "2.7.0"

// Save writes f's files into dir, beside a transformer folder the caller
// writes there (config.json, the weights, the tokenizer): modules.json
// (Transformer at "", Pooling at 1_Pooling, then each step at
// N_Dense or N_Normalize), the Pooling's config.json, each Dense
// module's config.json and pytorch_model.bin (linear.weight, linear.bias;
// sentence-transformers 2.x reads a Dense module's weights only from that
// file, a torch.save archive written by checkpoint.WritePyTorch; a stale
// model.safetensors there is removed),
// sentence_bert_config.json and config_sentence_transformers.json. The
// modules are numbered anew; f.Modules and f.TransformerPath are not used.
// Each file is written atomically.
func (f *Folder) Save(dir string) error {
	mods := []Module{{Idx: 0, Name: "0", Path: "", Type: TypeTransformer}, {Idx: 1, Name: "1", Path: "1_Pooling", Type: TypePooling}}
	for i, s := range f.Steps {
		idx := i + 2
		m := Module{Idx: idx, Name: strconv.Itoa(idx), Path: fmt.Sprintf("%d_Dense", idx), Type: TypeDense}
		if s.IsNormalize() {
			m.Path, m.Type = fmt.Sprintf("%d_Normalize", idx), TypeNormalize
		} else if err := s.Dense.Check(); err != nil {
			return fmt.Errorf("sentence: Save: Dense module %d: %v", idx, err)
		}
		mods = append(mods, m)
	}
	if err := writeJSON(filepath.Join(dir, "modules.json"), mods); err != nil {
		return err
	}
	p := f.Pooling
	pc := poolingConfig{Dim: p.Dim, CLS: p.CLS, Mean: p.Mean, Max: p.Max, MeanSqrtLen: p.MeanSqrtLen,
		WeightedMean: p.WeightedMean, LastToken: p.LastToken}
	if !p.IncludePrompt {
		pc.IncludePrompt = new(bool)
	}
	if err := writeJSON(filepath.Join(dir, "1_Pooling", "config.json"), pc); err != nil {
		return err
	}
	for i, s := range f.Steps {
		sub := filepath.Join(dir, mods[i+2].Path)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return fmt.Errorf("sentence: Save: %w", err)
		}
		if s.IsNormalize() {
			continue
		}
		d := s.Dense
		bias := d.Bias != nil
		if err := writeJSON(filepath.Join(sub, "config.json"), denseConfig{In: d.In, Out: d.Out, Bias: &bias, Activation: d.Activation}); err != nil {
			return err
		}
		entries := []*checkpoint.Entry{{Name: "linear.weight", DType: "F32", Shape: []int{d.Out, d.In}, Data: d.Weight}}
		if bias {
			entries = append(entries, &checkpoint.Entry{Name: "linear.bias", DType: "F32", Shape: []int{d.Out}, Data: d.Bias})
		}
		if err := checkpoint.WritePyTorch(filepath.Join(sub, "pytorch_model.bin"), entries); err != nil {
			return fmt.Errorf("sentence: Save: %w", err)
		}
		// A model.safetensors left by an earlier Save would shadow the new
		// weights (Load and sentence-transformers 3.x prefer it).
		if err := os.Remove(filepath.Join(sub, "model.safetensors")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sentence: Save: %w", err)
		}
	}
	bc := bertConfig{DoLowerCase: f.DoLowerCase}
	if f.MaxSeqLength > 0 {
		bc.MaxSeqLength = &f.MaxSeqLength
	}
	if err := writeJSON(filepath.Join(dir, "sentence_bert_config.json"), bc); err != nil {
		return err
	}
	sc := stConfig{Version: map[string]string{"sentence_transformers": WrittenVersion}, Prompts: f.Prompts}
	if sc.Prompts == nil {
		sc.Prompts = map[string]string{}
	}
	if f.DefaultPromptName != "" { // none is left out: sentence-transformers takes "" for a name
		if _, ok := f.Prompts[f.DefaultPromptName]; !ok {
			return fmt.Errorf("sentence: Save: default prompt %q is not among the prompts", f.DefaultPromptName)
		}
		sc.DefaultPromptName = &f.DefaultPromptName
	}
	if f.SimilarityFn != "" {
		sc.SimilarityFn = &f.SimilarityFn
	}
	return writeJSON(filepath.Join(dir, "config_sentence_transformers.json"), sc)
}

// writeJSON writes v indented to path atomically, creating its folder.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("sentence: Save: %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("sentence: Save: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n')); err != nil {
		return fmt.Errorf("sentence: Save: %w", err)
	}
	return nil
}
