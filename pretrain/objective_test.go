package pretrain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// The causal objective: the loss falls and the folder is a
// RoFormerForCausalLM with is_decoder true.
func TestCausalPretrain(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir, 30)
	o.Objective = ObjectiveCausal
	var log bytes.Buffer
	if _, _, err := Start(context.Background(), o, &log, false); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if recs := readLosses(t, dir); len(recs) < 2 || !(recs[len(recs)-1] < recs[0]-0.3) {
		t.Errorf("training loss did not fall: %v", recs)
	}
	var cfg struct {
		Architectures []string `json:"architectures"`
		IsDecoder     bool     `json:"is_decoder"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Architectures, []string{"RoFormerForCausalLM"}) || !cfg.IsDecoder {
		t.Errorf("config.json: architectures %v, is_decoder %v", cfg.Architectures, cfg.IsDecoder)
	}
	l, err := roformer.Load(dir, roformer.HeadCausalLM, roformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.EncoderMask() != roformer.MaskCausal {
		t.Errorf("the causal model's mask is %s", l.EncoderMask())
	}
}

// The unilm objective on the corpus: rows cut in two at a word start, the
// target typed 1 and alone labelled, and the loss falls.
func TestUniLMPretrain(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir, 30)
	o.Objective = ObjectiveUniLM
	var log bytes.Buffer
	j, _, err := Start(context.Background(), o, &log, false)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if recs := readLosses(t, dir); len(recs) < 2 || !(recs[len(recs)-1] < recs[0]-0.3) {
		t.Errorf("training loss did not fall: %v", recs)
	}
	v := j.Loop.Vocab
	for i, s := range j.Loop.Train[:20] {
		seps := 0
		for k, id := range s {
			if int(id) == v.SEP {
				seps++
				if seps == 1 && k+1 < len(s) && v.IsContinuation(int(s[k+1])) {
					t.Errorf("row %d: the target starts inside a word", i)
				}
			}
		}
		if seps != 2 || int(s[0]) != v.CLS || int(s[len(s)-1]) != v.SEP {
			t.Fatalf("row %d is not [CLS] source [SEP] target [SEP]: %v", i, s)
		}
	}
	a := j.Loop.Model.(*lmModel)
	b := &data.Batch{InputIDs: []int32{2, 7, 3, 8, 9, 3, 0, 0}, Labels: []int32{-100, 4, -100, -100, -100, -100, -100, -100},
		AttentionMask: []int32{1, 1, 1, 1, 1, 1, 0, 0}, TokenTypeIDs: make([]int32, 8), B: 1, T: 8}
	a.sep = 3
	rb, labels := a.lmBatch(b)
	if rb.T != 6 || !slices.Equal(rb.InputIDs, []int32{2, 4, 3, 8, 9, 3}) || !slices.Equal(rb.TokenTypeIDs, []int32{0, 0, 0, 1, 1, 1}) ||
		!slices.Equal(labels, []int32{-100, -100, -100, 8, 9, 3}) {
		t.Errorf("lmBatch: ids %v types %v labels %v", rb.InputIDs, rb.TokenTypeIDs, labels)
	}
	a.objective = ObjectiveSim
	rb, labels = a.lmBatch(b)
	if rb.B != 2 || !slices.Equal(rb.InputIDs[6:], []int32{2, 8, 9, 3, 4, 3}) || !slices.Equal(labels[6:], []int32{-100, -100, -100, -100, 4, 3}) {
		t.Errorf("sim lmBatch: ids %v labels %v", rb.InputIDs, labels)
	}
}

// toyWords are the vocabulary of the toy paraphrase task.
var toyWords = strings.Fields(`red blue green black white big small old new fast slow hot cold happy sad
	cat dog bird fish horse cow lion bear wolf fox king queen boy girl man woman river hill tree stone
	house ship road field city star moon sun`)

// toyPairs returns n pairs of three distinct words and the same words in
// another order with "the" and "and": a paraphrase is the same bag of words.
func toyPairs(n int, seed uint64) [][2]string {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([][2]string, n)
	for i := range out {
		p := r.Perm(len(toyWords))[:3]
		w := func(k int) string { return toyWords[p[k]] }
		out[i] = [2]string{w(0) + " " + w(1) + " " + w(2), "the " + w(2) + " and " + w(0) + " " + w(1)}
	}
	return out
}

// toyInit writes a fresh masked-LM folder (two layers, hidden 32) with a
// word-level vocabulary of the toy task.
func toyInit(t *testing.T, dir string) {
	t.Helper()
	tokens := append([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "and"}, toyWords...)
	v, err := tokenizer.NewVocab(tokens)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(v, tokenizer.DefaultConfig(tokenizer.Bert))
	if err != nil {
		t.Fatal(err)
	}
	cfg := roformer.DefaultConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.EmbeddingSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = len(tokens), 32, 32, 2, 2, 64
	cfg.MaxPositionEmbeddings = 32
	m, err := roformer.New(cfg, roformer.HeadMaskedLM)
	if err != nil {
		t.Fatal(err)
	}
	m.Init(3)
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
}

func writePairs(t *testing.T, path string, pairs [][2]string) {
	t.Helper()
	var b bytes.Buffer
	for _, p := range pairs {
		line, _ := json.Marshal(map[string]string{"anchor": p[0], "positive": p[1]})
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func simOptions(t *testing.T, root string, steps int) Options {
	t.Helper()
	init, pairs := filepath.Join(root, "init"), filepath.Join(root, "pairs.jsonl")
	if _, err := os.Stat(init); err != nil {
		toyInit(t, init)
		writePairs(t, pairs, toyPairs(400, 1))
	}
	o := DefaultOptions(filepath.Join(root, "run"))
	o.Objective, o.Init, o.Pairs = ObjectiveSim, init, pairs
	o.Train.Steps, o.Train.BatchSize, o.Train.SeqLen, o.Train.Warmup, o.Train.LR = steps, 8, 16, 10, 3e-3
	o.Train.SaveEvery, o.Train.EvalEvery, o.Train.EvalBatches, o.Train.LogEvery, o.Train.Threads = 0, 0, 2, 50, 2
	return o
}

// The RoFormer-Sim recipe on the toy task: both losses fall on training
// pairs, the folder is a Sim model, and the pooler ranks the true
// paraphrase first among held-out ones far more often than chance, as
// roformer similar ranks its candidates.
func TestSimRecipe(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	o := simOptions(t, root, 300)
	j, err := start(o, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := j.Loop.Model.(*lmModel)
	probe, err := data.EvalBatches(j.Loop.Train[:16], j.Loop.Vocab, 16, o.Train.SeqLen, 1, 9, data.MaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lm0, sim0, err := a.losses(ctx, probe[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Loop.Run(ctx); err != nil {
		t.Fatal(err)
	}
	lm1, sim1, err := a.losses(ctx, probe[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generation loss %.3f → %.3f, similarity loss %.3f → %.3f (32 rows)", lm0, lm1, sim0, sim1)
	if !(lm1 < lm0-0.5) || !(sim1 < sim0-0.5) {
		t.Errorf("losses did not fall: generation %.3f → %.3f, similarity %.3f → %.3f", lm0, lm1, sim0, sim1)
	}
	l, err := roformer.Load(o.Train.OutDir, roformer.HeadCausalLM, roformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !l.IsSim() {
		t.Fatal("the output folder is not a RoFormer-Sim model (is_decoder with a pooler)")
	}
	tok, err := tokenizer.Load(o.Train.OutDir)
	if err != nil {
		t.Fatal(err)
	}
	held := toyPairs(24, 2)
	top1 := simTop1(t, l.Model, tok, held)
	t.Logf("held-out top-1: %d of %d (chance 1 in %d)", top1, len(held), len(held))
	if top1 < 8 {
		t.Errorf("the true paraphrase ranks first for %d of %d held-out anchors, want at least 8 (chance: 1)", top1, len(held))
	}
}

// simTop1 counts the held-out anchors whose own paraphrase has the highest
// pooler cosine among all the pairs' paraphrases.
func simTop1(t *testing.T, m *roformer.Model, tok *tokenizer.Tokenizer, pairs [][2]string) int {
	t.Helper()
	var inputs []tokenizer.Input
	for _, p := range pairs {
		inputs = append(inputs, tokenizer.Input{Text: p[0]})
	}
	for _, p := range pairs {
		inputs = append(inputs, tokenizer.Input{Text: p[1]})
	}
	encs, err := tok.EncodeBatch(inputs, tokenizer.EncodeOptions{Padding: tokenizer.PadLongest})
	if err != nil {
		t.Fatal(err)
	}
	b := &roformer.Batch{B: len(encs), T: encs[0].Len()}
	for _, e := range encs {
		for k := range e.IDs {
			b.InputIDs = append(b.InputIDs, int32(e.IDs[k]))
			b.TokenTypeIDs = append(b.TokenTypeIDs, int32(e.TypeIDs[k]))
			b.AttentionMask = append(b.AttentionMask, int32(e.AttentionMask[k]))
		}
	}
	out, err := m.Forward(context.Background(), b, nil, roformer.Options{SkipHead: true})
	if err != nil {
		t.Fatal(err)
	}
	z, H, n := out.PoolerOutput.Data, m.Config.HiddenSize, len(pairs)
	top1 := 0
	for i := range n {
		best, bestJ := -2.0, -1
		for j := range n {
			if c := kernels.Cosine(z[i*H:i*H+H], z[(n+j)*H:(n+j)*H+H]); c > best {
				best, bestJ = c, j
			}
		}
		if bestJ == i {
			top1++
		}
	}
	return top1
}

// countingModel cancels ctx at its cancelAt-th training call.
type countingModel struct {
	Model
	calls, cancelAt int
	cancel          context.CancelFunc
}

func (c *countingModel) ForwardBackward(ctx context.Context, b *data.Batch) (float64, error) {
	c.calls++
	if c.calls == c.cancelAt {
		c.cancel()
	}
	return c.Model.ForwardBackward(ctx, b)
}

// A sim run interrupted and resumed (from pretrain.json, not from Init)
// ends with the bytes of a straight run.
func TestSimResumeIsExact(t *testing.T) {
	root := t.TempDir()
	straight := simOptions(t, root, 12)
	if _, _, err := Start(context.Background(), straight, nil, false); err != nil {
		t.Fatal(err)
	}
	o := simOptions(t, root, 12)
	o.Train.OutDir = filepath.Join(root, "resumed")
	j, err := start(o, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.Loop.Model = &countingModel{Model: j.Loop.Model, cancelAt: 6, cancel: cancel}
	if _, err := j.Loop.Run(ctx); err == nil {
		t.Fatal("the interrupted run did not stop")
	}
	cancel()
	if err := os.RemoveAll(o.Init); err != nil { // the resume reads pretrain.json's configuration
		t.Fatal(err)
	}
	if _, _, err := Resume(context.Background(), o.Train.OutDir, 0, 2, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"model.safetensors", "config.json", filepath.Join(checkpointName(12), OptimizerFile)} {
		if !bytes.Equal(mustReadFile(t, filepath.Join(straight.Train.OutDir, f)), mustReadFile(t, filepath.Join(o.Train.OutDir, f))) {
			t.Errorf("%s differs between the straight and the resumed run", f)
		}
	}
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(fmt.Errorf("reading %s: %w", p, err))
	}
	return b
}

// The sim objective's whole step (masked loader batch read back, pairs
// doubled, UniLM loss plus similarity loss through the pooler, dropout)
// against finite differences on slices of the pooler, the word embeddings
// and a layer's query weight.
func TestSimStepGradCheck(t *testing.T) {
	ctx := context.Background()
	o := simOptions(t, t.TempDir(), 1)
	o.SimScale = 5 // a gentler softmax keeps the differences within float32's reach
	j, err := Prepare(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := j.Loop.Model.(*lmModel)
	bs, err := data.EvalBatches(j.Loop.Train[:3], j.Loop.Vocab, 3, o.Train.SeqLen, 1, 4, data.MaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := bs[0]
	b.Seed = 11
	loss := func() float64 {
		l, err := a.ForwardBackward(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	m := j.Model
	m.ZeroGrad()
	loss()
	grads := map[string][]float32{} // before the finite differences, which accumulate more
	for _, p := range m.Params() {
		grads[p.Name] = append([]float32(nil), p.Grad...)
	}
	check := map[string]bool{"roformer.pooler.dense.weight": true, "roformer.embeddings.word_embeddings.weight": true,
		"roformer.encoder.layer.0.attention.self.query.weight": true}
	n := 0
	for _, p := range m.Params() {
		if !check[p.Name] {
			continue
		}
		n++
		k := min(len(p.Data), 96)
		off := 0
		if strings.Contains(p.Name, "word_embeddings") {
			off = 7 * m.Config.HiddenSize // the rows of real tokens
		}
		testutil.GradCheck(t, p.Name, p.Data[off:off+k], grads[p.Name][off:off+k], loss, 1e-2, 3e-2)
	}
	if n != len(check) {
		t.Fatalf("checked %d of %d parameters", n, len(check))
	}
}
