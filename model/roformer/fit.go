package roformer

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/tensor"
)

// CheckShapes compares the sizes of c with the tensors of a checkpoint
// (name → shape, as checkpoint.File holds them) before a model is
// allocated, so that a config.json whose sizes disagree with the weights is
// refused without first allocating a model of the config's size. Load calls
// it; so should anything that calls New for a checkpoint it has read.
//
// It checks, in this order:
//   - the shapes of the word, token-type and learned position embeddings,
//     the embedding projection, the pooler, the first and last layers'
//     attention and feed-forward weights, and the head's weights, where the
//     checkpoint holds them (with or without the "roformer." prefix);
//   - that the checkpoint's layers reach layer num_hidden_layers − 1;
//   - that the encoder's parameters (Config.ParamCount) are no more than
//     twice the values the checkpoint holds plus 2²⁰ (every encoder tensor
//     must come from it; a smaller excess is left to Bind, which names each
//     missing tensor), and the head's no more either (a head the checkpoint
//     lacks is initialised, and a real head is far smaller than its
//     encoder).
//
// The errors name the tensor, the shape found, and the config.json keys and
// values that imply another. Tensors the checkpoint lacks are left to Bind,
// which reports them all.
func (c *Config) CheckShapes(head Head, shapes map[string][]int) error {
	var stored counter
	for n, s := range shapes {
		if stored.add(s...); stored.err != nil {
			return fmt.Errorf("tensor %s %v: %w", n, s, stored.err)
		}
	}

	E, H, I, V, L := c.EmbeddingSize, c.HiddenSize, c.IntermediateSize, c.VocabSize, c.NumHiddenLayers
	wants := []want{
		{"roformer.embeddings.word_embeddings.weight", []int{V, E}, kv("vocab_size", V, "embedding_size", E)},
		{"roformer.embeddings.token_type_embeddings.weight", []int{c.TypeVocabSize, E}, kv("type_vocab_size", c.TypeVocabSize, "embedding_size", E)},
		{"roformer.pooler.dense.weight", []int{H, H}, kv("hidden_size", H)},
	}
	if c.PosEnc() == PosLearned {
		wants = append(wants, want{"roformer.embeddings.position_embeddings.weight", []int{c.MaxPositionEmbeddings, E}, kv("max_position_embeddings", c.MaxPositionEmbeddings, "embedding_size", E)})
	}
	if E != H {
		wants = append(wants, want{"roformer.embeddings_project.weight", []int{H, E}, kv("hidden_size", H, "embedding_size", E)})
	}
	for _, l := range []int{0, L - 1} {
		p := "roformer.encoder.layer." + strconv.Itoa(l) + "."
		for _, n := range []string{"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"} {
			wants = append(wants, want{p + n + ".weight", []int{H, H}, kv("hidden_size", H)})
		}
		wants = append(wants,
			want{p + "intermediate.dense.weight", []int{I, H}, kv("intermediate_size", I, "hidden_size", H)},
			want{p + "output.dense.weight", []int{H, I}, kv("hidden_size", H, "intermediate_size", I)})
	}
	wants = append(wants, c.headWants(head)...)
	for _, w := range wants {
		name, s, ok := w.name, shapes[w.name], false
		if _, ok = shapes[name]; !ok && strings.HasPrefix(name, "roformer.") {
			name = strings.TrimPrefix(name, "roformer.")
			s, ok = shapes[name]
		}
		if ok && !tensor.SameShape(s, w.shape) {
			return fmt.Errorf("tensor %s has shape %v, but %s need %v", name, s, w.keys, w.shape)
		}
	}

	// The layers: the highest index the checkpoint holds.
	last := -1
	for n := range shapes {
		rest, ok := strings.CutPrefix(strings.TrimPrefix(n, "roformer."), "encoder.layer.")
		if !ok {
			continue
		}
		idx, _, _ := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(idx); err == nil && i > last {
			last = i
		}
	}
	if last >= 0 && last < L-1 {
		return fmt.Errorf("num_hidden_layers %d, but the checkpoint's layers end at encoder.layer.%d", L, last)
	}

	_, hd, err := c.ParamCount(head)
	if err != nil {
		return err
	}
	// The encoder's values as New allocates them: its parameters and its
	// buffers (the performer's random directions, layers × features × head
	// size, which no checkpoint stores but the config sizes).
	enc, err := c.encoderParams(true)
	if err != nil {
		return err
	}
	// Twice the stored values plus 2²⁰ (4 MiB as float32): a config that
	// needs more cannot fit; one that needs a little more is left to Bind,
	// which names every missing tensor.
	slack := int64(math.MaxInt64)
	if stored.n < math.MaxInt64/4 {
		slack = 2*stored.n + 1<<20
	}
	if enc > slack {
		return fmt.Errorf("%s imply %d encoder parameters (%d MB as float32), but the checkpoint holds only %d values in %d tensors (the most a config may imply is twice that plus 2²⁰)",
			c.sizeWords(), enc, enc*4>>20, stored.n, len(shapes))
	}
	if hd > slack {
		return fmt.Errorf("the %s head needs %d parameters (num_labels %d, hidden_size %d, vocab_size %d), more than twice the checkpoint's %d values plus 2²⁰",
			head, hd, c.NumLabels, c.HiddenSize, c.VocabSize, stored.n)
	}
	return nil
}

// want is a tensor shape that config.json implies, with the keys behind it.
type want struct {
	name  string
	shape []int
	keys  string // the config.json keys and values behind shape
}

// kv formats key, value pairs as "k1 v1, k2 v2".
func kv(pairs ...any) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %v", pairs[i], pairs[i+1])
	}
	return b.String()
}

// headWants lists the head's weight shapes that CheckShapes compares.
func (c *Config) headWants(head Head) []want {
	E, H, V, NL := c.EmbeddingSize, c.HiddenSize, c.VocabSize, c.NumLabels
	switch head {
	case HeadMaskedLM, HeadCausalLM:
		if !c.RMSNorm() {
			return []want{
				{"cls.predictions.transform.dense.weight", []int{E, H}, kv("embedding_size", E, "hidden_size", H)},
				{"cls.predictions.bias", []int{V}, kv("vocab_size", V)}}
		}
	case HeadSequenceCls:
		return []want{
			{"classifier.dense.weight", []int{H, H}, kv("hidden_size", H)},
			{"classifier.out_proj.weight", []int{NL, H}, kv("num_labels", NL, "hidden_size", H)}}
	case HeadTokenCls:
		return []want{{"classifier.weight", []int{NL, H}, kv("num_labels", NL, "hidden_size", H)}}
	case HeadQA:
		return []want{{"qa_outputs.weight", []int{2, H}, kv("hidden_size", H)}}
	case HeadMultipleChoice:
		return []want{{"classifier.weight", []int{1, H}, kv("hidden_size", H)}}
	}
	return nil
}
