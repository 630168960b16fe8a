package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roformer-go/roformer/model/roformer"
)

// rawPost writes a POST with Content-Length n and only body (which may be
// shorter: the client then stalls), and reads the answer.
func rawPost(t *testing.T, addr, path, body string, n int) (*http.Response, []byte, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, n, body)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b, time.Since(start)
}

// A body that stalls gets 408 once the body timeout passes (not 422, and
// not a cut connection), in its route's error shape, and its connection
// is closed; a body that is not JSON still gets its 422 or 400 at once.
func TestBodyTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{BodyTimeout: timeout})
	hs := httptest.NewServer(s)
	defer hs.Close()
	addr := hs.Listener.Addr().String()
	body := `{"inputs": "the whale"}`
	for _, c := range []struct{ path, kind string }{{"/embed", "Validation"}, {"/v1/embed", ""}, {"/v1/embeddings", "invalid_request_error"}, {"/tokenize", "Validation"}} {
		resp, b, took := rawPost(t, addr, c.path, body[:10], len(body))
		var e struct {
			Error     any    `json:"error"`
			ErrorType string `json:"error_type"`
		}
		if resp.StatusCode != http.StatusRequestTimeout || json.Unmarshal(b, &e) != nil || !resp.Close || took < timeout {
			t.Errorf("%s with a stalled body: %d %v after %v: %s", c.path, resp.StatusCode, resp.Header, took, b)
			continue
		}
		got := e.ErrorType
		if m, ok := e.Error.(map[string]any); ok { // OpenAI's shape
			got, _ = m["type"].(string)
		}
		if got != c.kind {
			t.Errorf("%s: error type %q, want %q: %s", c.path, got, c.kind, b)
		}
	}
	for _, c := range []struct {
		path string
		want int
	}{{"/embed", 422}, {"/v1/embed", 400}} {
		if resp, b, took := rawPost(t, addr, c.path, `{"inputs": `, len(`{"inputs": `)); resp.StatusCode != c.want || took >= timeout {
			t.Errorf("%s with a broken JSON body: %d after %v: %s", c.path, resp.StatusCode, took, b)
		}
	}

	// The deadline is on the body only: a request whose answer waits
	// longer than the body timeout (here behind a held scheduler) gets it.
	release := make(chan struct{})
	var once sync.Once
	s.beforeBatch = func() { once.Do(func() { <-release }) }
	go func() { time.Sleep(3 * timeout); close(release) }()
	resp, b, took := rawPost(t, addr, "/embed", body, len(body))
	// took is measured from after the release timer started, so it may fall
	// just short of 3·timeout; past 2·timeout it outlived the body deadline
	// with room to spare.
	if resp.StatusCode != 200 || took < 2*timeout {
		t.Errorf("a slow answer: %d after %v: %s", resp.StatusCode, took, b)
	}
	if !strings.HasPrefix(string(b), "[[") {
		t.Errorf("a slow answer: %s", b)
	}
}
