package pretrain

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// testOptions is a run small enough for CI: a 1-layer model on a slice of
// Newton's Opticks (shipped with every Go installation).
func testOptions(t testing.TB, dir string, steps int) Options {
	t.Helper()
	src := filepath.Join(runtime.GOROOT(), "src", "testdata", "Isaac.Newton-Opticks.txt")
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Skipf("no corpus: %v", err)
	}
	// The corpus goes into the run folder's parent, not t.TempDir(): the
	// child process of the kill test is killed before it could clean up.
	corpusFile := filepath.Join(filepath.Dir(dir), filepath.Base(dir)+"-opticks.txt")
	if err := os.WriteFile(corpusFile, raw[:120000], 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := roformer.DefaultConfig()
	cfg.HiddenSize, cfg.EmbeddingSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 32, 32, 1, 2, 64
	cfg.MaxPositionEmbeddings = 64
	o := DefaultOptions(dir)
	o.Corpus, o.VocabSize, o.Model = corpusFile, 600, &cfg
	o.Train.Steps, o.Train.BatchSize, o.Train.SeqLen, o.Train.Warmup, o.Train.LR = steps, 8, 32, 2, 3e-3
	o.Train.SaveEvery, o.Train.EvalEvery, o.Train.EvalBatches, o.Train.LogEvery = 5, 10, 2, 5
	o.Train.Threads = 2
	return o
}

func TestPretrainLossFalls(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	_, res, err := Start(context.Background(), testOptions(t, dir, 40), &log, false)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	recs := readLosses(t, dir)
	if len(recs) < 2 || !(recs[len(recs)-1] < recs[0]-0.3) {
		t.Errorf("training loss did not fall: %v", recs)
	}
	for _, f := range []string{"config.json", "model.safetensors", "vocab.txt", "metrics.jsonl", "loss.png", RunFile, "tokenizer/vocab.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run folder lacks %s", f)
		}
	}
	// The final folder loads as an HF masked-LM model.
	if _, err := roformer.Load(dir, roformer.HeadMaskedLM, roformer.LoadOptions{}); err != nil {
		t.Errorf("final model does not load: %v", err)
	}
	t.Logf("step %d, loss %.3f, eval loss %.3f", res.Step, res.Loss, res.EvalLoss)
}

func readLosses(t *testing.T, dir string) []float64 {
	raw, err := os.ReadFile(filepath.Join(dir, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var r Record
		if err := jsonUnmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if r.Loss != nil {
			out = append(out, *r.Loss)
		}
	}
	return out
}

const childEnv = "ROFORMER_PRETRAIN_CHILD_DIR"

// TestHelperPretrainChild is the process that TestKillResumeIdentical kills.
func TestHelperPretrainChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("child process of TestKillResumeIdentical")
	}
	if _, _, err := Start(context.Background(), testOptions(t, dir, 60), nil, false); err != nil {
		t.Fatal(err)
	}
}

// A run killed with SIGKILL at a random moment and resumed ends with a
// model byte-identical to the same run left alone.
func TestKillResumeIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a subprocess")
	}
	straight := t.TempDir()
	if _, _, err := Start(context.Background(), testOptions(t, straight, 60), nil, false); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(straight, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	delay, state := killAfterFirstCheckpoint(t, "TestHelperPretrainChild", childEnv, dir, 60*time.Second, 300*time.Millisecond)
	st, _, err := ReadLatestState(dir)
	if err != nil {
		t.Fatalf("after the kill: %v", err)
	}
	t.Logf("killed %v after the first checkpoint (%v); resuming from step %d", delay, state, st.Step)
	if _, _, err := Resume(context.Background(), dir, 0, 2, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("resumed model differs from the uninterrupted run (%d vs %d bytes)", len(got), len(want))
	}
}

func TestResumeErrors(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Resume(context.Background(), dir, 0, 2, nil, nil, false); err == nil {
		t.Error("resume of an empty folder succeeded")
	}
	os.WriteFile(filepath.Join(dir, RunFile), []byte("{not json"), 0o644)
	if _, _, err := Resume(context.Background(), dir, 0, 2, nil, nil, false); err == nil {
		t.Error("resume with a corrupt pretrain.json succeeded")
	}
}

func TestBadCorpus(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, nil, 0o644)
	bin := filepath.Join(dir, "bin.txt")
	os.WriteFile(bin, []byte{0, 1, 2, 0xff, 0xfe, 0}, 0o644)
	for _, c := range []string{empty, bin, filepath.Join(dir, "absent")} {
		o := testOptions(t, filepath.Join(dir, "run"), 2)
		o.Corpus = c
		if _, _, err := Start(context.Background(), o, nil, false); err == nil {
			t.Errorf("corpus %s accepted", c)
		} else {
			t.Logf("%s: %v", filepath.Base(c), err)
		}
	}
}

// The final folder carries the tokenizer that made the data (uncased BERT
// WordPiece), so that fill-mask and HF load the same one.
func TestFinalFolderTokenizer(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Start(context.Background(), testOptions(t, dir, 2), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Kind() != tokenizer.Bert || tok.VocabSize() != j.Tokenizer.VocabSize() {
		t.Errorf("final folder tokenizer: %v with %d tokens, trained with %v and %d", tok.Kind(), tok.VocabSize(), j.Tokenizer.Kind(), j.Tokenizer.VocabSize())
	}
}

// Run files are ordinary readable files (not CreateTemp's 0600).
func TestRunFilesReadable(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Start(context.Background(), testOptions(t, dir, 2), nil, false); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"model.safetensors", "config.json", "metrics.jsonl", "loss.png", RunFile, "checkpoint-2"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o044 != 0o044 {
			t.Errorf("%s has mode %v", f, st.Mode().Perm())
		}
	}
}

// pretrain.json records the size of the vocabulary the run uses: a
// --vocab file's, or the one trained on the corpus, not the requested 8000.
func TestRunFileVocabSize(t *testing.T) {
	words := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "of", "and", "light"}
	for c := 'a'; c <= 'z'; c++ {
		words = append(words, string(c), "##"+string(c))
	}
	vocabFile := filepath.Join(t.TempDir(), "vocab.txt")
	if err := os.WriteFile(vocabFile, []byte(strings.Join(words, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, vocab, objective string }{
		{"mlm, --vocab", vocabFile, ""},
		{"causal, --vocab", vocabFile, ObjectiveCausal},
		{"mlm, trained", "", ""},
	} {
		dir := filepath.Join(t.TempDir(), "run")
		o := testOptions(t, dir, 1)
		o.Vocab, o.VocabSize, o.Objective = tc.vocab, 0, tc.objective // 0: the default, 8000
		j, err := start(o, true, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, RunFile))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			VocabSize int `json:"vocab_size"`
		}
		if err := jsonUnmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		want := j.Tokenizer.VocabSize()
		if tc.vocab != "" && want != len(words) {
			t.Fatalf("%s: the tokenizer of %s has %d tokens, the file %d", tc.name, vocabFile, want, len(words))
		}
		if rec.VocabSize != want || j.Options.VocabSize != want || j.Model.Config.VocabSize != want {
			t.Errorf("%s: %s records vocab_size %d, Job.Options %d, the model %d; the vocabulary has %d tokens",
				tc.name, RunFile, rec.VocabSize, j.Options.VocabSize, j.Model.Config.VocabSize, want)
		}
	}
}
