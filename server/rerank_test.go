package server

import (
	"cmp"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// openAIErr checks that b is OpenAI's error shape and returns its param.
func openAIErr(t *testing.T, what string, b []byte) string {
	t.Helper()
	var e OpenAIError
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("%s: not OpenAI's error: %s", what, b)
	}
	if e.Error.Param == nil {
		return ""
	}
	return *e.Error.Param
}

func TestV1Rerank(t *testing.T) {
	m, tok := classifierModel(t, []string{"score"})
	s, err := New(m, tok, Options{MaxInputs: 4, MaxLength: 12, Name: "cross"})
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{"the whale", "a ship . the sea", "good", "bad bad"}
	want := make([]float64, len(docs))
	for i := range docs {
		want[i] = sigmoid(logitsAlone(t, m, tok, "the sea", &docs[i])[0])
	}
	tokens := 0
	for _, d := range docs {
		enc, _ := tok.EncodePair("the sea", d, tokenizer.EncodeOptions{})
		tokens += len(enc.IDs)
	}
	for _, path := range []string{"/v1/rerank", "/v2/rerank"} {
		for _, c := range []struct {
			body     string
			n        int
			withText bool
		}{
			{`{"query": "the sea", "documents": ["the whale", "a ship . the sea", "good", "bad bad"]}`, 4, true},
			{`{"model": "another", "query": "the sea", "documents": [{"text": "the whale", "title": "x"}, "a ship . the sea", {"text": "good"}, "bad bad"], "top_n": 2, "return_documents": false}`, 2, false},
			{`{"query": "the sea", "documents": ["the whale", "a ship . the sea", "good", "bad bad"], "top_n": 9, "return_documents": true}`, 4, true},
			{`{"query": "the sea", "documents": ["the whale", "a ship . the sea", "good", "bad bad"], "top_n": 0}`, 4, true},
		} {
			code, _, b := post(t, s, path, c.body)
			var res RerankResponse
			if code != 200 || json.Unmarshal(b, &res) != nil {
				t.Fatalf("%s %s: %d %s", path, c.body, code, b)
			}
			if res.Model != "cross" || !strings.HasPrefix(res.ID, "rerank-") || len(res.Results) != c.n ||
				res.Usage.TotalTokens != tokens || res.Usage.PromptTokens != tokens {
				t.Errorf("%s %s: %s (want %d results, %d tokens)", path, c.body, b, c.n, tokens)
			}
			best := slices.Clone(want)
			slices.SortFunc(best, func(a, b float64) int { return cmp.Compare(b, a) })
			for k, r := range res.Results {
				if !close64(r.RelevanceScore, want[r.Index]) || !close64(r.RelevanceScore, best[k]) {
					t.Errorf("%s: result %d %+v, want score %g, the %d-th best %g", path, k, r, want[r.Index], k, best[k])
				}
				if (r.Document != nil) != c.withText || (r.Document != nil && r.Document.Text != docs[r.Index]) {
					t.Errorf("%s %s: result %d document %+v", path, c.body, k, r.Document)
				}
			}
		}
	}
	// A pair longer than the max length is truncated, not refused.
	long := strings.Repeat("the whale ", 20)
	if code, _, b := post(t, s, "/v1/rerank", `{"query": "the sea", "documents": ["`+long+`"]}`); code != 200 {
		t.Errorf("a long document: %d %s", code, b)
	}
	for _, c := range []struct{ body, param string }{
		{`{"documents": ["a"]}`, "query"},
		{`{"query": "the", "documents": []}`, "documents"},
		{`{"query": "the"}`, "documents"},
		{`{"query": "the", "documents": ["a", "a", "a", "a", "a"]}`, "documents"},
		{`{"query": "the", "documents": ["a"], "top_n": -1}`, "top_n"},
		{`{"query": "the", "documents": [{"title": "a"}]}`, ""},
		{`{"query": "the", "documents": [null]}`, ""},
		{`{"query": "the", "documents": [3]}`, ""},
		{`{"query": "the", "documents": "a"}`, ""},
	} {
		code, _, b := post(t, s, "/v1/rerank", c.body)
		if code != 400 {
			t.Errorf("%s: status %d, want 400: %s", c.body, code, b)
			continue
		}
		if p := openAIErr(t, c.body, b); p != c.param {
			t.Errorf("%s: param %q, want %q", c.body, p, c.param)
		}
	}
	// Only a re-ranker serves it: an embedding model's 404 is OpenAI's.
	base, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	code, _, b := post(t, base, "/v1/rerank", `{"query": "a", "documents": ["b"]}`)
	if code != 404 {
		t.Fatalf("/v1/rerank on a base model: %d %s", code, b)
	}
	openAIErr(t, "/v1/rerank on a base model", b)
	if slices.Contains(base.Info().Endpoints, "POST /v1/rerank") || !slices.Contains(s.Info().Endpoints, "POST /v1/rerank") {
		t.Errorf("endpoints: base %v, reranker %v", base.Info().Endpoints, s.Info().Endpoints)
	}
}

// Options.Name (--served-model-name) is the name every route reports.
func TestServedModelName(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{Name: "org/my-model"})
	get := func(path string, out any) int {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code == 200 {
			if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
		return rec.Code
	}
	var info TEIInfo
	var mi ModelInfo
	var list OpenAIModelList
	if get("/info", &info) != 200 || info.ModelID != "org/my-model" || info.ServedModelName != "org/my-model" {
		t.Errorf("/info %+v", info)
	}
	if get("/v1/model", &mi) != 200 || mi.Name != "org/my-model" {
		t.Errorf("/v1/model %+v", mi)
	}
	if get("/v1/models", &list) != 200 || list.Object != "list" || len(list.Data) != 1 ||
		list.Data[0].ID != "org/my-model" || list.Data[0].Object != "model" || list.Data[0].OwnedBy == "" || list.Data[0].Created <= 0 {
		t.Errorf("/v1/models %+v", list)
	}
	// A request's "model" that differs is accepted (as TEI does); the
	// answer names the served model.
	var emb OpenAIEmbeddingsResponse
	code, _, b := post(t, s, "/v1/embeddings", `{"model": "text-embedding-3-small", "input": "the whale"}`)
	if code != 200 || json.Unmarshal(b, &emb) != nil || emb.Model != "org/my-model" {
		t.Errorf("/v1/embeddings: %d %s", code, b)
	}
}
