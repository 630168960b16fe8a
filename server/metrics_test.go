package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/roformer-go/roformer/model/roformer"
)

// scrape reads GET /metrics and parses it.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body.String())
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, rec.Body.String())
	}
	return fams
}

// metric finds the series of family name with the labels given (name=value
// pairs), or nil.
func metric(fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		return m
	}
	return nil
}

func TestMetrics(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{Name: "tiny"})
	for range 3 {
		if code, _, body := post(t, s, "/embed", `{"inputs": ["the whale", "the sea ship"]}`); code != 200 {
			t.Fatalf("/embed: %d %s", code, body)
		}
	}
	if code, _, _ := post(t, s, "/embed", `{"inputs": []}`); code != 400 {
		t.Fatalf("/embed with no inputs: %d", code)
	}
	if code, _, _ := post(t, s, "/v1/embeddings", `{"input": "the whale"}`); code != 200 {
		t.Fatalf("/v1/embeddings: %d", code)
	}
	post(t, s, "/no/such/route", `{}`)

	fams := scrape(t, s)
	count := func(route, status string) float64 {
		m := metric(fams, "te_request_count", "route", route, "status", status)
		if m == nil {
			return 0
		}
		return m.GetCounter().GetValue()
	}
	for _, c := range []struct {
		route, status string
		want          float64
	}{{"/embed", "200", 3}, {"/embed", "400", 1}, {"/v1/embeddings", "200", 1}, {"other", "404", 1}} {
		if got := count(c.route, c.status); got != c.want {
			t.Errorf("te_request_count{route=%q,status=%q} = %v, want %v", c.route, c.status, got, c.want)
		}
	}
	if m := metric(fams, "te_request_duration", "route", "/embed", "status", "200"); m == nil || m.GetHistogram().GetSampleCount() != 3 {
		t.Errorf("te_request_duration{/embed,200}: %v", m)
	}
	// Four answered model requests: three /embed, one /v1/embeddings.
	for _, name := range []string{"te_tokenization_duration", "te_queue_duration", "te_inference_duration"} {
		if m := metric(fams, name); m == nil || m.GetHistogram().GetSampleCount() != 4 || m.GetHistogram().GetSampleSum() < 0 {
			t.Errorf("%s: %v", name, m)
		}
	}
	// Sequential requests: each forward pass is one request's rows.
	bs, bt := metric(fams, "te_batch_next_size"), metric(fams, "te_batch_next_tokens")
	if bs == nil || bs.GetHistogram().GetSampleCount() != 4 || bs.GetHistogram().GetSampleSum() != 7 {
		t.Errorf("te_batch_next_size: %v", bs)
	}
	// [CLS] the whale [SEP] = 4, [CLS] the sea ship [SEP] = 5: 3×9 + 4.
	if bt == nil || bt.GetHistogram().GetSampleCount() != 4 || bt.GetHistogram().GetSampleSum() != 31 {
		t.Errorf("te_batch_next_tokens: %v", bt)
	}
	if m := metric(fams, "te_queue_size"); m == nil || m.GetGauge().GetValue() != 0 {
		t.Errorf("te_queue_size: %v", m)
	}
	if fams["go_goroutines"] == nil {
		t.Error("no Go runtime metrics")
	}
	// The model's weights: the test model's own float32 (it was not
	// loaded from a file), every byte of them.
	want := int64(0)
	for _, p := range s.model.Weights() {
		want += 4 * int64(len(p.Data))
	}
	var sum float64
	for _, form := range []string{"float32", "mapped", "stored", "prepared"} {
		m := metric(fams, "roformer_model_weight_bytes", "form", form, "precision", string(s.model.Precision()))
		if m == nil {
			t.Fatalf("no roformer_model_weight_bytes{form=%q}", form)
		}
		sum += m.GetGauge().GetValue()
	}
	if w := metric(fams, "roformer_model_weight_bytes", "form", "float32"); w.GetGauge().GetValue() != float64(want) || sum < float64(want) {
		t.Errorf("roformer_model_weight_bytes: float32 %v, all forms %v; the weights are %d bytes", w.GetGauge().GetValue(), sum, want)
	}

	// A second server in the same process has its own counts.
	s2, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	if got := metric(scrape(t, s2), "te_request_count", "route", "/embed"); got != nil {
		t.Errorf("a new server already counts /embed: %v", got)
	}
}

// The timing headers of TEI on the embedding routes' answers.
func TestTimingHeaders(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	for _, c := range []struct {
		path, body    string
		chars, tokens int
	}{
		{"/embed", `{"inputs": ["the whale", "the sea ship"]}`, 21, 9},
		{"/v1/embed", `{"inputs": [{"text": "the whale", "text_pair": "a ship"}]}`, 15, 7},
		{"/v1/embeddings", `{"input": "the whale"}`, 9, 4},
	} {
		code, h, body := post(t, s, c.path, c.body)
		if code != 200 {
			t.Fatalf("%s: %d %s", c.path, code, body)
		}
		get := func(name string) int {
			v, err := strconv.Atoi(h.Get(name))
			if err != nil || v < 0 {
				t.Errorf("%s: header %s = %q", c.path, name, h.Get(name))
			}
			return v
		}
		tok, queue, inf := get("x-tokenization-time"), get("x-queue-time"), get("x-inference-time")
		// Each header truncates to whole milliseconds: the sum's floor is at
		// least the parts' floors added and at most 2 above.
		if compute := get("x-compute-time"); compute < tok+queue+inf || compute > tok+queue+inf+2 {
			t.Errorf("%s: x-compute-time %d, the parts %d+%d+%d", c.path, compute, tok, queue, inf)
		}
		if total := get("x-total-time"); total+3 < tok+queue+inf || total > 60_000 {
			t.Errorf("%s: x-total-time %d, the parts %d+%d+%d", c.path, total, tok, queue, inf)
		}
		if got := get("x-compute-characters"); got != c.chars {
			t.Errorf("%s: x-compute-characters %d, want %d", c.path, got, c.chars)
		}
		if got := get("x-compute-tokens"); got != c.tokens {
			t.Errorf("%s: x-compute-tokens %d, want %d", c.path, got, c.tokens)
		}
	}
	// Errors and routes without a forward pass have none.
	code, h, _ := post(t, s, "/embed", `{"inputs": []}`)
	if code != 400 || h.Get("x-compute-time") != "" {
		t.Errorf("a 400 has timing headers: %v", h)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/info", nil))
	if rec.Header().Get("x-total-time") != "" {
		t.Errorf("GET /info has timing headers: %v", rec.Header())
	}
}

// Loading answers 503 (TEI's Unhealthy) until Ready, then the server answers.
func TestLoading(t *testing.T) {
	l := NewLoading()
	for _, c := range []struct{ method, path string }{{"GET", "/health"}, {"POST", "/embed"}, {"GET", "/info"}, {"POST", "/v1/embeddings"}, {"GET", "/metrics"}} {
		rec := httptest.NewRecorder()
		l.ServeHTTP(rec, jsonRequest(c.method, c.path, strings.NewReader(`{"inputs": "the whale"}`)))
		var e TEIError
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != 503 || e != (TEIError{"model is loading", "Unhealthy"}) {
			t.Errorf("%s %s while loading: %d %s", c.method, c.path, rec.Code, rec.Body.String())
		}
	}
	rec := httptest.NewRecorder()
	l.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "loading") {
		t.Errorf("GET /healthz while loading: %d %s", rec.Code, rec.Body.String())
	}
	if l.Server() != nil {
		t.Error("a server before Ready")
	}
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	l.Ready(s)
	rec = httptest.NewRecorder()
	l.ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	if rec.Code != 200 {
		t.Errorf("GET /health once ready: %d", rec.Code)
	}
	if code, _, body := post(t, l, "/embed", `{"inputs": "the whale"}`); code != 200 {
		t.Errorf("/embed once ready: %d %s", code, body)
	}
	if l.Server() != s {
		t.Error("Server() is not the server handed to Ready")
	}
}

// queueSize reads the te_queue_size gauge.
func queueSize(t *testing.T, s *Server) float64 {
	t.Helper()
	m := metric(scrape(t, s), "te_queue_size")
	if m == nil {
		t.Fatal("no te_queue_size")
	}
	return m.GetGauge().GetValue()
}

// The metrics' queue gauge follows every enqueue and dequeue: up as inputs
// queue, down as a batch takes them or their client leaves.
func TestQueueSizeGauge(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxBatchRequests: 2})
	release := make(chan struct{})
	var once sync.Once
	s.beforeBatch = func() { once.Do(func() { <-release }) }
	var batches []int
	var mu sync.Mutex
	s.afterForward = func(rows, _ int) { mu.Lock(); batches = append(batches, rows); mu.Unlock() }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, body := range []string{`{"inputs": ["the", "a", "the sea"]}`, `{"inputs": "the whale"}`} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := jsonRequest("POST", "/embed", strings.NewReader(body))
			if i == 1 {
				r = r.WithContext(ctx)
			}
			s.ServeHTTP(httptest.NewRecorder(), r)
		}()
		waitFor(t, func() bool { return queueSize(t, s) == float64(3+i) })
	}
	cancel() // the second client leaves: its input is dropped, not run
	waitFor(t, func() bool { return len(s.slots) == 1 })
	close(release)
	wg.Wait()
	if got := queueSize(t, s); got != 0 {
		t.Errorf("te_queue_size after every request: %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 2 || batches[0]+batches[1] != 3 {
		t.Errorf("batches of %v rows, want 2 batches of the first request's 3 inputs", batches)
	}
}
