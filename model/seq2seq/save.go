package seq2seq

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/internal/atomicfile"
)

// Save writes dir/config.json and dir/model.safetensors (F32, every
// parameter under its name; the output projection is the embedding, stored
// once), each atomically; dir is created if needed.
func (m *Model) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("seq2seq: %w", err)
	}
	cfg, err := json.MarshalIndent(m.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("seq2seq: encoding config.json: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "config.json"), append(cfg, '\n')); err != nil {
		return fmt.Errorf("seq2seq: %w", err)
	}
	var entries []*checkpoint.Entry
	for _, p := range m.params {
		entries = append(entries, &checkpoint.Entry{Name: p.Name, DType: "F32", Shape: p.Shape, Data: p.Data})
	}
	return checkpoint.WriteSafetensors(filepath.Join(dir, "model.safetensors"), entries, map[string]string{"format": "seq2seq"})
}

// Load reads a folder written by Save. Every missing, unexpected and
// mis-shaped tensor is reported in one error.
func Load(dir string) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "model.safetensors")
	f, err := checkpoint.ReadSafetensors(path)
	if err != nil {
		return nil, fmt.Errorf("seq2seq: %w", err)
	}
	// Compare config.json with the weights before allocating a model of
	// its size: one that needs more than twice the values the checkpoint
	// holds (plus 2²⁰) is refused here; smaller differences are left to
	// the report of every mismatched tensor below.
	stored := int64(0)
	for _, e := range f.Tensors {
		stored += int64(len(e.Data))
	}
	if e, ok := f.Tensors["embed_tokens.weight"]; ok && !slices.Equal(e.Shape, []int{cfg.VocabSize, cfg.DModel}) {
		return nil, fmt.Errorf("seq2seq: %s does not match %s: embed_tokens.weight has shape %v, but vocab_size %d and d_model %d need [%d %d]",
			path, filepath.Join(dir, "config.json"), e.Shape, cfg.VocabSize, cfg.DModel, cfg.VocabSize, cfg.DModel)
	}
	if n := cfg.NumParamsFor(); n > 2*stored+1<<20 {
		return nil, fmt.Errorf("seq2seq: %s does not match %s: vocab_size %d, d_model %d, ffn_size %d, encoder_layers %d and decoder_layers %d imply %d parameters, but the checkpoint holds %d values",
			path, filepath.Join(dir, "config.json"), cfg.VocabSize, cfg.DModel, cfg.FFN, cfg.EncoderLayers, cfg.DecoderLayers, n, stored)
	}
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	var problems []string
	want := map[string]bool{}
	for _, p := range m.params {
		want[p.Name] = true
		e, ok := f.Tensors[p.Name]
		switch {
		case !ok:
			problems = append(problems, "missing "+p.Name)
		case !slices.Equal(e.Shape, p.Shape):
			problems = append(problems, fmt.Sprintf("%s has shape %v, want %v", p.Name, e.Shape, p.Shape))
		default:
			copy(p.Data, e.Data)
		}
	}
	for _, n := range f.Names {
		if !want[n] {
			problems = append(problems, "unexpected "+n)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("seq2seq: %s does not match config.json: %s", path, strings.Join(problems, "; "))
	}
	return m, nil
}

// Average returns a model whose every weight is the mean of the models'
// (Vaswani et al. §6.1: the base models average the last 5 checkpoints).
// The models must share one Config.
func Average(models ...*Model) (*Model, error) {
	if len(models) == 0 {
		return nil, fmt.Errorf("seq2seq: nothing to average")
	}
	for i, m := range models[1:] {
		if m.Config != models[0].Config {
			return nil, fmt.Errorf("seq2seq: model %d's config differs from model 0's", i+1)
		}
	}
	avg, _ := New(models[0].Config)
	inv := 1 / float64(len(models))
	for j, p := range avg.params {
		for i := range p.Data {
			s := 0.0
			for _, m := range models {
				s += float64(m.params[j].Data[i])
			}
			p.Data[i] = float32(s * inv)
		}
	}
	return avg, nil
}
