package finetune

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

// toyQA returns n questions "lives in" whose answer is the city after
// "<name> lives in" in a context of filler words.
func toyQA(seed uint64, n int) []QAExample {
	r := rand.New(rand.NewPCG(seed, 4))
	filler := []string{"good", "bad", "the", "movie", "was", "a", "film", "plot", "and", "it", "very", "quite", "story", "acting", "seen"}
	cities := []string{"paris", "new york"}
	names := []string{"john", "mary"}
	var out []QAExample
	for i := range n {
		pre, post := make([]string, r.IntN(6)), make([]string, r.IntN(6))
		for j := range pre {
			pre[j] = filler[r.IntN(len(filler))]
		}
		for j := range post {
			post[j] = filler[r.IntN(len(filler))]
		}
		city := cities[r.IntN(2)]
		head := strings.Join(append(pre, names[r.IntN(2)], "lives", "in"), " ") + " "
		ctx := head + city
		if len(post) > 0 {
			ctx += " " + strings.Join(post, " ")
		}
		ex := QAExample{Line: i + 1, Question: "lives in", Context: ctx}
		ex.Answers.Text, ex.Answers.AnswerStart = []string{city}, []int{len([]rune(head))}
		out = append(out, ex)
	}
	return out
}

// The windows' labels: each window holding the answer points at its
// tokens, the others at [CLS]; small windows with a stride.
func TestQAFeaturesLabels(t *testing.T) {
	_, pm := tinyBuilt(t)
	tok := pm.Tokenizer
	ex := QAExample{Line: 1, Question: "lives in", Context: "good bad the movie was john lives in new york and it was very good"}
	ex.Answers.Text, ex.Answers.AnswerStart = []string{"new york"}, []int{strings.Index(ex.Context, "new york")}
	o := QAOptions{DocStride: 2}.Pipeline(10) // 10 − 2 question tokens − 3 = 5 context tokens a window
	feats, outside, err := qaFeatures(tok, []QAExample{ex}, o, "x")
	mustf(t, err, "features")
	if len(feats) < 3 {
		t.Fatalf("%d windows, want several", len(feats))
	}
	holding := 0
	for i, f := range feats {
		if f.start == 0 {
			if f.end != 0 {
				t.Errorf("window %d: start [CLS], end %d", i, f.end)
			}
			continue
		}
		holding++
		var words []string
		for p := f.start; p <= f.end; p++ {
			words = append(words, tok.Decode([]int{int(f.ids[p])}, true))
		}
		if got := strings.Join(words, " "); got != "new york" || f.types[f.start] != 1 {
			t.Errorf("window %d: answer tokens %q (type %d), want \"new york\" in the context", i, got, f.types[f.start])
		}
	}
	if holding == 0 || holding+outside != len(feats) {
		t.Errorf("%d windows hold the answer, %d do not, of %d", holding, outside, len(feats))
	}
}

func tinyBuilt(t *testing.T) (string, *pipeline.Model) {
	t.Helper()
	dir := tinyModel(t)
	pm, err := pipeline.Open(dir, pipeline.OpenOptions{})
	mustf(t, err, "open")
	return dir, pm
}

func TestReadQAFormats(t *testing.T) {
	dir := t.TempDir()
	squad := `{"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "john lives in paris", "qas": [{"id": "q1", "question": "lives in", "answers": [{"text": "paris", "answer_start": 14}]}]}]}]}`
	jsonl := `{"id": "q1", "question": "lives in", "context": "john lives in paris", "answers": {"text": ["paris"], "answer_start": [14]}}` + "\n"
	for name, body := range map[string]string{"s.json": squad, "s.jsonl": jsonl} {
		p := filepath.Join(dir, name)
		mustf(t, os.WriteFile(p, []byte(body), 0o644), "write")
		exs, err := ReadQA(p, 0)
		mustf(t, err, "%s", name)
		if len(exs) != 1 || exs[0].ID != "q1" || exs[0].Answers.Text[0] != "paris" || exs[0].Answers.AnswerStart[0] != 14 {
			t.Errorf("%s: %+v", name, exs)
		}
	}
	// Character offsets, not bytes: 巴黎 starts at character 4, byte 12.
	zh := QAExample{Question: "住在哪里", Context: "约翰住在巴黎。"}
	zh.Answers.Text, zh.Answers.AnswerStart = []string{"巴黎"}, []int{4}
	if err := zh.check(); err != nil {
		t.Errorf("a Chinese answer: %v", err)
	}
	if from, to, _ := zh.answerBytes(0); from != 12 || to != 18 {
		t.Errorf("巴黎 at bytes [%d, %d), want [12, 18)", from, to)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	mustf(t, os.WriteFile(bad, []byte(`{"question": "q", "context": "john lives in paris", "answers": {"text": ["paris"], "answer_start": [13]}}`+"\n"), 0o644), "write")
	if _, err := ReadQA(bad, 0); err == nil || !strings.Contains(err.Error(), "bad.jsonl:1") || !strings.Contains(err.Error(), "character 13") {
		t.Errorf("a misplaced answer: %v", err)
	}
}

// A tiny run on the toy set: the loss falls, the held-out answers become
// right, and the saved folder answers the same through pipeline.Open.
func TestRunTaskQA(t *testing.T) {
	ctx := context.Background()
	dir := tinyModel(t)
	o := fastOptions()
	o.MaxLength, o.Epochs, o.BatchSize, o.LR, o.LogEvery = 32, 6, 16, 5e-3, 0
	out := filepath.Join(t.TempDir(), "qa")
	var log bytes.Buffer
	train, dev := toyQA(1, 128), toyQA(2, 32)
	m0, _, err := loadTaskModel(dir, roformer.HeadQA, false, o.Seed)
	mustf(t, err, "load")
	_, pm0 := tinyBuilt(t)
	before, err := EvaluateQA(ctx, m0, pm0.Tokenizer, dev, QAOptions{}.Pipeline(o.MaxLength))
	mustf(t, err, "evaluate untrained")
	if before["exact_match"] > 0.2 {
		t.Fatalf("the untrained model already answers: %v", before)
	}
	info, err := RunTask(ctx, TaskRunOptions{Model: dir, QATrain: train, QAEval: dev, TrainFile: "toy", Options: o, Out: out, Progress: &log})
	mustf(t, err, "run\n%s", log.String())
	r := info.Result
	first, last := r.Epochs[0].TrainLoss, r.Epochs[len(r.Epochs)-1].TrainLoss
	t.Logf("untrained %v; train loss %.3f → %.3f; best epoch %d: %v", before, first, last, r.BestEpoch, r.Best)
	if !(last < first*0.5) {
		t.Errorf("train loss %.3f → %.3f: did not halve\n%s", first, last, log.String())
	}
	if r.Best["exact_match"] < 0.9 {
		t.Errorf("held-out exact match %.3f, want ≥ 0.9\n%s", r.Best["exact_match"], log.String())
	}
	pm, err := pipeline.Open(out, pipeline.OpenOptions{})
	mustf(t, err, "reopen")
	if pm.Model.Head != roformer.HeadQA || pm.Model.Config.Architectures[0] != "RoFormerForQuestionAnswering" {
		t.Fatalf("reopened with %s %v", pm.Model.Head, pm.Model.Config.Architectures)
	}
	rep, err := EvaluateQA(ctx, pm.Model, pm.Tokenizer, dev, QAOptions{}.Pipeline(o.MaxLength))
	mustf(t, err, "evaluate")
	if rep["exact_match"] != r.Best["exact_match"] || rep["f1"] != r.Best["f1"] {
		t.Errorf("reopened folder: %v, at training %v", rep, r.Best)
	}
	for _, ex := range dev[:4] {
		ans, err := pipeline.QuestionAnswering(ctx, pm.Model, pm.Tokenizer, ex.Question, ex.Context, pipeline.QuestionAnsweringOptions{MaxSeqLen: o.MaxLength})
		mustf(t, err, "answer")
		if ans[0].Answer != ex.Answers.Text[0] {
			t.Errorf("%q: answered %q, want %q", ex.Context, ans[0].Answer, ex.Answers.Text[0])
		}
	}
	for _, f := range []string{"config.json", "model.safetensors", "vocab.txt", TaskRunFile, MetricsFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("output: %v", err)
		}
	}
}
