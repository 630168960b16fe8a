package server

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
)

// jsClients is the folder of the JS clients' test: package.json pins
// OpenAI's and Hugging Face's official clients, clients.mjs calls them.
const jsClients = "testdata/jsclients"

// runJSClients runs clients.mjs against s for the groups named and returns
// each call's result. It skips the test without node (18 or later) or
// without the clients installed (npm ci in the folder; .ci/run does it).
func runJSClients(t *testing.T, s *Server, groups ...string) map[string]json.RawMessage {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node in PATH: the JS clients' test needs Node.js 18 or later")
	}
	v, err := exec.Command(node, "--version").Output()
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".")
	if n, _ := strconv.Atoi(major); err != nil || n < 18 {
		t.Skipf("node %q: the clients need Node.js 18 or later (%v)", bytes.TrimSpace(v), err)
	}
	for _, pkg := range []string{"openai", "@huggingface/inference"} {
		if _, err := os.Stat(filepath.Join(jsClients, "node_modules", pkg, "package.json")); err != nil {
			t.Skipf("%s is not installed in %s (run npm ci there): %v", pkg, jsClients, err)
		}
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	cmd := exec.Command(node, append([]string{"clients.mjs", ts.URL}, groups...)...)
	cmd.Dir = jsClients
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node clients.mjs %v: %v\n%s", groups, err, stderr.Bytes())
	}
	t.Logf("node clients.mjs %v: %s", groups, out)
	var res map[string]json.RawMessage
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("node clients.mjs %v: %v in %s", groups, err, out)
	}
	return res
}

// jsCase is a client call's result, by name, and the native route's answer
// it must equal.
type jsCase struct {
	call, path, body string
	want             func(native any) any // nil: the answer as it is
}

// checkJS compares each call's result with the native route's answer,
// both decoded from JSON: the same values (each number printed by Go, read
// and printed again by JavaScript, is the same float64).
func checkJS(t *testing.T, s *Server, got map[string]json.RawMessage, cases []jsCase) {
	t.Helper()
	for _, c := range cases {
		want := answerOf(t, s, c.path, c.body)
		if c.want != nil {
			want = c.want(want)
		}
		var g any
		if err := json.Unmarshal(got[c.call], &g); err != nil {
			t.Errorf("%s: %v in %s", c.call, err, got[c.call])
			continue
		}
		if !reflect.DeepEqual(g, want) {
			t.Errorf("%s:\n got %s\nwant (POST %s %s) %v", c.call, got[c.call], c.path, c.body, want)
		}
	}
}

// vectors decodes a list of vectors as float32, as the server computes
// them.
func vectors(t *testing.T, what string, raw []byte) [][]float32 {
	t.Helper()
	var v [][]float32
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v in %.200s", what, err, raw)
	}
	return v
}

// OpenAI's official client (float, base64 and its default, dimensions) and
// @huggingface/inference's featureExtraction and sentenceSimilarity at the
// root URL, on a base encoder: the same vectors and scores as POST
// /v1/embeddings, /embed and /similarity.
func TestJSClientsEmbeddings(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	checkJSEmbeddings(t, s, 16)
}

// The same calls on a sentence-transformers folder (mean → Dense 16→8 Tanh
// → Normalize, saved by sentence-transformers 2.2.2; its routes' vectors
// are checked against its encode in sentence_test.go).
func TestJSClientsSentenceTransformers(t *testing.T) {
	s, err := Load(filepath.Join("..", "sentence", "testdata", "st", "dense_tanh_normalize"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkJSEmbeddings(t, s, 8)
}

// checkJSEmbeddings runs the embedding group of clients.mjs against s and
// compares each call with the native route; the vectors have dim values.
func checkJSEmbeddings(t *testing.T, s *Server, dim int) {
	t.Helper()
	got := runJSClients(t, s, "embed")
	native := func(body string) [][]float32 {
		code, _, b := post(t, s, "/v1/embeddings", body)
		var res OpenAIEmbeddingsResponse
		if err := json.Unmarshal(b, &res); code != 200 || err != nil {
			t.Fatalf("/v1/embeddings %s: %d %s", body, code, b)
		}
		out := make([][]float32, len(res.Data))
		for i, d := range res.Data {
			raw, _ := json.Marshal(d.Embedding)
			out[i] = vectors(t, "/v1/embeddings", []byte("["+string(raw)+"]"))[0]
		}
		return out
	}
	two := native(`{"model": "m", "input": ["the whale", "a ship"]}`)
	for call, want := range map[string][][]float32{
		"openai_default":    two,
		"openai_float":      two,
		"openai_base64":     two,
		"openai_dimensions": native(`{"model": "m", "input": "the whale", "dimensions": 8}`),
	} {
		if g := vectors(t, call, got[call]); !reflect.DeepEqual(g, want) {
			t.Errorf("%s: %v, want %v", call, g, want)
		}
	}
	if len(two) != 2 || len(two[0]) != dim {
		t.Errorf("/v1/embeddings: %d vectors of %d", len(two), len(two[0]))
	}
	checkJS(t, s, got, []jsCase{
		{"hf_feature_extraction", "/embed", `{"inputs": ["the whale", "a ship"]}`, nil},
		{"hf_feature_extraction_one", "/embed", `{"inputs": "the whale"}`, nil},
		{"hf_sentence_similarity", "/similarity", `{"inputs": {"source_sentence": "the whale", "sentences": ["the sea", "a ship ."]}}`, nil},
	})
}

// @huggingface/inference's textClassification (one text, a batch, top_k)
// at the root URL of a sequence classifier: POST /predict's scores.
func TestJSClientsClassification(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadSequenceCls, []string{"good", "bad", "meh"}, Options{})
	got := runJSClients(t, s, "classify")
	checkJS(t, s, got, []jsCase{
		{"hf_text_classification", "/predict", `{"inputs": "the whale"}`, nil},
		{"hf_text_classification_batch", "/predict", `{"inputs": [["a ship ."], ["the whale"]]}`, func(n any) any { return elem(n, 0) }},
		{"hf_text_classification_top_k", "/predict", `{"inputs": "the whale"}`, func(n any) any { return n.([]any)[:1] }},
		{"hf_sentence_similarity", "/similarity", `{"inputs": {"source_sentence": "the whale", "sentences": ["the sea", "a ship ."]}}`, nil},
	})
}

// @huggingface/inference's fillMask at the root URL of a masked-LM model:
// POST /v1/fill-mask's candidates.
func TestJSClientsFillMask(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	got := runJSClients(t, s, "fill-mask")
	first := func(n any) any { return elem(elem(n.(map[string]any)["results"], 0), 0) }
	checkJS(t, s, got, []jsCase{
		{"hf_fill_mask", "/v1/fill-mask", `{"inputs": "the [MASK] sea ."}`, first},
		{"hf_fill_mask_top_k", "/v1/fill-mask", `{"inputs": "a ship [MASK] the sea", "top_k": 3}`, first},
	})
}

// @huggingface/inference's tokenClassification at the root URL of a
// token classifier: POST /v1/token-classification's entities, grouped
// ("simple" by default).
func TestJSClientsTokenClassification(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadTokenCls, []string{"O", "B-X", "I-X"}, Options{})
	got := runJSClients(t, s, "token-classification")
	checkJS(t, s, got, []jsCase{
		{"hf_token_classification", "/v1/token-classification", `{"inputs": "the whale ship sea", "aggregation_strategy": "simple"}`, nil},
		{"hf_token_classification_first", "/v1/token-classification", `{"inputs": "the whale ship sea", "aggregation_strategy": "first", "ignore_labels": []}`, nil},
	})
	var all []any
	if err := json.Unmarshal(got["hf_token_classification_first"], &all); err != nil || len(all) == 0 {
		t.Errorf("hf_token_classification_first: no entities (%v): %s", err, got["hf_token_classification_first"])
	}
}

// @huggingface/inference's questionAnswering at the root URL of a
// question-answering model: POST /v1/question-answering's best answer.
func TestJSClientsQuestionAnswering(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadQA, nil, Options{})
	got := runJSClients(t, s, "question-answering")
	checkJS(t, s, got, []jsCase{
		{"hf_question_answering", "/v1/question-answering", `{"question": "the whale", "context": "a ship the sea ."}`, nil},
		{"hf_question_answering_top_k", "/v1/question-answering", `{"question": "the whale", "context": "a ship the sea .", "top_k": 2}`, func(n any) any { return elem(n, 0) }},
		{"hf_question_answering_endpoint_url", "/v1/question-answering", `{"question": "a ship", "context": "the whale ."}`, nil},
	})
}
