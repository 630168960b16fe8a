package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/sentence"
)

// answerOf posts body to path and decodes the JSON answer; the test fails
// unless the status is 200.
func answerOf(t *testing.T, s http.Handler, path, body string) any {
	t.Helper()
	code, _, b := post(t, s, path, body)
	if code != http.StatusOK {
		t.Fatalf("POST %s %s: %d %s", path, body, code, b)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("POST %s: %v in %s", path, err, b)
	}
	return v
}

// rootCase is a body for the root and what the native route answers for
// it: native's answer to nativeBody at nativePath, reshaped by want (nil:
// as it is).
type rootCase struct {
	name, body             string
	nativePath, nativeBody string
	want                   func(native any) any
}

// elem is x[i] of a JSON list.
func elem(x any, i int) any { return x.([]any)[i] }

// Each model kind × body shape: POST / and POST /invocations answer what
// the native route answers (the same numbers, in HF's shape where it
// differs), and the request holds nothing once answered (no slot, not
// counted among the batched requests being prepared).
func TestRootByModelKind(t *testing.T) {
	sim := `{"inputs": {"source_sentence": "the whale", "sentences": ["the sea", "a ship ."]}}`
	simCase := rootCase{"similarity", sim, "/similarity", sim, nil}
	kinds := []struct {
		head   roformer.Head
		labels []string
		cases  []rootCase
	}{
		{roformer.HeadBase, nil, []rootCase{
			{"embed one", `{"inputs": "the whale"}`, "/embed", `{"inputs": "the whale"}`, nil},
			{"embed batch", `{"inputs": ["the whale", "a ship"], "normalize": false}`, "/embed", `{"inputs": ["the whale", "a ship"], "normalize": false}`, nil},
			simCase,
		}},
		{roformer.HeadMaskedLM, nil, []rootCase{
			{"one mask", `{"inputs": "the [MASK] sea ."}`, "/v1/fill-mask", `{"inputs": "the [MASK] sea ."}`,
				func(n any) any { return elem(elem(n.(map[string]any)["results"], 0), 0) }},
			{"two masks, top_k", `{"inputs": "a ship [MASK] the [MASK]", "parameters": {"top_k": 2}}`, "/v1/fill-mask", `{"inputs": "a ship [MASK] the [MASK]", "top_k": 2}`,
				func(n any) any { return elem(n.(map[string]any)["results"], 0) }},
			{"batch", `{"inputs": ["the [MASK] sea .", "a ship [MASK] the [MASK]"]}`, "/v1/fill-mask", `{"inputs": ["the [MASK] sea .", "a ship [MASK] the [MASK]"]}`,
				func(n any) any {
					r := n.(map[string]any)["results"]
					return []any{elem(elem(r, 0), 0), elem(r, 1)}
				}},
			simCase,
		}},
		{roformer.HeadSequenceCls, []string{"good", "bad", "meh"}, []rootCase{
			{"one text", `{"inputs": "the whale"}`, "/predict", `{"inputs": "the whale"}`, func(n any) any { return []any{n} }},
			{"batch", `{"inputs": ["the whale", "a ship ."]}`, "/predict", `{"inputs": [["the whale"], ["a ship ."]]}`, nil},
			{"pair", `{"inputs": {"text": "the whale", "text_pair": "the sea"}}`, "/predict", `{"inputs": ["the whale", "the sea"]}`, func(n any) any { return []any{n} }},
			{"TEI's pair in a batch", `{"inputs": [["the whale", "the sea"], "a ship"]}`, "/predict", `{"inputs": [["the whale", "the sea"], ["a ship"]]}`, nil},
			{"top_k", `{"inputs": "the whale", "parameters": {"top_k": 1}}`, "/predict", `{"inputs": "the whale"}`, func(n any) any { return []any{n.([]any)[:1]} }},
			{"function_to_apply none", `{"inputs": ["the whale"], "parameters": {"function_to_apply": "none"}}`, "/predict", `{"inputs": [["the whale"]], "raw_scores": true}`, nil},
			simCase,
		}},
		{roformer.HeadSequenceCls, []string{"score"}, []rootCase{
			{"rerank", `{"query": "the whale", "texts": ["the sea", "a ship"]}`, "/rerank", `{"query": "the whale", "texts": ["the sea", "a ship"]}`, nil},
			{"classify", `{"inputs": "the whale"}`, "/predict", `{"inputs": "the whale"}`, func(n any) any { return []any{n} }},
		}},
		{roformer.HeadTokenCls, []string{"O", "B-X", "I-X"}, []rootCase{
			{"simple by default", `{"inputs": "the whale ship sea"}`, "/v1/token-classification", `{"inputs": "the whale ship sea", "aggregation_strategy": "simple"}`, nil},
			{"parameters", `{"inputs": ["the whale", "a ship"], "parameters": {"aggregation_strategy": "first", "ignore_labels": []}}`,
				"/v1/token-classification", `{"inputs": ["the whale", "a ship"], "aggregation_strategy": "first", "ignore_labels": []}`, nil},
			simCase,
		}},
		{roformer.HeadQA, nil, []rootCase{
			{"HF's shape", `{"inputs": {"question": "the whale", "context": "a ship the sea ."}}`, "/v1/question-answering", `{"question": "the whale", "context": "a ship the sea ."}`, nil},
			{"parameters", `{"inputs": {"question": "the whale", "context": "a ship the sea ."}, "parameters": {"top_k": 2, "max_answer_len": 2}}`,
				"/v1/question-answering", `{"question": "the whale", "context": "a ship the sea .", "top_k": 2, "max_answer_len": 2}`, nil},
			{"a list", `{"inputs": [{"question": "the whale", "context": "a ship the sea ."}, {"question": "a ship", "context": "the whale ."}]}`,
				"/v1/question-answering", `[{"question": "the whale", "context": "a ship the sea ."}, {"question": "a ship", "context": "the whale ."}]`, nil},
			{"the native body", `{"question": "the whale", "context": "a ship the sea ."}`, "/v1/question-answering", `{"question": "the whale", "context": "a ship the sea ."}`, nil},
			simCase,
		}},
	}
	for _, k := range kinds {
		s, _, _ := newServer(t, k.head, k.labels, Options{})
		for _, c := range k.cases {
			t.Run(string(k.head)+"/"+c.name, func(t *testing.T) {
				want := answerOf(t, s, c.nativePath, c.nativeBody)
				if c.want != nil {
					want = c.want(want)
				}
				for _, path := range []string{"/", "/invocations"} {
					if got := answerOf(t, s, path, c.body); !reflect.DeepEqual(got, want) {
						t.Errorf("POST %s %s:\n got %v\nwant %v", path, c.body, got, want)
					}
				}
				if n, slots := s.preparing.Load(), len(s.slots); n != 0 || slots != 0 {
					t.Errorf("after the requests: %d batched requests being prepared, %d slots held", n, slots)
				}
			})
		}
	}
}

// The root's rule beyond the head: a sentence-transformers folder and
// RoFormer-Sim embed whatever their head.
func TestRootModelTask(t *testing.T) {
	m, tok := tinyModel(t, roformer.HeadMaskedLM, nil)
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"masked-LM", Options{}, taskFillMask},
		{"sentence-transformers folder", Options{Sentence: &sentence.Folder{Pooling: sentence.Pooling{Dim: 16, Mean: true, IncludePrompt: true}}}, taskFeatureExtraction},
	} {
		s, err := New(m, tok, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.modelTask(); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
		if c.want == taskFeatureExtraction {
			body := `{"inputs": ["the whale", "a ship"]}`
			if got, want := answerOf(t, s, "/", body), answerOf(t, s, "/embed", body); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: POST / %v, /embed %v", c.name, got, want)
			}
		}
	}
	cfg := testmodel.Config(len(words))
	cfg.IsDecoder = true
	sim, err := roformer.New(cfg, roformer.HeadCausalLM)
	if err != nil {
		t.Fatal(err)
	}
	sim.EnablePooler()
	if !sim.IsSim() {
		t.Fatal("a causal-LM model with is_decoder and a pooler is not RoFormer-Sim")
	}
	s, err := New(sim, tok, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.modelTask(); got != taskFeatureExtraction {
		t.Errorf("RoFormer-Sim: %s, want %s", got, taskFeatureExtraction)
	}
}

// A body that fits no task is a 422 (TEI's shape) that says what the root
// takes for the model; the page at GET / is still the page.
func TestRootRefusals(t *testing.T) {
	base, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	qa, _, _ := newServer(t, roformer.HeadQA, nil, Options{})
	lm, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	for _, c := range []struct {
		name string
		s    *Server
		body string
		code int
		want string
	}{
		{"not JSON", base, `{"inputs": `, 422, "request body"},
		{"no inputs", base, `{"text": "the whale"}`, 422, `the body has no "inputs"`},
		{"an object of no task", base, `{"inputs": {"foo": 1}}`, 422, `the keys foo: for this model (RoFormerModel) the root answers feature-extraction`},
		{"a question on a base model", base, `{"inputs": {"question": "the whale", "context": "the sea"}}`, 422, "not a question-answering model"},
		{"a text on a QA model", qa, `{"inputs": "the whale"}`, 422, `root answers question-answering as {"inputs": {"question", "context"}}`},
		{"a query on a non-reranker", base, `{"query": "the whale", "texts": ["the sea"]}`, 422, `no "inputs"`},
		{"fill-mask without a mask", lm, `{"inputs": "the whale"}`, 400, "no [MASK]"},
		{"fill-mask targets", lm, `{"inputs": "the [MASK]", "parameters": {"targets": ["sea"]}}`, 422, "targets"},
		{"parameters not an object", lm, `{"inputs": "the [MASK]", "parameters": 3}`, 422, "parameters"},
	} {
		code, _, b := post(t, c.s, "/", c.body)
		var e struct{ Error string }
		if err := json.Unmarshal(b, &e); err != nil || code != c.code || !strings.Contains(e.Error, c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, code, b, c.code, c.want)
		}
		if n, slots := c.s.preparing.Load(), len(c.s.slots); n != 0 || slots != 0 {
			t.Errorf("%s: %d batched requests being prepared, %d slots held", c.name, n, slots)
		}
	}
	code, h, b := send(t, base, "GET", "/", "", nil)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(b, "<html") {
		t.Errorf("GET /: %d %s %.80s", code, h.Get("Content-Type"), b)
	}
	if code, _, b := send(t, base, "PUT", "/", "{}", map[string]string{"Content-Type": "application/json"}); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT /: %d %s", code, b)
	}
}
