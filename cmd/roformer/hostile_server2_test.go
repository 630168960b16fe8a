package main

// The server's second round of hostile requests (issue #47), each against
// `roformer serve` in a child under the address-space cap of
// hostile_test.go, its peak RSS read from /proc (vmHWM): answers that are
// asked for and never read, a sentence-transformers folder whose
// max_seq_length is past the model's positions, and SPLADE over a large
// vocabulary.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
)

// cappedServer is `roformer serve` in a child under the cap.
type cappedServer struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
	mu   sync.Mutex
	log  bytes.Buffer
}

// startCappedServe starts `roformer serve --addr 127.0.0.1:0 args...` in a
// child under the cap and waits until its model is loaded.
func startCappedServe(t *testing.T, args ...string) *cappedServer {
	t.Helper()
	cs := &cappedServer{cmd: cappedCommand(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)}
	stderr, err := cs.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cs.cmd.Stdout = io.Discard
	if err := cs.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.cmd.Process.Kill(); _ = cs.cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`listening on http://(\S+),`)
		for sc.Scan() {
			cs.mu.Lock()
			cs.log.WriteString(sc.Text() + "\n")
			cs.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		cs.base = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not start")
	}
	waitReady(t, cs.base)
	return cs
}

// peak is the child's peak RSS so far.
func (cs *cappedServer) peak(t *testing.T) int64 { return vmHWM(t, cs.cmd.Process.Pid) }

// post sends body to path within timeout and returns the status and up to
// 1 MiB of the answer.
func (cs *cappedServer) post(t *testing.T, timeout time.Duration, path, body string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: timeout}
	start := time.Now()
	resp, err := client.Post(cs.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		t.Fatalf("POST %s: no answer after %v: %v\n%s", path, time.Since(start).Round(time.Millisecond), err, cs.log.String())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// health asserts GET /health answers 200 within 5 s.
func (cs *cappedServer) health(t *testing.T, when string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(cs.base + "/health")
	if err != nil {
		t.Fatalf("GET /health %s: %v", when, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /health %s: %d", when, resp.StatusCode)
	}
}

// wordsText is n words of words (after the special tokens), one token each.
func wordsText(words []string, n, seed int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[5+(seed*131+i*17)%(len(words)-5)])
	}
	return b.String()
}

// tinyWords is the tiny vocabulary's special tokens and n words w0, w1, ….
func tinyWords(n int) []string {
	words := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	for i := range n {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	return words
}

// The 40 clients that POST /embed_all and never read the answer
// (16 × 509 tokens of a 256-wide model, 21.7 MB of JSON each: 1.3 GB), at
// the tiny model's scale: 64 × 509 tokens × 16, 5.7 MB of JSON each, 230
// MB for the 40, against --max-writing-bytes 16 MiB. The answers past the
// budget are 429s, the server's peak stays within 200 MB of its rest (110
// MB measured; 450 MB before the budget), /health and a normal /embed are
// answered within 5 s while the clients hold their answers, and once
// --write-timeout has cut them off a reading client gets its large answer.
func TestHostileServeUnreadAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("a server in a child under a memory cap")
	}
	words := tinyWords(200)
	dir := testmodel.Tiny{Words: words, Seed: 1, MaxPositions: 512}.Folder(t)
	cs := startCappedServe(t, "--model", dir, "--max-writing-bytes", fmt.Sprint(16<<20), "--write-timeout", "3s")
	embed := `{"inputs": "w1 w2 w3"}`
	if code, body := cs.post(t, 5*time.Second, "/embed", embed); code != 200 {
		t.Fatalf("a normal /embed: %d %s", code, body)
	}
	rest := cs.peak(t)

	inputs := make([]string, 64)
	for i := range inputs {
		inputs[i] = wordsText(words, 507, i)
	}
	big, _ := json.Marshal(map[string]any{"inputs": inputs})
	addr := strings.TrimPrefix(cs.base, "http://")
	request := fmt.Sprintf("POST /embed_all HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(big), big)
	d := net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		var err error
		_ = c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	start := time.Now()
	for range 40 {
		c, err := d.DialContext(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, c) // never read
	}
	// While the forward passes run and the answers wait to be read.
	cs.health(t, "with 40 clients not reading")
	if code, body := cs.post(t, 5*time.Second, "/embed", embed); code != 200 {
		t.Errorf("a normal /embed beside 40 clients not reading: %d %s", code, body)
	}
	// Until every answer is written or held: each stalled client has
	// been sent its status line by then.
	answered := 0
	for _, c := range stalled {
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		line, err := bufio.NewReaderSize(c, 16).ReadString('\n') // 16 bytes: the client still reads next to nothing
		if err == nil && strings.HasPrefix(line, "HTTP/1.1 ") {
			answered++
		}
	}
	took := time.Since(start)
	cs.health(t, "with 40 answers unread")
	if code, body := cs.post(t, 5*time.Second, "/embed", embed); code != 200 {
		t.Errorf("a normal /embed beside 40 answers unread: %d %s", code, body)
	}
	peak := cs.peak(t)
	t.Logf("40 clients not reading their /embed_all answers (%d answered in %v): peak RSS %.1f MB, rest %.1f MB (+%.1f MB)",
		answered, took.Round(time.Millisecond), float64(peak)/1e6, float64(rest)/1e6, float64(peak-rest)/1e6)
	if answered != 40 {
		t.Errorf("%d of 40 stalled clients got a status line within 60 s", answered)
	}
	if peak-rest > 200<<20 {
		t.Errorf("peak RSS %d bytes, %d over the rest %d (the bound: 200 MB): the unread answers are not bounded by --max-writing-bytes 16 MiB", peak, peak-rest, rest)
	}
	// --write-timeout 3s cuts the stalled clients off; then a large
	// answer for a reading client goes through.
	time.Sleep(4 * time.Second)
	cs.health(t, "after the stalled clients were cut off")
	code, body := cs.post(t, 30*time.Second, "/embed_all", string(big))
	if code != 200 {
		t.Errorf("a large /embed_all after the stalled clients were cut off: %d %.300s", code, body)
	}
	if peak := cs.peak(t); peak > 1<<30 {
		t.Errorf("peak RSS %d bytes, over 1 GB", peak)
	}
}

// A sentence-transformers folder whose max_seq_length is 1,048,576 on a
// model of 512 positions (rotary) answers a 150,000-token /embed with 413
// at once, as the plain folder does (before, it ran it: no answer in 20 s,
// 1.36 GB, and a normal /embed queued behind it); so does a plain folder
// whose config says max_position_embeddings 1,048,576, its limit lowered
// by --max-attention-work. A normal /embed is answered beside them.
func TestHostileServeLongLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("a server in a child under a memory cap")
	}
	st := filepath.Join(t.TempDir(), "st")
	if err := os.CopyFS(st, os.DirFS(filepath.Join("..", "..", "sentence", "testdata", "st", "mean"))); err != nil {
		t.Fatal(err)
	}
	setConfig(t, st, map[string]string{"max_position_embeddings": "512"})
	if err := os.WriteFile(filepath.Join(st, "sentence_bert_config.json"), []byte(`{"max_seq_length": 1048576, "do_lower_case": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	plain := testmodel.Tiny{Words: tinyWords(20), Seed: 1, MaxPositions: 1 << 20}.Folder(t)
	for _, c := range []struct {
		name, dir, word string
		limit           int
	}{
		{"sentence-transformers max_seq_length 1,048,576", st, "the", 512},
		{"max_position_embeddings 1,048,576", plain, "w1", 16384}, // 2^28 work on one layer
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := startCappedServe(t, "--model", c.dir)
			var info struct {
				MaxInputLength int `json:"max_input_length"`
			}
			resp, err := http.Get(cs.base + "/info")
			if err != nil {
				t.Fatal(err)
			}
			_ = json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			if info.MaxInputLength != c.limit {
				t.Errorf("max_input_length %d, want %d", info.MaxInputLength, c.limit)
			}
			long, _ := json.Marshal(map[string]any{"inputs": strings.TrimSpace(strings.Repeat(c.word+" ", 150000))})
			start := time.Now()
			code, body := cs.post(t, 20*time.Second, "/embed", string(long))
			took := time.Since(start)
			t.Logf("a 150,000-token /embed: %d in %v: %.200s", code, took.Round(time.Millisecond), body)
			if code != 413 || !strings.Contains(body, fmt.Sprint(c.limit)) {
				t.Errorf("a 150,000-token /embed: %d %s, want 413 naming the limit %d", code, body, c.limit)
			}
			if code, body := cs.post(t, 5*time.Second, "/embed", `{"inputs": "`+c.word+` `+c.word+`"}`); code != 200 {
				t.Errorf("a normal /embed: %d %s", code, body)
			}
			cs.health(t, "after")
			if peak := cs.peak(t); peak > 1<<30 {
				t.Errorf("peak RSS %d bytes, over 1 GB", peak)
			} else {
				t.Logf("peak RSS %.1f MB", float64(peak)/1e6)
			}
		})
	}
}

// POST /embed_sparse of 64 × 509 tokens over a 30,005-piece vocabulary:
// the masked-LM head runs in chunks of --max-sparse-batch-logits (2^21
// values, 8 MiB), so the server's peak stays within 100 MB of its rest
// (35 MB measured; before, each pass held 2^25 logits, 128 MiB: 490 MB
// above it). The
// head's bias is lowered so that, as a trained SPLADE model's, the vectors
// are sparse and the answer small.
func TestHostileServeSparse(t *testing.T) {
	if testing.Short() {
		t.Skip("a server in a child under a memory cap")
	}
	words := tinyWords(30000)
	m, tok := testmodel.Tiny{Words: words, Seed: 1, MaxPositions: 512}.Build(t)
	if m.Head != roformer.HeadMaskedLM || m.LM == nil || m.LM.Bias == nil {
		t.Fatalf("head %s: the test wants the masked-LM head with its bias", m.Head)
	}
	for v := range m.LM.Bias.Data {
		m.LM.Bias.Data[v] = -4
		if v%1000 == 0 {
			m.LM.Bias.Data[v] = 4
		}
	}
	dir := filepath.Join(t.TempDir(), "splade")
	testmodel.Save(t, dir, m, tok)
	cs := startCappedServe(t, "--model", dir)
	if code, body := cs.post(t, 5*time.Second, "/embed_sparse", `{"inputs": "w1 w2 w3"}`); code != 200 {
		t.Fatalf("a small /embed_sparse: %d %.300s", code, body)
	}
	rest := cs.peak(t)
	inputs := make([]string, 64)
	for i := range inputs {
		inputs[i] = wordsText(words, 507, i)
	}
	body, _ := json.Marshal(map[string]any{"inputs": inputs})
	code, answer := cs.post(t, 60*time.Second, "/embed_sparse", string(body))
	if code != 200 {
		t.Fatalf("/embed_sparse of 64 × 509 tokens: %d %.300s", code, answer)
	}
	peak := cs.peak(t)
	t.Logf("/embed_sparse of 64 × 509 tokens over %d pieces: peak RSS %.1f MB, rest %.1f MB (+%.1f MB); answer %d bytes",
		len(words), float64(peak)/1e6, float64(rest)/1e6, float64(peak-rest)/1e6, len(answer))
	if peak-rest > 100<<20 {
		t.Errorf("peak RSS %d bytes, %d over the rest %d (the bound: 100 MB)", peak, peak-rest, rest)
	}
	cs.health(t, "after")
}
