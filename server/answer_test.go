package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smallBuffers sets a socket's kernel buffers to their least, so that a
// peer that does not read stops a write after a few KiB.
func smallBuffers(network, address string, c syscall.RawConn) error {
	var err error
	_ = c.Control(func(fd uintptr) {
		if err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096); err == nil {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}
	})
	return err
}

// Clients that ask for large answers and do not read them hold at most
// MaxWritingBytes: the answers past it get 429 (TEI's Overloaded, with
// Retry-After), /health and a small /embed are answered beside them, and
// once WriteTimeout has cut the stalled clients off their bytes are given
// back and a large answer goes through again.
func TestAnswersWithinWritingBudget(t *testing.T) {
	const budget = 1 << 20
	s, _, _ := newServer(t, "", nil, Options{MaxWritingBytes: budget, WriteTimeout: time.Second})
	defer s.Close()
	ln, err := (&net.ListenConfig{Control: smallBuffers}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s)
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	defer ts.Close()
	addr := ln.Addr().String()

	// 64 inputs of 30 tokens: 30,720 values of /embed_all, some 460 KB of
	// JSON, so two fit the budget.
	inputs := make([]string, 64)
	for i := range inputs {
		inputs[i] = strings.TrimSpace(strings.Repeat("the whale ship sea ", 7))
	}
	big, _ := json.Marshal(map[string]any{"inputs": inputs})
	request := func(path string, body []byte) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, addr, len(body), body)
	}
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	d := net.Dialer{Control: smallBuffers}
	for range 6 {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, request("/embed_all", big)); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, c) // never read
	}
	// Wait for the six to be answered or held, watching the budget.
	most := int64(0)
	for deadline := time.Now().Add(10 * time.Second); ; {
		most = max(most, s.writing.Load())
		if s.InFlight() <= 2 && s.writing.Load() > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("stalled clients: %d requests in flight holding %d bytes (at most %d seen)", s.InFlight(), s.writing.Load(), most)
	if held := s.writing.Load(); held == 0 || most > budget {
		t.Fatalf("stalled clients hold %d bytes (at most %d seen); want some, within the budget %d", held, most, budget)
	}

	client := &http.Client{Timeout: 5 * time.Second}
	call := func(path string, body []byte) (int, http.Header, string) {
		t.Helper()
		resp, err := client.Post(ts.URL+path, "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	code, h, body := call("/embed_all", big)
	var e TEIError
	_ = json.Unmarshal([]byte(body), &e)
	if code != http.StatusTooManyRequests || e.ErrorType != "Overloaded" || h.Get("Retry-After") == "" || !strings.Contains(e.Error, fmt.Sprint(budget)) {
		t.Errorf("a large answer while stalled clients hold the budget: %d %v %s, want 429 Overloaded with Retry-After naming %d", code, h, body, budget)
	}
	if resp, err := client.Get(ts.URL + "/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /health beside the stalled clients: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code, _, body := call("/embed", []byte(`{"inputs": "the whale"}`)); code != 200 {
		t.Errorf("a small /embed beside the stalled clients: %d %s", code, body)
	}

	// WriteTimeout (1 s) cuts the stalled writes off: the budget is free.
	for deadline := time.Now().Add(10 * time.Second); s.writing.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held 10 s after the write timeout", s.writing.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, _, body := call("/embed_all", big); code != 200 {
		t.Errorf("a large answer once the stalled clients are cut off: %d %.200s", code, body)
	}
}

// An answer larger than the whole budget is written when no other holds
// any of it; a small answer is never charged.
func TestAnswerLargerThanBudget(t *testing.T) {
	s, _, _ := newServer(t, "", nil, Options{MaxWritingBytes: 100 << 10})
	defer s.Close()
	inputs := make([]string, 64)
	for i := range inputs {
		inputs[i] = "the whale ship sea the whale ship sea"
	}
	big, _ := json.Marshal(map[string]any{"inputs": inputs})
	var got [][][]float32
	if code, kind := teiCall(t, s, "/embed_all", string(big), &got); code != 200 || len(got) != 64 {
		t.Fatalf("an answer over the budget, alone: %d %s", code, kind)
	}
	s.writing.Add(1) // another answer holds a byte
	defer s.writing.Add(-1)
	if code, kind := teiCall(t, s, "/embed_all", string(big), &got); code != 429 || kind != "Overloaded" {
		t.Errorf("an answer over the budget beside another: %d %s, want 429 Overloaded", code, kind)
	}
	s.writing.Add(100<<10 - 1) // the budget is full
	defer s.writing.Add(-(100<<10 - 1))
	var one [][]float32
	if code, kind := teiCall(t, s, "/embed", `{"inputs": "the whale"}`, &one); code != 200 {
		t.Errorf("a small answer with the budget full: %d %s", code, kind)
	}
}

type selfMarshaled struct{ X int }

func (s selfMarshaled) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`{"x2":%d}`, 2*s.X)), nil
}

// writeJSON writes what json.Encoder (HTML not escaped) writes, a list
// encoded item by item included, in as many chunks as it takes; a value
// JSON cannot hold, in the first item of a list or the last, is a 500 that
// says why.
func TestWriteJSONAsEncoder(t *testing.T) {
	big := make([][]float32, 300)
	for i := range big {
		big[i] = make([]float32, 300)
		for j := range big[i] {
			big[i][j] = float32(i*j) / 7
		}
	}
	for name, v := range map[string]any{
		"list of lists": big, "tokens": [][][]float32{{{1, 2}, {3}}, {}}, "sparse": [][]TEISparseValue{{{Index: 3, Value: 0.5}}, {}},
		"empty": []int{}, "nil": []int(nil), "bytes": []byte("abc"), "html": []string{"<a>&</a>", "x"}, "map": map[string]any{"results": big[:2]},
		"struct": EmbedResponse{Embeddings: big[:3], Dim: 300}, "marshaler": []selfMarshaled{{1}, {2}}, "number": 3.5,
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		writeJSON(rec, http.StatusOK, v)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
			t.Errorf("%s: %d %q, want %.200q", name, rec.Code, truncated(rec.Body.String()), want.String())
		}
	}
	for name, v := range map[string]any{"first": [][]float32{{float32(math.NaN())}, {1}}, "last": [][]float32{{1}, {float32(math.Inf(1))}}} {
		rec := httptest.NewRecorder()
		writeJSON(rec, http.StatusOK, v)
		if rec.Code != 500 || !strings.Contains(rec.Body.String(), "unsupported value") {
			t.Errorf("%s item not JSON: %d %s, want 500 naming it", name, rec.Code, rec.Body)
		}
	}
}

func truncated(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
