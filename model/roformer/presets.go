package roformer

import (
	"fmt"
	"sort"
	"strings"
)

// presets are the named model sizes of the CLI (--size). small and base
// have the shapes of junnyu/roformer_chinese_small and _base; tiny is for
// quick runs on a laptop.
var presets = map[string]struct{ layers, hidden, heads, inter int }{
	"tiny":  {4, 256, 4, 1024},
	"small": {6, 384, 6, 1536},
	"base":  {12, 768, 12, 3072},
}

// Presets returns the names of the model sizes, smallest first.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return presets[names[i]].hidden < presets[names[j]].hidden })
	return names
}

// Preset returns the configuration of a named size for a vocabulary of
// vocabSize ids: gelu, max_position_embeddings 512, the other keys at
// RoFormerConfig's defaults.
func Preset(name string, vocabSize int) (Config, error) {
	p, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("roformer: unknown size %q (valid: %s)", name, strings.Join(Presets(), ", "))
	}
	c := DefaultConfig()
	c.VocabSize = vocabSize
	c.NumHiddenLayers, c.HiddenSize, c.EmbeddingSize, c.NumAttentionHeads, c.IntermediateSize = p.layers, p.hidden, p.hidden, p.heads, p.inter
	c.MaxPositionEmbeddings = 512
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("roformer: size %s: %w", name, err)
	}
	return c, nil
}
