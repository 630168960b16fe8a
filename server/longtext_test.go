package server

import (
	"encoding/json"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
)

// A text of 8 MB (1.4 M tokens) sent to every route that tokenizes it is
// refused with its length, or truncated when asked, in memory bounded by
// the limit: the tokenizer counts the tokens past it without keeping them
// (tokenizer.EncodeOptions.Limit) and stops at the kept ones when it cuts
// at the end.
func TestLongTextBoundedByLimit(t *testing.T) {
	m, tok := testmodel.Tiny{Words: words, Seed: 1, MaxPositions: 64}.Build(t)
	s, err := New(m, tok, Options{MaxBodyBytes: 16 << 20, MaxReadingBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("whale ", 8<<20/6)
	q, _ := json.Marshal(text)
	for _, c := range []struct {
		path, body string
		code       int
		says       string
	}{
		{"/embed", `{"inputs": ` + string(q) + `}`, 413, "1398103 tokens; the limit is 64"},
		{"/embed", `{"inputs": ` + string(q) + `, "truncate": true}`, 200, ""},
		{"/v1/embeddings", `{"input": ` + string(q) + `}`, 400, "1398103 tokens"},
		{"/v1/embed", `{"inputs": [{"text": ` + string(q) + `}]}`, 200, ""},
		{"/v1/tokenize", `{"inputs": [{"text": ` + string(q) + `}]}`, 400, "tokens in the first 1 inputs"},
		{"/tokenize", `{"inputs": ` + string(q) + `}`, 413, "tokens in the first 1 inputs"},
		{"/v1/fill-mask", `{"inputs": [{"text": ` + string(q) + `}]}`, 400, "1398103 tokens; the limit is 64"},
	} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, jsonRequest("POST", c.path, strings.NewReader(c.body)))
		runtime.ReadMemStats(&after)
		if rec.Code == 404 {
			t.Errorf("%s: no such route", c.path)
			continue
		}
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.says) {
			t.Errorf("%s: status %d %.300s; want %d saying %q", c.path, rec.Code, rec.Body, c.code, c.says)
		}
		// The body read and decoded (encoding/json's buffer doubles: about
		// 10× the body) and the tokenizer's chunk; whole, the text's tokens
		// alone were over 1 GB.
		if n := after.TotalAlloc - before.TotalAlloc; n > 160<<20 {
			t.Errorf("%s: %d MB allocated for an 8 MB text, want ≤ 160", c.path, n>>20)
		}
	}
}
