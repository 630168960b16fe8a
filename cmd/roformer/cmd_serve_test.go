package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roformer-go/roformer/server"
)

// syncBuffer is a bytes.Buffer safe for the server's log and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve answers real HTTP requests for a model folder and shuts down
// cleanly when its context ends.
func TestServeCLI(t *testing.T) {
	dir := ftModel(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("cannot listen on localhost:", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{model: dir}, ln, &logs)
	}()
	url := "http://" + ln.Addr().String()
	waitReady(t, url)
	resp, err := http.Post(url+"/v1/fill-mask", "application/json", strings.NewReader(`{"inputs": "the [MASK] was good", "top_k": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Results [][][]struct {
			Token string  `json:"token_str"`
			Score float64 `json:"score"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if len(got.Results) != 1 || len(got.Results[0]) != 1 || len(got.Results[0][0]) != 2 || got.Results[0][0][0].Score <= 0 {
		t.Fatalf("fill-mask answer %+v", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
	if l := logs.String(); !strings.Contains(l, "RoFormerForMaskedLM") || !strings.Contains(l, "POST /v1/fill-mask") {
		t.Errorf("start-up lines: %q", l)
	}
}

func TestServeCLIUsage(t *testing.T) {
	if code, _, stderr := runCLI(t, "serve"); code != 2 || !strings.Contains(stderr, "--model is required") {
		t.Errorf("no model: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "serve", "--model", t.TempDir(), "--addr", "127.0.0.1:0"); code != 1 || !strings.Contains(stderr, "config.json") {
		t.Errorf("empty folder: exit %d, %q", code, stderr)
	}
}

func TestServeCLIBatchFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--max-batch-tokens", "0"}, "--max-batch-tokens"},
		{[]string{"--max-concurrent-requests", "-1"}, "--max-concurrent-requests"},
		{[]string{"--max-batch-wait", "-1ms"}, "--max-batch-wait"},
		{[]string{"--body-timeout", "0s"}, "--body-timeout"},
		{[]string{"--write-timeout", "-1s"}, "--write-timeout"},
		{[]string{"--drain-timeout", "-1s"}, "--drain-timeout"},
		{[]string{"--max-beams", "0"}, "--max-beams"},
		{[]string{"--max-new-tokens", "-1"}, "--max-new-tokens"},
		{[]string{"--max-generate-bytes", "0"}, "--max-generate-bytes"},
		{[]string{"--max-masks", "0"}, "--max-masks"},
		{[]string{"--max-beam-work", "0"}, "--max-beam-work"},
		{[]string{"--max-reading-bytes", "10", "--max-body", "100"}, "--max-reading-bytes"},
		{[]string{"--max-embed-all-values", "0"}, "--max-embed-all-values"},
		{[]string{"--max-sparse-batch-logits", "0"}, "--max-sparse-batch-logits"},
		{[]string{"--auto-truncate=maybe"}, "auto-truncate"},
	} {
		args := append([]string{"serve", "--model", t.TempDir()}, c.args...)
		if code, _, stderr := runCLI(t, args...); code != 2 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
	// The flags reach the server: GET /info reports them.
	dir := ftModel(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("cannot listen on localhost:", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := serveOptions{model: dir}
	o.srv.MaxBatchTokens, o.srv.MaxConcurrentRequests, o.srv.MaxBatchRequests = 999, 3, 4
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o, ln, io.Discard) }()
	waitReady(t, "http://"+ln.Addr().String())
	resp, err := http.Get("http://" + ln.Addr().String() + "/info")
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if info["max_batch_tokens"] != 999.0 || info["max_concurrent_requests"] != 3.0 || info["max_batch_requests"] != 4.0 {
		t.Errorf("GET /info: %v", info)
	}
	resp, err = http.Post("http://"+ln.Addr().String()+"/embed", "application/json", strings.NewReader(`{"inputs": ["the film was good", "bad"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var vecs [][]float32
	if err := json.NewDecoder(resp.Body).Decode(&vecs); err != nil || resp.StatusCode != 200 || len(vecs) != 2 {
		t.Errorf("POST /embed: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve returned %v", err)
	}
}

// waitReady waits until GET /health answers 200: the model loads after the
// server starts listening.
func waitReady(t *testing.T, url string) {
	t.Helper()
	for i := 0; i < 600; i++ {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("GET /health: %d", resp.StatusCode)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the model did not load within 30 s")
}

// serve listens before the model is loaded: /health and the model routes
// answer 503 until it is, 200 after; a model that fails to load ends serve
// with its error.
func TestServeCLILoading(t *testing.T) {
	dir := ftModel(t)
	release := make(chan struct{})
	loadServer = func(dir string, o server.Options) (*server.Server, error) {
		<-release
		return server.Load(dir, o)
	}
	defer func() { loadServer = server.Load }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("cannot listen on localhost:", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, serveOptions{model: dir}, ln, &logs) }()
	url := "http://" + ln.Addr().String()
	for _, c := range []struct{ method, path, body string }{{"GET", "/health", ""}, {"POST", "/embed", `{"inputs": "good"}`}, {"POST", "/v1/fill-mask", `{"inputs": "the [MASK]"}`}} {
		req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error     string `json:"error"`
			ErrorType string `json:"error_type"`
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 503 || err != nil || e.Error != "model is loading" || e.ErrorType != "Unhealthy" {
			t.Errorf("%s %s while loading: %d %+v %v", c.method, c.path, resp.StatusCode, e, err)
		}
	}
	close(release)
	waitReady(t, url)
	resp, err := http.Post(url+"/embed", "application/json", strings.NewReader(`{"inputs": "good"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("x-inference-time") == "" {
		t.Errorf("POST /embed once loaded: %d %v", resp.StatusCode, resp.Header)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve returned %v", err)
	}
	if l := logs.String(); !strings.Contains(l, "listening on") || !strings.Contains(l, "serving ") {
		t.Errorf("start-up lines: %q", l)
	}

	// Loading fails while the server listens: serve returns the error.
	loadServer = func(string, server.Options) (*server.Server, error) { return nil, errors.New("no such model") }
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := runServe(context.Background(), serveOptions{model: dir}, ln, io.Discard); err == nil || err.Error() != "no such model" {
		t.Errorf("serve with a failed load returned %v", err)
	}
}

// On SIGTERM (its context ending) serve drains: the listener stays open and
// new requests get 503 (TEI's Unhealthy), /health too, while the request in
// flight (here a client still sending its body) gets its 200; then the
// listener closes and serve returns nil.
func TestServeCLIDrain(t *testing.T) {
	dir := ftModel(t)
	loaded := make(chan *server.Server, 1)
	loadServer = func(dir string, o server.Options) (*server.Server, error) {
		s, err := server.Load(dir, o)
		if err == nil {
			loaded <- s
		}
		return s, err
	}
	defer func() { loadServer = server.Load }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("cannot listen on localhost:", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, serveOptions{model: dir}, ln, &logs) }()
	addr := ln.Addr().String()
	url := "http://" + addr
	waitReady(t, url)
	s := <-loaded

	// In flight: headers and half of the body sent.
	body := `{"inputs": ["the film was good", "bad"]}`
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /embed HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body[:12])
	for i := 0; s.InFlight() == 0; i++ {
		if i == 1000 {
			t.Fatal("the request never came in")
		}
		time.Sleep(time.Millisecond)
	}

	cancel() // SIGTERM
	for i := 0; !s.Draining(); i++ {
		if i == 1000 {
			t.Fatal("serve did not start draining")
		}
		time.Sleep(time.Millisecond)
	}
	for _, c := range []struct{ method, path, body string }{{"GET", "/health", ""}, {"POST", "/embed", `{"inputs": "good"}`}} {
		req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s while draining: %v (want a 503, not a refused connection)", c.method, c.path, err)
		}
		var e struct {
			Error     string `json:"error"`
			ErrorType string `json:"error_type"`
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 503 || err != nil || e.ErrorType != "Unhealthy" || !resp.Close {
			t.Errorf("%s %s while draining: %d %+v %v", c.method, c.path, resp.StatusCode, e, err)
		}
	}

	fmt.Fprint(c, body[12:]) // the in-flight request completes
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the request in flight: %v", err)
	}
	var vecs [][]float32
	if err := json.NewDecoder(resp.Body).Decode(&vecs); err != nil || resp.StatusCode != 200 || len(vecs) != 2 {
		t.Errorf("the request in flight: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after the drain")
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("the listener is still open after serve returned")
	}
	if l := logs.String(); !strings.Contains(l, "draining: 1 requests in flight") {
		t.Errorf("shutdown lines: %q", l)
	}
}

// The guards' flags reach the server: --api-key (or $ROFORMER_API_KEY)
// asks every route but the probes for the key, --cors-allow-origin answers
// the listed origins' preflights, --max-beams and --max-new-tokens bound
// /generate; listening on 127.0.0.1, the server refuses other Host names
// (DNS rebinding).
func TestServeCLIGuards(t *testing.T) {
	dir := ftModel(t)
	t.Setenv("ROFORMER_API_KEY", "s3cret")
	var o serveOptions
	loadServer = func(dir string, so server.Options) (*server.Server, error) {
		o.srv = so
		return server.Load(dir, so)
	}
	defer func() { loadServer = server.Load }()
	// cmdServe reads the flags and the environment; it listens on the
	// address it is given, so take one that is free.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("cannot listen on localhost:", err)
	}
	addr := probe.Addr().String()
	probe.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cmdServe(ctx, []string{"--model", dir, "--addr", addr, "--cors-allow-origin", "https://a.example, https://b.example", "--max-beams", "2", "--max-new-tokens", "7"}, io.Discard, io.Discard)
	}()
	url := "http://" + addr
	waitReady(t, url)
	if o.srv.APIKey != "s3cret" || !o.srv.LoopbackOnly || len(o.srv.CORSAllowOrigins) != 2 || o.srv.CORSAllowOrigins[1] != "https://b.example" || o.srv.MaxBeams != 2 || o.srv.MaxNewTokens != 7 {
		t.Errorf("server options %+v", o.srv)
	}
	do := func(method, path, body string, h map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		for k, v := range h {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	js := map[string]string{"Content-Type": "application/json"}
	keyed := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer s3cret"}
	if r := do("POST", "/embed", `{"inputs": "good"}`, js); r.StatusCode != 401 {
		t.Errorf("POST /embed without the key: %d", r.StatusCode)
	}
	if r := do("POST", "/embed", `{"inputs": "good"}`, keyed); r.StatusCode != 200 {
		t.Errorf("POST /embed with the key: %d", r.StatusCode)
	}
	if r := do("GET", "/health", "", nil); r.StatusCode != 200 {
		t.Errorf("GET /health without the key: %d", r.StatusCode)
	}
	if r := do("GET", "/info", "", map[string]string{"Authorization": "Bearer s3cret", "Host": "evil.example:" + strings.Split(addr, ":")[1]}); r.StatusCode != 403 {
		t.Errorf("Host evil.example: %d, want 403", r.StatusCode)
	}
	r := do("OPTIONS", "/embed", "", map[string]string{"Origin": "https://b.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"})
	if r.StatusCode != 204 || r.Header.Get("Access-Control-Allow-Origin") != "https://b.example" || !strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight from a listed origin: %d %v", r.StatusCode, r.Header)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve returned %v", err)
	}
}

// --auto-truncate, --max-embed-all-values and --max-sparse-batch-logits reach the server's options.
func TestServeCLIAutoTruncate(t *testing.T) {
	defer func(f func(string, server.Options) (*server.Server, error)) { loadServer = f }(loadServer)
	for _, c := range []struct {
		args   []string
		auto   bool
		values int
		logits int
	}{
		{nil, false, server.DefaultMaxEmbedAllValues, server.DefaultMaxSparseBatchLogits},
		{[]string{"--auto-truncate", "--max-embed-all-values", "77", "--max-sparse-batch-logits", "99"}, true, 77, 99},
	} {
		var got server.Options
		loadServer = func(dir string, o server.Options) (*server.Server, error) {
			got = o
			return nil, errors.New("held")
		}
		args := append([]string{"serve", "--model", t.TempDir(), "--addr", "127.0.0.1:0"}, c.args...)
		if code, _, stderr := runCLI(t, args...); code == 0 || !strings.Contains(stderr, "held") {
			t.Fatalf("%v: exit %d, %q", c.args, code, stderr)
		}
		if got.AutoTruncate != c.auto || got.MaxEmbedAllValues != c.values || got.MaxSparseBatchLogits != c.logits {
			t.Errorf("%v: AutoTruncate %v, MaxEmbedAllValues %d, MaxSparseBatchLogits %d; want %v, %d, %d", c.args, got.AutoTruncate, got.MaxEmbedAllValues, got.MaxSparseBatchLogits, c.auto, c.values, c.logits)
		}
	}
}
