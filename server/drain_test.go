package server

import (
	"context"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roformer-go/roformer/model/roformer"
)

// Draining: the requests in flight are answered, new ones get 503 in their
// route's error shape (Connection: close), /health 503, /healthz and
// /metrics 200; Drain returns once nothing is in flight, and after Close
// nothing is left: no goroutine, no slot, nothing queued.
func TestDrain(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxBatchRequests: 2})
	if code, _, body := post(t, s, "/embed", `{"inputs": "the sea"}`); code != 200 { // the scheduler runs
		t.Fatalf("warm-up: %d %s", code, body)
	}
	before := runtime.NumGoroutine()

	release := make(chan struct{})
	var once sync.Once
	s.beforeBatch = func() { once.Do(func() { <-release }) }
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, _ = post(t, s, "/embed", `{"inputs": ["the whale", "a ship"]}`)
		}()
	}
	waitFor(t, func() bool { return s.InFlight() == 3 && len(s.slots) == 3 && s.preparing.Load() == 0 })
	// te_queue_size counts the inputs as they are queued, before any batch
	// is formed (the scheduler is held).
	waitFor(t, func() bool { return queueSize(t, s) == 6 })

	drained := make(chan error, 1)
	go func() { drained <- s.Drain(context.Background()) }()
	waitFor(t, s.Draining)
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/embed", `{"inputs": "the whale"}`, `{"error":"the server is shutting down: it takes no new requests","error_type":"Unhealthy"}`},
		{"GET", "/health", ``, `{"error":"the server is shutting down: it takes no new requests","error_type":"Unhealthy"}`},
		{"GET", "/info", ``, `{"error":"the server is shutting down: it takes no new requests","error_type":"Unhealthy"}`},
		{"POST", "/v1/embed", `{"inputs": "the whale"}`, `{"error":"the server is shutting down: it takes no new requests"}`},
		{"POST", "/v1/embeddings", `{"input": "the whale"}`, `{"error":{"message":"the server is shutting down: it takes no new requests","type":"server_error","param":null,"code":null}}`},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, jsonRequest(c.method, c.path, strings.NewReader(c.body)))
		h := rec.Header()
		if rec.Code != 503 || h.Get("Connection") != "close" || h.Get("Retry-After") != "1" || strings.TrimSpace(rec.Body.String()) != c.want {
			t.Errorf("%s %s while draining: %d %v %s", c.method, c.path, rec.Code, h, rec.Body)
		}
	}
	var hz map[string]string
	if code, _ := call(t, s, "GET", "/healthz", "", &hz); code != 200 || hz["status"] != "draining" {
		t.Errorf("GET /healthz while draining: %d %v", code, hz)
	}
	fams := scrape(t, s) // GET /metrics answers
	if m := metric(fams, "te_request_count", "route", "/embed", "status", "503"); m == nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("te_request_count{/embed,503}: %v", m)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v with 3 requests in flight", err)
	case <-time.After(20 * time.Millisecond):
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Drain(ctx); err != context.Canceled {
		t.Errorf("Drain with an ended context and requests in flight: %v", err)
	}

	close(release)
	wg.Wait()
	if err := <-drained; err != nil {
		t.Errorf("Drain: %v", err)
	}
	for i, c := range codes {
		if c != 200 {
			t.Errorf("request %d in flight at Drain: %d, want 200", i, c)
		}
	}
	if got := queueSize(t, s); got != 0 {
		t.Errorf("te_queue_size after the drain: %v", got)
	}
	if err := s.Drain(context.Background()); err != nil { // nothing in flight: at once
		t.Errorf("second Drain: %v", err)
	}
	s.Close()
	if len(s.slots) != 0 || s.InFlight() != 0 {
		t.Errorf("after the drain: %d slots held, %d in flight", len(s.slots), s.InFlight())
	}
	// The scheduler is gone too; the count may include goroutines of the
	// runtime or of the kernels that come and go, so wait for it.
	waitFor(t, func() bool { return runtime.NumGoroutine() < before })
}

// The error_type of every TEI-shaped error is one of TEI's ErrorType
// values, spelt as TEI serializes them (router/src/lib.rs: Unhealthy,
// Backend, Overloaded, Validation, Tokenizer, Empty), on every route that
// answers in TEI's shape.
func TestErrorTypesPerRoute(t *testing.T) {
	tei := map[string]bool{"Unhealthy": true, "Backend": true, "Overloaded": true, "Validation": true, "Tokenizer": true, "Empty": true}
	base, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxInputs: 2, MaxLength: 6})
	cls, _, _ := newServer(t, roformer.HeadSequenceCls, []string{"x"}, Options{MaxInputs: 2, MaxLength: 6})
	tok, _, _ := newServer(t, roformer.HeadTokenCls, []string{"O", "B"}, Options{MaxInputs: 2})
	qa, _, _ := newServer(t, roformer.HeadQA, nil, Options{MaxInputs: 2})
	gen, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{MaxLength: 6})
	long := `"the sea the sea the sea the sea"`
	for _, c := range []struct {
		s          *Server
		path, body string
		status     int
		kind       string
	}{
		{base, "/embed", `{"inputs": []}`, 400, "Empty"},
		{base, "/embed", `{"inputs": ["a", "b", "c"]}`, 413, "Validation"},
		{base, "/embed", `{"inputs": ` + long + `}`, 413, "Validation"},
		{base, "/embed", `{"inputs": 7}`, 422, "Validation"},
		{base, "/embed", `{"inputs": "a"`, 422, "Validation"},
		{base, "/predict", `{"inputs": "a"}`, 404, "Backend"},
		{base, "/rerank", `{"query": "a", "texts": ["b"]}`, 404, "Backend"},
		{base, "/similarity", `{"inputs": {"source_sentence": "a", "sentences": []}}`, 400, "Empty"},
		{base, "/similarity", `{"inputs": {"sentences": ["a"]}}`, 422, "Validation"},
		{base, "/tokenize", `{"inputs": []}`, 400, "Empty"},
		{base, "/tokenize", `{"inputs": ["a", "b", "c"]}`, 413, "Validation"},
		{base, "/decode", `{"ids": [99]}`, 422, "Tokenizer"},
		{base, "/decode", `{}`, 422, "Validation"},
		{base, "/generate", `{"inputs": "a"}`, 404, "Backend"},
		{base, "/v1/token-classification", `{"inputs": "a"}`, 404, "Backend"},
		{base, "/v1/question-answering", `{"question": "a", "context": "b"}`, 404, "Backend"},
		{cls, "/predict", `{"inputs": []}`, 400, "Empty"},
		{cls, "/predict", `{"inputs": ["a", "b", "c"]}`, 422, "Validation"},
		{cls, "/predict", `{"inputs": ` + long + `}`, 413, "Validation"},
		{cls, "/rerank", `{"query": "a", "texts": []}`, 400, "Empty"},
		{cls, "/rerank", `{"texts": ["a"]}`, 422, "Validation"},
		{tok, "/v1/token-classification", `{"inputs": []}`, 400, "Empty"},
		{tok, "/v1/token-classification", `{"inputs": "a", "aggregation_strategy": "most"}`, 422, "Validation"},
		{qa, "/v1/question-answering", `{"question": "", "context": "the sea"}`, 422, "Validation"},
		{qa, "/v1/question-answering", `[]`, 400, "Empty"},
		{gen, "/generate", `{"inputs": "the", "parameters": {"max_new_tokens": 0}}`, 422, "Validation"},
	} {
		code, kind := teiCall(t, c.s, c.path, c.body, nil)
		if code != c.status || kind != c.kind || !tei[kind] {
			t.Errorf("%s %s: %d %q, want %d %q", c.path, c.body, code, kind, c.status, c.kind)
		}
	}
	// While draining, every TEI route answers Unhealthy.
	go base.Drain(context.Background())
	waitFor(t, base.Draining)
	for _, p := range []string{"/embed", "/predict", "/rerank", "/similarity", "/tokenize", "/decode", "/generate", "/v1/token-classification", "/v1/question-answering"} {
		if code, kind := teiCall(t, base, p, `{}`, nil); code != 503 || kind != "Unhealthy" {
			t.Errorf("%s while draining: %d %q", p, code, kind)
		}
	}
}
