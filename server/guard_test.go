package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/model/roformer"
)

// send answers one request with headers h ("Host" sets the request's
// Host), returning the status, the headers and the body.
func send(t testing.TB, s http.Handler, method, path, body string, h map[string]string) (int, http.Header, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range h {
		if k == "Host" {
			r.Host = v
		} else {
			r.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, r)
	return rec.Code, rec.Header(), rec.Body.String()
}

// teiError decodes TEI's {"error", "error_type"} (failing the test for any
// other body).
func teiError(t testing.TB, what, body string) (msg, kind string) {
	t.Helper()
	var e map[string]string
	if err := json.Unmarshal([]byte(body), &e); err != nil || e["error"] == "" || e["error_type"] == "" || len(e) != 2 {
		t.Fatalf("%s: not TEI's error: %s", what, body)
	}
	return e["error"], e["error_type"]
}

// healthy checks that GET /health answers 200.
func healthy(t testing.TB, s http.Handler, after string) {
	t.Helper()
	if code, _, body := send(t, s, "GET", "/health", "", nil); code != 200 {
		t.Fatalf("GET /health after %s: %d %s", after, code, body)
	}
}

// allocated runs fn and returns the bytes the process allocated meanwhile.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// The hostile generations are refused with 422 before anything is
// allocated for them (num_beams 1e6 was a fatal out-of-memory, 5000 took
// 35 s and 1 GB, max_new_tokens 2^63−1 a 500 "makeslice"), each naming
// the field, the value and the limit; /health answers after each, and a
// normal beam search (num_beams 4) still generates.
func TestGenerateBounds(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadCausalLM, nil, Options{MaxBatchTokens: 64})
	for _, c := range []struct {
		name, params string
		field, value string
		limit        string
	}{
		{"num_beams 1e6", `{"num_beams": 1000000}`, "num_beams", "1000000", "8"},
		{"num_beams 5000", `{"num_beams": 5000}`, "num_beams", "5000", "8"},
		{"max_new_tokens 2^63-1", `{"max_new_tokens": 9223372036854775807}`, "max_new_tokens", "9223372036854775807", "256"},
		{"max_new_tokens 257", `{"max_new_tokens": 257}`, "max_new_tokens", "257", "256"},
		{"both", `{"num_beams": 1000000, "max_new_tokens": 9223372036854775807}`, "max_new_tokens", "9223372036854775807", "256"},
		{"beams × length", `{"num_beams": 8, "max_new_tokens": 20}`, "num_beams", "8 × (2 + 20) = 176", "64"},
	} {
		body := `{"inputs": "the whale", "parameters": ` + c.params + `}`
		var code int
		var msg, kind string
		n := allocated(func() {
			var b string
			code, _, b = send(t, s, "POST", "/generate", body, map[string]string{"Content-Type": "application/json"})
			msg, kind = teiError(t, c.name, b)
		})
		if code != 422 || kind != "Validation" || !strings.Contains(msg, c.field) || !strings.Contains(msg, c.value) || !strings.Contains(msg, c.limit) {
			t.Errorf("%s: %d %s %q; want 422 Validation naming %s, %s and the limit %s", c.name, code, kind, msg, c.field, c.value, c.limit)
		}
		if n > 4<<20 {
			t.Errorf("%s: %d bytes allocated for a refusal", c.name, n)
		}
		healthy(t, s, c.name)
	}
	// The streaming flag, and the exact body (its "unilm" beside
	// "parameters" is an unknown field, ignored as TGI ignores them).
	if code, _, b := send(t, s, "POST", "/generate", `{"inputs": "the", "unilm": true, "parameters": {"num_beams": 1000000}}`, map[string]string{"Content-Type": "application/json"}); code != 422 {
		t.Errorf("the issue's body: %d %s", code, b)
	}
	// num_beams 4 generates Generate's beam search.
	_, want := generateAlone(t, m, tok, "the ship", generate.Options{MaxNewTokens: 4, EOS: -1, Strategy: generate.Beam, NumBeams: 4, LengthPenalty: 1}, false)
	var res GenerateResponse
	if code, kind := teiCall(t, s, "/generate", `{"inputs": "the ship", "parameters": {"max_new_tokens": 4, "num_beams": 4}}`, &res); code != 200 || res.GeneratedText != want {
		t.Errorf("num_beams 4: %d %s %q, want %q", code, kind, res.GeneratedText, want)
	}
	// Without max_new_tokens, a request gets min(20, the server's limit).
	small, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{MaxNewTokens: 3})
	_, want = generateAlone(t, m, tok, "the", generate.Options{MaxNewTokens: 3, EOS: -1}, false)
	if code, kind := teiCall(t, small, "/generate", `{"inputs": "the"}`, &res); code != 200 || res.GeneratedText != want {
		t.Errorf("default max_new_tokens under a limit of 3: %d %s %q, want %q", code, kind, res.GeneratedText, want)
	}
	// A beam search's beams × vocabulary × length against MaxBeamWork
	// (14 ids here); greedy decoding is not bound by it.
	work, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{MaxBeamWork: 14 * 2 * 6})
	code, _, b := send(t, work, "POST", "/generate", `{"inputs": "the whale", "parameters": {"num_beams": 3, "max_new_tokens": 4}}`, map[string]string{"Content-Type": "application/json"})
	if msg, kind := teiError(t, "beam work", b); code != 422 || kind != "Validation" || !strings.Contains(msg, "3 × 14 × (2 + 4) = 252") || !strings.Contains(msg, "168") {
		t.Errorf("over MaxBeamWork: %d %s %q", code, kind, msg)
	}
	for _, p := range []string{`{"num_beams": 2, "max_new_tokens": 4}`, `{"max_new_tokens": 20}`} {
		if code, _, b := send(t, work, "POST", "/generate", `{"inputs": "the whale", "parameters": `+p+`}`, map[string]string{"Content-Type": "application/json"}); code != 200 {
			t.Errorf("within MaxBeamWork, %s: %d %s", p, code, b)
		}
	}
	// The memory estimate (roformer.Model.GenerateCost) against
	// MaxGenerateBytes.
	tight, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{MaxGenerateBytes: 1 << 10})
	code, _, b = send(t, tight, "POST", "/generate", `{"inputs": "the", "parameters": {"max_new_tokens": 2}}`, map[string]string{"Content-Type": "application/json"})
	if msg, kind := teiError(t, "memory", b); code != 422 || kind != "Validation" || !strings.Contains(msg, "MiB") {
		t.Errorf("over MaxGenerateBytes: %d %s %q", code, kind, msg)
	}
}

// The other routes' sizes: fill-mask's masks and top_k, tokenize's tokens,
// question answering's top_k and windows.
func TestRequestBounds(t *testing.T) {
	lm, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{MaxMasks: 3, MaxInputs: 2, MaxLength: 8})
	js := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct {
		path, body string
		status     int
		msg        string
	}{
		{"/v1/fill-mask", `{"inputs": ["the [MASK] [MASK]", "[MASK] [MASK] sea"]}`, 400, "4 [MASK] tokens in the first 2 inputs; the limit is 3"},
		{"/v1/fill-mask", `{"inputs": ["the [MASK]"], "top_k": 101}`, 400, "top_k 101: want 1 to 100"},
		{"/v1/fill-mask", `{"inputs": ["the [MASK]"], "top_k": 9223372036854775807}`, 400, "top_k 9223372036854775807"},
		{"/v1/tokenize", `{"inputs": ["` + strings.Repeat("the ", 20) + `"]}`, 400, "22 tokens in the first 1 inputs; the limit is 16"},
		{"/tokenize", `{"inputs": "` + strings.Repeat("the ", 20) + `"}`, 413, "22 tokens in the first 1 inputs; the limit is 16"},
	} {
		code, _, b := send(t, lm, "POST", c.path, c.body, js)
		if code != c.status || !strings.Contains(b, c.msg) {
			t.Errorf("%s %.60s: %d %s; want %d %q", c.path, c.body, code, b, c.status, c.msg)
		}
		healthy(t, lm, c.path)
	}
	if code, _, b := send(t, lm, "POST", "/v1/fill-mask", `{"inputs": ["the [MASK] [MASK]", "a [MASK]"], "top_k": 2}`, js); code != 200 {
		t.Errorf("3 masks: %d %s", code, b)
	}

	qa, _, _ := newServer(t, roformer.HeadQA, nil, Options{MaxInputs: 16}) // 16 × 32 tokens a request
	ctx := strings.Repeat("the sea a ship . ", 40)                         // 200 tokens
	for _, c := range []struct {
		body   string
		status int
		msg    string
	}{
		{`{"question": "the", "context": "the sea", "top_k": 101}`, 422, "top_k 101 > the limit 100"},
		// max_seq_len 16: 12 context tokens a window; doc_stride 11
		// advances one token a window: 189 windows of 16 tokens.
		{`{"question": "the", "context": "` + ctx + `", "max_seq_len": 16, "doc_stride": 11}`, 413, "189 windows of up to 16 tokens; with the inputs before it, 3024 tokens; the limit is 512"},
	} {
		code, _, b := send(t, qa, "POST", "/v1/question-answering", c.body, js)
		if code != c.status || !strings.Contains(b, c.msg) {
			t.Errorf("QA %.60s: %d %s; want %d %q", c.body, code, b, c.status, c.msg)
		}
	}
	if code, _, b := send(t, qa, "POST", "/v1/question-answering", `{"question": "the", "context": "`+ctx+`", "max_seq_len": 16, "doc_stride": 2}`, js); code != 200 {
		t.Errorf("QA in 20 windows: %d %s", code, b)
	}
}

// Only the routes the model can serve exist: on a masked-LM model
// /generate is unknown (404, the hostile beam search included) and
// not listed by /info or /v1/model; on a causal-LM model it is.
func TestRoutesForTheModel(t *testing.T) {
	lm, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	code, _, b := send(t, lm, "POST", "/generate", `{"inputs": "the sea", "parameters": {"unilm": true, "num_beams": 1000000}}`, map[string]string{"Content-Type": "application/json"})
	if msg, kind := teiError(t, "generate on a masked-LM", b); code != 404 || kind != "Backend" || !strings.Contains(msg, "needs a generator") {
		t.Errorf("POST /generate on a masked-LM model: %d %s %q", code, kind, msg)
	}
	healthy(t, lm, "generate on a masked-LM")
	if slices.Contains(lm.TEIInfo().Routes, "POST /generate") || slices.Contains(lm.Info().Endpoints, "POST /generate") {
		t.Errorf("a masked-LM model lists /generate: %v", lm.TEIInfo().Routes)
	}
	gen, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{})
	if !slices.Contains(gen.TEIInfo().Routes, "POST /generate") {
		t.Errorf("a causal-LM model does not list /generate: %v", gen.TEIInfo().Routes)
	}
	// Every route that /info lists answers something else than 404, and
	// every route this server knows that /info does not list is a 404.
	for _, s := range []*Server{lm, gen} {
		listed := s.TEIInfo().Routes
		for _, e := range s.routes {
			name := e.method + " " + e.path
			code, _, _ := send(t, s, e.method, e.path, `{}`, map[string]string{"Content-Type": "application/json"})
			if slices.Contains(listed, name) == (code == 404) {
				t.Errorf("%s %s: listed %v, status %d", s.model.Head, name, slices.Contains(listed, name), code)
			}
		}
	}
}

// postRoutes are the POST routes that s serves.
func postRoutes(s *Server) []string {
	var out []string
	for _, p := range s.TEIInfo().Routes {
		if path, ok := strings.CutPrefix(p, "POST "); ok {
			out = append(out, path)
		}
	}
	return out
}

// Every POST route takes application/json only: text/plain (what a
// browser sends cross-site without a preflight), a form, no Content-Type
// and a charset other than UTF-8 get 415, on every route of every head;
// application/json with charset=utf-8 is JSON.
func TestContentType(t *testing.T) {
	heads := []struct {
		head   roformer.Head
		labels []string
	}{{roformer.HeadMaskedLM, nil}, {roformer.HeadCausalLM, nil}, {roformer.HeadSequenceCls, []string{"score"}}, {roformer.HeadTokenCls, []string{"O", "B"}}, {roformer.HeadQA, nil}}
	seen := map[string]bool{}
	for _, h := range heads {
		s, _, _ := newServer(t, h.head, h.labels, Options{})
		for _, path := range postRoutes(s) {
			seen[path] = true
			for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", "application/json; charset=latin1", "application/jsonp"} {
				h := map[string]string{}
				if ct != "" {
					h["Content-Type"] = ct
				}
				code, _, b := send(t, s, "POST", path, `{"inputs": "the whale"}`, h)
				if code != http.StatusUnsupportedMediaType || !strings.Contains(b, "application/json") {
					t.Errorf("%s %s with Content-Type %q: %d %s", s.model.Head, path, ct, code, b)
				}
			}
			if code, _, b := send(t, s, "POST", path, `{}`, map[string]string{"Content-Type": "application/json; charset=utf-8"}); code == http.StatusUnsupportedMediaType {
				t.Errorf("%s %s with charset=utf-8: %d %s", s.model.Head, path, code, b)
			}
		}
	}
	if len(seen) != 19 {
		t.Errorf("%d POST routes checked, want all 19: %v", len(seen), seen)
	}
}

// The API key: 401 (TEI's shape, WWW-Authenticate) without it, with
// another, or with another scheme, on every route but the probes and the
// page; 200 with it.
func TestAPIKey(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{APIKey: "s3cret key"})
	js := "application/json"
	for _, c := range []struct {
		name, auth string
		want       int
	}{
		{"none", "", 401},
		{"wrong", "Bearer s3cret", 401},
		{"longer", "Bearer s3cret key!", 401},
		{"another scheme", "Basic s3cret key", 401},
		{"no scheme", "s3cret key", 401},
		{"right", "Bearer s3cret key", 200},
		{"scheme in lower case", "bearer s3cret key", 200},
	} {
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/embed", `{"inputs": "the whale"}`},
			{"POST", "/v1/fill-mask", `{"inputs": "the [MASK]"}`},
			{"POST", "/v1/embeddings", `{"input": "the whale"}`},
			{"GET", "/info", ""},
			{"GET", "/v1/model", ""},
			{"GET", "/metrics", ""},
		} {
			h := map[string]string{"Content-Type": js}
			if c.auth != "" {
				h["Authorization"] = c.auth
			}
			code, hdr, b := send(t, s, r.method, r.path, r.body, h)
			if code != c.want {
				t.Errorf("%s %s, key %s: %d %.100s; want %d", r.method, r.path, c.name, code, b, c.want)
				continue
			}
			if code == 401 {
				msg, kind := teiError(t, r.path, b)
				if kind != "Unauthorized" || !strings.Contains(msg, "Bearer") || hdr.Get("WWW-Authenticate") == "" || strings.Contains(msg, "s3cret") {
					t.Errorf("%s, key %s: %q %q, WWW-Authenticate %q", r.path, c.name, kind, msg, hdr.Get("WWW-Authenticate"))
				}
			}
		}
	}
	for _, p := range []string{"/health", "/healthz", "/", "/web/app.js"} {
		if code, _, b := send(t, s, "GET", p, "", nil); code != 200 {
			t.Errorf("GET %s without the key: %d %.100s", p, code, b)
		}
	}
	// A key is compared whole: none of its prefixes passes.
	for i := range len("s3cret key") {
		if code, _, _ := send(t, s, "GET", "/info", "", map[string]string{"Authorization": "Bearer " + "s3cret key"[:i]}); code != 401 {
			t.Errorf("prefix %q: %d", "s3cret key"[:i], code)
		}
	}
}

// CORS: by default no CORS header at all (so a page of another origin
// cannot read the answers), and a preflight is not answered as one; with
// origins listed, those get Access-Control-Allow-Origin and their
// preflight 204 with the methods and headers; others get neither (403 for
// the preflight); "*" allows any.
func TestCORS(t *testing.T) {
	preflight := map[string]string{"Origin": "https://a.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}
	post := map[string]string{"Origin": "https://a.example", "Content-Type": "application/json"}
	def, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	for _, h := range []map[string]string{preflight, post} {
		method := "OPTIONS"
		if h["Content-Type"] != "" {
			method = "POST"
		}
		code, hdr, _ := send(t, def, method, "/embed", `{"inputs": "the"}`, h)
		for k := range hdr {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("default %s: header %s: %s", method, k, hdr.Get(k))
			}
		}
		if method == "OPTIONS" && code == 204 {
			t.Errorf("default preflight: 204")
		}
	}

	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{CORSAllowOrigins: []string{"https://a.example", "http://localhost:3000"}, APIKey: "k"})
	code, hdr, _ := send(t, s, "OPTIONS", "/embed", "", preflight) // no key: a preflight carries none
	if code != 204 || hdr.Get("Access-Control-Allow-Origin") != "https://a.example" || !strings.Contains(hdr.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(hdr.Get("Access-Control-Allow-Headers"), "Authorization") || !strings.Contains(hdr.Get("Access-Control-Allow-Headers"), "Content-Type") || hdr.Get("Vary") != "Origin" {
		t.Errorf("preflight of a listed origin: %d %v", code, hdr)
	}
	post["Authorization"] = "Bearer k"
	code, hdr, _ = send(t, s, "POST", "/embed", `{"inputs": "the"}`, post)
	if code != 200 || hdr.Get("Access-Control-Allow-Origin") != "https://a.example" {
		t.Errorf("POST of a listed origin: %d %v", code, hdr)
	}
	preflight["Origin"], post["Origin"] = "https://evil.example", "https://evil.example"
	if code, hdr, _ := send(t, s, "OPTIONS", "/embed", "", preflight); code != 403 || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", code, hdr)
	}
	if _, hdr, _ := send(t, s, "POST", "/embed", `{"inputs": "the"}`, post); hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("POST of another origin: %v", hdr)
	}
	star, _, _ := newServer(t, roformer.HeadBase, nil, Options{CORSAllowOrigins: []string{"*"}})
	if code, hdr, _ := send(t, star, "OPTIONS", "/embed", "", preflight); code != 204 || hdr.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight with *: %d %v", code, hdr)
	}
}

// DNS rebinding: with LoopbackOnly, a request whose Host is not a loopback
// name or address gets 403, on every route; loopback ones, with any port,
// are answered. Without it every Host is.
func TestLoopbackHost(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{LoopbackOnly: true})
	for _, c := range []struct {
		host string
		ok   bool
	}{
		{"localhost", true}, {"localhost:8080", true}, {"LocalHost.:80", true}, {"127.0.0.1", true}, {"127.0.0.1:8080", true},
		{"127.1.2.3:9", true}, {"[::1]:8080", true}, {"[::1]", true},
		{"evil.example", false}, {"evil.example:8080", false}, {"localhost.evil.example", false}, {"127.0.0.1.evil.example", false},
		{"10.0.0.1:8080", false}, {"0.0.0.0:8080", false}, {"[::]:80", false}, {"", false},
	} {
		for _, r := range []struct{ method, path, body string }{{"GET", "/health", ""}, {"GET", "/info", ""}, {"POST", "/embed", `{"inputs": "the"}`}} {
			code, _, b := send(t, s, r.method, r.path, r.body, map[string]string{"Host": c.host, "Content-Type": "application/json"})
			if (code == 200) != c.ok || (!c.ok && code != 403) {
				t.Errorf("Host %q, %s %s: %d %.120s", c.host, r.method, r.path, code, b)
			}
			if !c.ok {
				if msg, _ := teiError(t, c.host, b); !strings.Contains(msg, "loopback") {
					t.Errorf("Host %q: %q", c.host, msg)
				}
			}
		}
	}
	open, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	if code, _, _ := send(t, open, "GET", "/info", "", map[string]string{"Host": "evil.example"}); code != 200 {
		t.Errorf("without LoopbackOnly, Host evil.example: %d", code)
	}
}

// Fill-mask and generation go through the bounded admission: with every
// slot held by requests waiting for the model, the next gets 429 with
// Retry-After; they are all answered once the model is free.
func TestAdmissionEveryRoute(t *testing.T) {
	for _, c := range []struct {
		head       roformer.Head
		path, body string
	}{
		{roformer.HeadMaskedLM, "/v1/fill-mask", `{"inputs": "the [MASK]"}`},
		{roformer.HeadCausalLM, "/generate", `{"inputs": "the", "parameters": {"max_new_tokens": 2}}`},
	} {
		const slots = 3
		s, _, _ := newServer(t, c.head, nil, Options{MaxConcurrentRequests: slots})
		s.gate <- struct{}{} // the model is busy
		var wg sync.WaitGroup
		for range slots {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code, _, body := post(t, s, c.path, c.body); code != 200 {
					t.Errorf("%s admitted: %d %s", c.path, code, body)
				}
			}()
		}
		waitFor(t, func() bool { return len(s.slots) == slots })
		code, h, body := post(t, s, c.path, c.body)
		if code != 429 || h.Get("Retry-After") != "1" {
			t.Errorf("%s beyond %d: %d %s", c.path, slots, code, body)
		}
		healthy(t, s, c.path+" beyond the bound")
		<-s.gate
		wg.Wait()
		waitFor(t, func() bool { return len(s.slots) == 0 })
	}
}

// Clients that send half a body hold no admission slot: with as many of
// them as there are slots, a real request is answered 200 (it was 429
// for the body timeout, renewed by each new half-sent body); they get 408.
func TestStalledBodiesHoldNoSlot(t *testing.T) {
	const slots = 4
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxConcurrentRequests: slots, BodyTimeout: 2 * time.Second})
	ts := httptest.NewServer(s)
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")
	body := `{"inputs": ["the sea", "a ship"]}`
	var conns []net.Conn
	for range 2 * slots {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/embed HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body[:10])
		conns = append(conns, c)
	}
	waitFor(t, func() bool { return s.InFlight() == 2*slots })
	resp, err := http.Post(ts.URL+"/v1/embed", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(s.slots) != 0 {
		t.Errorf("a real request beside %d stalled bodies: %d %s, %d slots held", 2*slots, resp.StatusCode, b, len(s.slots))
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		r, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 408 {
			t.Errorf("stalled body: %d, want 408", r.StatusCode)
		}
	}
}

// The bodies being read share Options.MaxReadingBytes: while a client
// holds most of it with a large body it does not finish, a request whose
// body would pass it gets 429 at once, a small one is answered; once the
// stalled body times out, the budget is whole again.
func TestReadingBudget(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxBodyBytes: 16 << 10, MaxReadingBytes: 16 << 10, BodyTimeout: 500 * time.Millisecond})
	ts := httptest.NewServer(s)
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := `{"truncate": true, "inputs": "` + strings.Repeat("the ", 3000) + `"}` // 12 KiB
	fmt.Fprintf(c, "POST /embed HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(big), big[:9000])
	waitFor(t, func() bool { return s.reading.Load() > 9000 })
	resp, err := http.Post(ts.URL+"/embed", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.Contains(string(b), "reading other requests' bodies") {
		t.Errorf("a second large body: %d %s", resp.StatusCode, b)
	}
	resp, err = http.Post(ts.URL+"/embed", "application/json", strings.NewReader(`{"inputs": "the sea"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a small body beside it: %d", resp.StatusCode)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if r, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || r.StatusCode != 408 {
		t.Fatalf("the stalled body: %v %v", r, err)
	}
	waitFor(t, func() bool { return s.reading.Load() == 0 })
	resp, err = http.Post(ts.URL+"/embed", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the large body once the budget is back: %d %s", resp.StatusCode, b)
	}
}

// A client that asks for an answer and does not read it holds the
// answer's buffer and its admission slot only for Options.WriteTimeout;
// its connection is then closed, and its slot is back.
func TestUnreadAnswerFreesTheSlot(t *testing.T) {
	// A tokenize answer of about 20 MB, beyond what the loopback socket
	// buffers take.
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxInputs: 20000, MaxBodyBytes: 8 << 20, WriteTimeout: 300 * time.Millisecond})
	ts := httptest.NewServer(s)
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")
	inputs := make([]string, 10000)
	for i := range inputs {
		inputs[i] = strings.Repeat("the whale ", 14)
	}
	b, _ := json.Marshal(map[string]any{"inputs": inputs})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(c, "POST /tokenize HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(b), b)
	waitFor(t, func() bool { return len(s.slots) == 1 })
	// Tokenizing 1.4 MB takes a while (seconds under -race); the write
	// timeout starts with the answer.
	for deadline := time.Now().Add(time.Minute); len(s.slots) != 0 || s.InFlight() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request of an unread answer still holds its slot after a minute")
		}
	}
	healthy(t, s, "an unread answer")
}
