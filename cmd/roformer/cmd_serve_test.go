package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
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
	var resp *http.Response
	for i := 0; i < 100; i++ { // the model loads before the first answer
		if resp, err = http.Post(url+"/v1/fill-mask", "application/json", strings.NewReader(`{"inputs": "the [MASK] was good", "top_k": 2}`)); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
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
