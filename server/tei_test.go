package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// logitsAlone runs one text or pair through the model by itself and returns
// its logits.
func logitsAlone(t testing.TB, m *roformer.Model, tok *tokenizer.Tokenizer, a string, b *string) []float64 {
	t.Helper()
	enc, err := tok.Encode(a, tokenizer.EncodeOptions{})
	if b != nil {
		enc, err = tok.EncodePair(a, *b, tokenizer.EncodeOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return logitsOf(t, m, tokenizer.Int32s(enc.IDs), tokenizer.Int32s(enc.TypeIDs))
}

func logitsOf(t testing.TB, m *roformer.Model, ids, types []int32) []float64 {
	t.Helper()
	mask := make([]int32, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	out, err := m.Forward(context.Background(), &roformer.Batch{InputIDs: ids, TokenTypeIDs: types, AttentionMask: mask, B: 1, T: len(ids)}, nil, roformer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float64, len(out.Logits.Data))
	for i, x := range out.Logits.Data {
		v[i] = float64(x)
	}
	return v
}

// teiCall posts body and decodes a 200's JSON into out; for an error it
// checks TEI's shape and returns the status and error_type.
func teiCall(t testing.TB, s *Server, path, body string, out any) (int, string) {
	t.Helper()
	code, h, b := post(t, s, path, body)
	if h.Get("Content-Type") != "application/json" {
		t.Fatalf("%s: Content-Type %q, body %q", path, h.Get("Content-Type"), b)
	}
	if code != 200 {
		var e map[string]string
		if err := json.Unmarshal(b, &e); err != nil || e["error"] == "" || e["error_type"] == "" || len(e) != 2 {
			t.Fatalf("%s %s: status %d with a body that is not TEI's error: %s", path, body, code, b)
		}
		return code, e["error_type"]
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v in %s", path, err, b)
	}
	return code, ""
}

// classifierModel is a tiny sequence classifier whose attention is not
// saturated (tinyModel's Scale 30 makes each position attend to one other,
// so that a text and a pair may get the same logits), with logits of a few
// units (Scale 6).
func classifierModel(t testing.TB, labels []string) (*roformer.Model, *tokenizer.Tokenizer) {
	t.Helper()
	return testmodel.Tiny{Words: words, Head: roformer.HeadSequenceCls, Seed: 5, MaxPositions: 32, Labels: labels, Scale: 6}.Build(t)
}

func close64(a, b float64) bool { return math.Abs(a-b) <= 1e-5*max(1, math.Abs(b)) }

func softmax(x []float64) []float64 {
	top, sum := slices.Max(x), 0.0
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = math.Exp(v - top)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// checkPredictions checks one input's predictions: every label once, best
// first, each score f(logits)[label].
func checkPredictions(t *testing.T, what string, got []TEIPrediction, labels []string, want []float64) {
	t.Helper()
	if len(got) != len(labels) {
		t.Fatalf("%s: %d predictions, want %d", what, len(got), len(labels))
	}
	for k, p := range got {
		if k > 0 && p.Score > got[k-1].Score {
			t.Errorf("%s: not sorted best first: %+v", what, got)
		}
		i := slices.Index(labels, p.Label)
		if i < 0 || !close64(p.Score, want[i]) {
			t.Errorf("%s: %+v, want the score %v of label %q", what, p, want, p.Label)
		}
	}
}

func TestTEIPredict(t *testing.T) {
	labels := []string{"neg", "pos", "neutral"}
	m, tok := classifierModel(t, labels)
	s, err := New(m, tok, Options{MaxLength: 8, MaxInputs: 3})
	if err != nil {
		t.Fatal(err)
	}
	pair := "a ship"
	single := logitsAlone(t, m, tok, "the whale", nil)
	paired := logitsAlone(t, m, tok, "the whale", &pair)
	if softmax(single)[0] > 0.99 || softmax(single)[0] < 0.01 {
		t.Fatalf("logits %v: softmax saturated, the test would prove little", single)
	}

	var one []TEIPrediction
	if code, kind := teiCall(t, s, "/predict", `{"inputs": "the whale"}`, &one); code != 200 {
		t.Fatalf("status %d %s", code, kind)
	}
	checkPredictions(t, "single", one, labels, softmax(single))
	sum := 0.0
	for _, p := range one {
		sum += p.Score
	}
	if math.Abs(sum-1) > 1e-6 {
		t.Errorf("softmax scores sum to %g", sum)
	}
	// raw_scores: the logits.
	if code, kind := teiCall(t, s, "/predict", `{"inputs": "the whale", "raw_scores": true}`, &one); code != 200 {
		t.Fatalf("status %d %s", code, kind)
	}
	checkPredictions(t, "raw", one, labels, single)
	// A pair.
	if code, kind := teiCall(t, s, "/predict", `{"inputs": ["the whale", "a ship"], "raw_scores": true}`, &one); code != 200 {
		t.Fatalf("status %d %s", code, kind)
	}
	checkPredictions(t, "pair", one, labels, paired)
	t.Logf("logits: text %v, pair %v", single, paired)
	if slices.Equal(single, paired) {
		t.Fatal("the pair's logits equal the single text's")
	}
	// A batch of a text and a pair: a list of lists, in order.
	var batch [][]TEIPrediction
	if code, kind := teiCall(t, s, "/predict", `{"inputs": [["the whale"], ["the whale", "a ship"]]}`, &batch); code != 200 || len(batch) != 2 {
		t.Fatalf("status %d %s, %d results", code, kind, len(batch))
	}
	checkPredictions(t, "batch 0", batch[0], labels, softmax(single))
	checkPredictions(t, "batch 1", batch[1], labels, softmax(paired))

	// Multi-label: a sigmoid of each logit.
	m.Config.ProblemType = "multi_label_classification"
	if code, kind := teiCall(t, s, "/predict", `{"inputs": "the whale"}`, &one); code != 200 {
		t.Fatalf("status %d %s", code, kind)
	}
	sig := make([]float64, len(single))
	for i, x := range single {
		sig[i] = sigmoid(x)
	}
	checkPredictions(t, "multi-label", one, labels, sig)
	m.Config.ProblemType = ""

	// Truncation: "the sea the sea the whale" is 8 tokens with [CLS] and
	// [SEP]; the pair below is 10.
	long := `["the sea the sea the", "whale . a"]`
	enc := must(tok.EncodePair("the sea the sea the", "whale . a", tokenizer.EncodeOptions{}))
	for _, dir := range []string{"Right", "Left"} {
		if code, kind := teiCall(t, s, "/predict", `{"inputs": `+long+`, "raw_scores": true, "truncate": true, "truncation_direction": "`+dir+`"}`, &one); code != 200 {
			t.Fatalf("%s: status %d %s", dir, code, kind)
		}
		ids, types, ok := fit(enc, 8, dir == "Left")
		if !ok || len(ids) != 8 {
			t.Fatalf("fit: %v %v", ids, ok)
		}
		checkPredictions(t, "truncated "+dir, one, labels, logitsOf(t, m, ids, types))
	}

	for _, c := range []struct {
		body string
		code int
		kind string
	}{
		{`{"inputs": ` + long + `}`, 413, "Validation"},                        // too long without truncate
		{`{"inputs": [["a"], ["a"], ["a"], ["a"]]}`, 413, "Validation"},        // more than MaxInputs
		{`{"inputs": ["the", "whale", "sea"]}`, 422, "Validation"},             // three strings: neither a text nor a pair
		{`{"inputs": [["the", "whale", "sea"]]}`, 422, "Validation"},           // the same in a batch
		{`{"inputs": [["the"], "whale"]}`, 422, "Validation"},                  // a batch's elements are lists
		{`{"inputs": []}`, 400, "Empty"},                                       // nothing
		{`{"inputs": "the", "truncation_direction": "Up"}`, 422, "Validation"}, // unknown direction
		{`{"raw_scores": true}`, 422, "Validation"},                            // no inputs
		{`{"inputs": "the"`, 422, "Validation"},                                // not JSON
	} {
		if code, kind := teiCall(t, s, "/predict", c.body, nil); code != c.code || kind != c.kind {
			t.Errorf("%s: status %d %s, want %d %s", c.body, code, kind, c.code, c.kind)
		}
	}
	if code, _, _ := post(t, s, "/rerank", `{"query": "the", "texts": ["whale"]}`); code != 404 {
		t.Errorf("/rerank on a classifier with 3 labels: status %d, want 404", code)
	}

	// A masked-LM cannot classify: /predict is not one of its routes (404).
	lm, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	if code, kind := teiCall(t, lm, "/predict", `{"inputs": "the whale"}`, nil); code != 404 || kind != "Backend" {
		t.Errorf("/predict on a masked-LM: status %d %s, want 404 Backend", code, kind)
	}
	if slices.Contains(lm.Info().Endpoints, "POST /predict") || !slices.Contains(s.Info().Endpoints, "POST /predict") || slices.Contains(s.Info().Endpoints, "POST /rerank") {
		t.Errorf("endpoints: masked-LM %v, classifier %v", lm.Info().Endpoints, s.Info().Endpoints)
	}
	var info map[string]any
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/info", nil))
	if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil {
		t.Fatal(err)
	}
	mt, _ := json.Marshal(info["model_type"])
	if string(mt) != `{"classifier":{"id2label":{"0":"neg","1":"pos","2":"neutral"},"label2id":{"neg":0,"neutral":2,"pos":1}}}` ||
		!strings.Contains(fmt.Sprint(info["routes"]), "POST /predict") {
		t.Errorf("GET /info: %s", rec.Body.String())
	}
}

func TestTEIRerank(t *testing.T) {
	m, tok := classifierModel(t, []string{"score"})
	s, err := New(m, tok, Options{MaxInputs: 4})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"the whale", "a ship . the sea", "good", "bad bad"}
	want := make([]float64, len(texts))
	for i := range texts {
		want[i] = logitsAlone(t, m, tok, "the sea", &texts[i])[0]
	}
	body, _ := json.Marshal(map[string]any{"query": "the sea", "texts": texts})
	for _, raw := range []bool{false, true} {
		for _, withText := range []bool{false, true} {
			b := strings.TrimSuffix(string(body), "}") + fmt.Sprintf(`, "raw_scores": %v, "return_text": %v}`, raw, withText)
			code, _, out := post(t, s, "/rerank", b)
			var got []map[string]any
			if code != 200 || json.Unmarshal(out, &got) != nil || len(got) != len(texts) {
				t.Fatalf("%s: status %d %s", b, code, out)
			}
			seen := map[int]bool{}
			for k, r := range got {
				i := int(r["index"].(float64))
				score := r["score"].(float64)
				w := want[i]
				if !raw {
					w = sigmoid(w)
				}
				if seen[i] || !close64(score, w) {
					t.Errorf("%s: rank %d %v, want score %g", b, k, r, w)
				}
				seen[i] = true
				if k > 0 && score > got[k-1]["score"].(float64) {
					t.Errorf("%s: not best first: %v", b, got)
				}
				if text, ok := r["text"]; ok != withText || (ok && text != texts[i]) {
					t.Errorf("%s: rank %d %v", b, k, r)
				}
			}
		}
	}
	for _, c := range []struct {
		body string
		code int
		kind string
	}{
		{`{"query": "the", "texts": []}`, 400, "Empty"},
		{`{"query": "the", "texts": ["a", "a", "a", "a", "a"]}`, 413, "Validation"},
		{`{"texts": ["a"]}`, 422, "Validation"},
		{`{"query": "the", "texts": "a"}`, 422, "Validation"},
	} {
		if code, kind := teiCall(t, s, "/rerank", c.body, nil); code != c.code || kind != c.kind {
			t.Errorf("%s: status %d %s, want %d %s", c.body, code, kind, c.code, c.kind)
		}
	}
	if !slices.Contains(s.Info().Endpoints, "POST /rerank") {
		t.Errorf("endpoints %v", s.Info().Endpoints)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/info", nil))
	if !strings.Contains(rec.Body.String(), `"model_type":{"reranker":{"id2label":{"0":"score"}`) {
		t.Errorf("GET /info: %s", rec.Body.String())
	}
	base, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	if code, kind := teiCall(t, base, "/rerank", string(body), nil); code != 404 || kind != "Backend" {
		t.Errorf("/rerank on a base model: %d %s", code, kind)
	}
}

// Classification and embedding requests share the batches: one forward
// pass of the model with its head answers both, as each alone.
func TestTEIPredictBatchedWithEmbed(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadSequenceCls, []string{"a", "b"}, Options{MaxBatchWait: time.Second})
	release := make(chan struct{})
	var once sync.Once
	s.beforeBatch = func() { once.Do(func() { <-release }) }
	var forwards atomic.Int64
	s.afterForward = func(int, int) { forwards.Add(1) }
	var wg sync.WaitGroup
	var pred []TEIPrediction
	var vecs [][]float32
	wg.Add(2)
	go func() {
		defer wg.Done()
		if code, kind := teiCall(t, s, "/predict", `{"inputs": "a ship . the sea", "raw_scores": true}`, &pred); code != 200 {
			t.Errorf("/predict: %d %s", code, kind)
		}
	}()
	go func() {
		defer wg.Done()
		if code, kind := teiCall(t, s, "/embed", `{"inputs": "the whale", "normalize": false}`, &vecs); code != 200 {
			t.Errorf("/embed: %d %s", code, kind)
		}
	}()
	waitFor(t, func() bool { return len(s.slots) == 2 && s.preparing.Load() == 0 })
	close(release)
	wg.Wait()
	if forwards.Load() != 1 {
		t.Errorf("%d forward passes, want 1", forwards.Load())
	}
	checkPredictions(t, "batched", pred, []string{"a", "b"}, logitsAlone(t, m, tok, "a ship . the sea", nil))
	if d := maxDiff(vecs[0], alone(t, m, tok, "the whale", pipeline.PoolMean)); d > 1e-4 {
		t.Errorf("embedding differs by %g from the text alone", d)
	}
}

func TestTEISimilarity(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxInputs: 3})
	var got []float64
	if code, kind := teiCall(t, s, "/similarity", `{"inputs": {"source_sentence": "the whale", "sentences": ["the whale", "a ship . the sea"]}}`, &got); code != 200 || len(got) != 2 {
		t.Fatalf("status %d %s %v", code, kind, got)
	}
	var vecs [][]float32
	if code, kind := teiCall(t, s, "/embed", `{"inputs": ["the whale", "a ship . the sea"]}`, &vecs); code != 200 {
		t.Fatalf("status %d %s", code, kind)
	}
	cos := 0.0
	for j := range vecs[0] {
		cos += float64(vecs[0][j]) * float64(vecs[1][j])
	}
	if math.Abs(got[0]-1) > 1e-5 || math.Abs(got[1]-cos) > 1e-5 {
		t.Errorf("similarity %v, want [1 %g]", got, cos)
	}
	for _, c := range []struct {
		body string
		code int
		kind string
	}{
		{`{"inputs": {"sentences": ["a"]}}`, 422, "Validation"},
		{`{"inputs": {"source_sentence": "a", "sentences": []}}`, 400, "Empty"},
		{`{"inputs": {"source_sentence": "a", "sentences": ["a", "b", "c"]}}`, 413, "Validation"},
		{`{"inputs": {"source_sentence": "` + strings.Repeat("the ", 40) + `", "sentences": ["a"]}}`, 413, "Validation"},
	} {
		if code, kind := teiCall(t, s, "/similarity", c.body, nil); code != c.code || kind != c.kind {
			t.Errorf("%s: status %d %s, want %d %s", c.body, code, kind, c.code, c.kind)
		}
	}
	if code, _ := teiCall(t, s, "/similarity", `{"inputs": {"source_sentence": "`+strings.Repeat("the ", 40)+`", "sentences": ["a"]}, "truncate": true}`, &got); code != 200 {
		t.Errorf("truncate: status %d", code)
	}
}

// POST /tokenize with a sentence-transformers folder tokenizes the prompt
// followed by the input, as TEI does: prompt_name's, else the server's
// default (the folder's default_prompt_name here, as /embed takes it); the
// offsets point into prompt + input. An unknown name is a 422 that names it
// and lists the folder's prompts.
func TestTEITokenizePrompt(t *testing.T) {
	s, err := Load(filepath.Join("..", "sentence", "testdata", "st", "prompts"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const input = "The whales"
	for _, c := range []struct {
		field, prompt string // the request's prompt_name field; the prompt's text (the fixture's)
	}{
		{`, "prompt_name": "passage"`, "passage: "},
		{`, "prompt_name": "query"`, "query: "},
		{``, "query: "}, // the folder's default_prompt_name
	} {
		var toks [][]TEIToken
		if code, kind := teiCall(t, s, "/tokenize", `{"inputs": ["`+input+`"]`+c.field+`}`, &toks); code != 200 || len(toks) != 1 {
			t.Fatalf("%s: %d %s %+v", c.field, code, kind, toks)
		}
		full := c.prompt + input
		want, err := s.tok.Encode(full, tokenizer.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		alone, err := s.tok.Encode(input, tokenizer.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := toks[0]
		if len(got) != len(want.IDs) || len(got) <= len(alone.IDs) {
			t.Fatalf("%s: %d tokens, want %d (the input alone has %d)", c.field, len(got), len(want.IDs), len(alone.IDs))
		}
		// The first token after [CLS] is the prompt's first word, at 0.
		if first := got[1]; first.Special || first.Start == nil || *first.Start != 0 || first.Text != strings.Fields(c.prompt)[0][:len(first.Text)] {
			t.Errorf("%s: the token after [CLS] is %+v, want the prompt's start", c.field, first)
		}
		for k, tk := range got {
			if tk.ID != want.IDs[k] || tk.Special != (want.SpecialTokensMask[k] == 1) {
				t.Errorf("%s: token %d is %+v, want id %d", c.field, k, tk, want.IDs[k])
			}
			if !tk.Special && (tk.Start == nil || tk.Stop == nil || *tk.Stop > len(full) || tk.Text != full[*tk.Start:*tk.Stop]) {
				t.Errorf("%s: token %d %+v: its offsets are not those of its text in %q", c.field, k, tk, full)
			}
		}
		// The input's own tokens end the answer at their offsets shifted by
		// the prompt's bytes.
		last, lastAlone := got[len(got)-2], alone.Offsets[len(alone.IDs)-2]
		if *last.Stop != len(c.prompt)+lastAlone[1] {
			t.Errorf("%s: the last token stops at %d, want %d", c.field, *last.Stop, len(c.prompt)+lastAlone[1])
		}
	}
	code, _, body := post(t, s, "/tokenize", `{"inputs": "hello", "prompt_name": "doc"}`)
	if code != 422 || !strings.Contains(string(body), `\"doc\"`) || !strings.Contains(string(body), "passage, query") {
		t.Errorf("unknown prompt name: %d %s", code, body)
	}
}

func TestTEITokenizeDecode(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxInputs: 2})
	code, _, body := post(t, s, "/tokenize", `{"inputs": "The whales"}`)
	want := `[[{"id":2,"text":"[CLS]","special":true,"start":null,"stop":null},{"id":5,"text":"The","special":false,"start":0,"stop":3},` +
		`{"id":6,"text":"whale","special":false,"start":4,"stop":9},{"id":11,"text":"s","special":false,"start":9,"stop":10},` +
		`{"id":3,"text":"[SEP]","special":true,"start":null,"stop":null}]]`
	if code != 200 || strings.TrimSpace(string(body)) != want {
		t.Errorf("/tokenize: %d\n%s\nwant\n%s", code, body, want)
	}
	var toks [][]TEIToken
	if code, kind := teiCall(t, s, "/tokenize", `{"inputs": ["the whale", "sea"], "add_special_tokens": false}`, &toks); code != 200 ||
		len(toks) != 2 || len(toks[0]) != 2 || len(toks[1]) != 1 || toks[1][0].Text != "sea" {
		t.Errorf("batch: %d %s %+v", code, kind, toks)
	}
	for _, c := range []struct {
		path, body string
		code       int
		kind       string
	}{
		{"/tokenize", `{"inputs": []}`, 400, "Empty"},
		{"/tokenize", `{"inputs": ["a", "b", "c"]}`, 413, "Validation"},
		{"/tokenize", `{"inputs": 5}`, 422, "Validation"},
		{"/tokenize", `{"inputs": "a", "prompt_name": "query"}`, 422, "Validation"}, // a plain folder has no prompts
		{"/decode", `{"ids": [2, 99]}`, 422, "Tokenizer"},
		{"/decode", `{"ids": [[2], [2], [2]]}`, 413, "Validation"},
		{"/decode", `{"ids": "the"}`, 422, "Validation"},
		{"/decode", `{}`, 422, "Validation"},
	} {
		if code, kind := teiCall(t, s, c.path, c.body, nil); code != c.code || kind != c.kind {
			t.Errorf("%s %s: status %d %s, want %d %s", c.path, c.body, code, kind, c.code, c.kind)
		}
	}
	var texts []string
	for _, c := range []struct {
		body string
		want []string
	}{
		{`{"ids": [2, 5, 6, 11, 3]}`, []string{"the whales"}},
		{`{"ids": [2, 5, 6, 11, 3], "skip_special_tokens": false}`, []string{"[CLS] the whales [SEP]"}},
		{`{"ids": [[5, 8], [9, 7, 10]]}`, []string{"the sea", "a ship."}},
		{`{"ids": []}`, []string{""}},
	} {
		if code, kind := teiCall(t, s, "/decode", c.body, &texts); code != 200 || !slices.Equal(texts, c.want) {
			t.Errorf("%s: %d %s %q, want %q", c.body, code, kind, texts, c.want)
		}
	}
	for _, e := range []string{"POST /similarity", "POST /tokenize", "POST /decode"} {
		if !slices.Contains(s.Info().Endpoints, e) {
			t.Errorf("endpoints %v lack %s", s.Info().Endpoints, e)
		}
	}
}
