package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/roformer-go/roformer/blas"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// post sends a JSON body and returns the status, the headers and the body.
func post(t testing.TB, s http.Handler, path, body string) (int, http.Header, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, jsonRequest("POST", path, strings.NewReader(body)))
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// alone runs one text through the model by itself (a batch of one row, no
// padding) and pools it as the server does.
func alone(t testing.TB, m *roformer.Model, tok *tokenizer.Tokenizer, text string, pool pipeline.Pooling) []float32 {
	t.Helper()
	enc, err := tok.Encode(text, tokenizer.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := tokenizer.Int32s(enc.IDs)
	mask := make([]int32, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	out, err := m.Forward(context.Background(), &roformer.Batch{InputIDs: ids, TokenTypeIDs: make([]int32, len(ids)), AttentionMask: mask, B: 1, T: len(ids)}, nil, roformer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := pipeline.Pool(out, mask, 0, pool)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Concurrent clients with inputs of different lengths are batched together
// (the scheduler is held until all are queued), and each gets the vector of
// its input run alone: bit for bit where the products run on go-asm (its
// sums do not depend on the rows beside a row, and the fused attention
// stops at a row's last visible key, so padding changes nothing), within
// 1e-6 of the vector's scale on a library, whose kernels block and split
// the work by the number of rows (the last bit or two of float32 moves:
// 7.6e-6 on values up to 62, 1.2e-7 relative).
func TestBatchedEqualsAlone(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadMaskedLM, nil, Options{MaxBatchWait: time.Second})
	texts := []string{"the", "the whale", "a ship . the sea . good", "bad bad", "the sea the sea the sea the whale . a ship", "good", "whales",
		strings.Repeat("the whale and a ship . ", 5)}
	release := make(chan struct{})
	var once sync.Once
	s.beforeBatch = func() { once.Do(func() { <-release }) }
	var forwards, rows atomic.Int64
	s.afterForward = func(b, _ int) { forwards.Add(1); rows.Add(int64(b)) }

	got := make([][]float32, len(texts))
	var wg sync.WaitGroup
	for i, text := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, body := post(t, s, "/embed", fmt.Sprintf(`{"inputs": %q, "normalize": false}`, text))
			var v [][]float32
			if code != 200 || json.Unmarshal(body, &v) != nil || len(v) != 1 {
				t.Errorf("input %d: status %d %s", i, code, body)
				return
			}
			got[i] = v[0]
		}()
	}
	waitFor(t, func() bool { return len(s.slots) == len(texts) && s.preparing.Load() == 0 })
	close(release)
	wg.Wait()
	if forwards.Load() != 1 || rows.Load() != int64(len(texts)) {
		t.Errorf("%d forward passes over %d rows, want 1 over %d", forwards.Load(), rows.Load(), len(texts))
	}
	exact := blas.Chosen().Kind == blas.KindGoAsm
	worst, scale := 0.0, 0.0
	for i, text := range texts {
		want := alone(t, m, tok, text, pipeline.PoolMean)
		for j := range want {
			if got[i] == nil {
				break
			}
			if exact && math.Float32bits(got[i][j]) != math.Float32bits(want[j]) {
				t.Errorf("input %d, value %d: %v batched, %v alone (go-asm: the same bits expected)", i, j, got[i][j], want[j])
				break
			}
			worst = max(worst, math.Abs(float64(got[i][j]-want[j])))
			scale = max(scale, math.Abs(float64(want[j])))
		}
	}
	if worst > 1e-6*max(1, scale) {
		t.Errorf("batched vectors differ from the inputs run alone by up to %g (values up to %g)", worst, scale)
	}
	// The batch held every slot; all are back.
	waitFor(t, func() bool { return len(s.slots) == 0 })
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 2000 {
			t.Fatal("timed out waiting")
		}
		time.Sleep(time.Millisecond)
	}
}

// The batch is formed by the token and row budgets, shortest neighbours of
// the oldest row first.
func TestPick(t *testing.T) {
	s := &Server{opts: Options{MaxBatchRequests: 3, MaxBatchTokens: 20}}
	job := func(n int) *embedJob { return &embedJob{rows: []embedRow{{ids: make([]int32, n)}}} }
	lens := func(ps []pendingRow) []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.len())
		}
		return out
	}
	var pending []pendingRow
	for _, n := range []int{6, 2, 9, 7, 3, 30} {
		pending = append(pending, pendingRow{job(n), 0})
	}
	batch, rest := s.pick(pending)
	// Oldest 6, then the shorter 3 and 2 (3 rows × 6 = 18 tokens).
	if fmt.Sprint(lens(batch)) != "[2 3 6]" || fmt.Sprint(lens(rest)) != "[9 7 30]" {
		t.Errorf("batch %v, rest %v", lens(batch), lens(rest))
	}
	batch, rest = s.pick(rest)
	// Oldest 9: with 7, 2 rows × 9 = 18; a third would be 27 or 90 tokens.
	if fmt.Sprint(lens(batch)) != "[7 9]" || fmt.Sprint(lens(rest)) != "[30]" {
		t.Errorf("batch %v, rest %v", lens(batch), lens(rest))
	}
	// A row longer than the token budget runs alone.
	if batch, rest = s.pick(rest); fmt.Sprint(lens(batch)) != "[30]" || len(rest) != 0 {
		t.Errorf("batch %v, rest %v", lens(batch), lens(rest))
	}
}

// With every slot taken, a request gets 429 with Retry-After at once, on
// each route in its API's error shape; the queued requests are answered once
// the scheduler runs.
func TestQueueFull(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxConcurrentRequests: 2})
	release := make(chan struct{})
	var once sync.Once
	s.beforeBatch = func() { once.Do(func() { <-release }) }
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, body := post(t, s, "/embed", `{"inputs": "the sea"}`); code != 200 {
				t.Errorf("queued request: %d %s", code, body)
			}
		}()
	}
	waitFor(t, func() bool { return len(s.slots) == 2 && s.preparing.Load() == 0 })
	for _, c := range []struct{ path, body, want string }{
		{"/embed", `{"inputs": "the whale"}`, `{"error":"the server is busy: too many requests queued","error_type":"Overloaded"}`},
		{"/v1/embeddings", `{"input": "the whale"}`, `{"error":{"message":"the server is busy: too many requests queued","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
		{"/v1/embed", `{"inputs": "the whale"}`, `{"error":"the server is busy: too many requests queued"}`},
	} {
		code, h, body := post(t, s, c.path, c.body)
		if code != http.StatusTooManyRequests || h.Get("Retry-After") != "1" || strings.TrimSpace(string(body)) != c.want {
			t.Errorf("%s with a full queue: %d, Retry-After %q, %s", c.path, code, h.Get("Retry-After"), body)
		}
	}
	close(release)
	wg.Wait()
	if code, _, body := post(t, s, "/embed", `{"inputs": "the whale"}`); code != 200 {
		t.Errorf("after the queue drained: %d %s", code, body)
	}
}

// A request whose client has left while it waits is dropped before its
// forward pass, and its slot comes back.
func TestCancelledDroppedBeforeForward(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	release := make(chan struct{})
	var once sync.Once
	s.beforeBatch = func() { once.Do(func() { <-release }) }
	var rows atomic.Int64
	s.afterForward = func(b, _ int) { rows.Add(int64(b)) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, jsonRequest("POST", "/embed", strings.NewReader(`{"inputs": ["the sea", "a ship"]}`)).WithContext(ctx))
		done <- rec.Code
	}()
	waitFor(t, func() bool { return len(s.slots) == 1 && s.preparing.Load() == 0 })
	cancel()
	if code := <-done; code != http.StatusServiceUnavailable {
		t.Errorf("cancelled request: status %d, want 503", code)
	}
	close(release)
	waitFor(t, func() bool { return len(s.slots) == 0 })
	if rows.Load() != 0 {
		t.Errorf("%d rows of a cancelled request ran", rows.Load())
	}
	if code, _, body := post(t, s, "/embed", `{"inputs": "the whale"}`); code != 200 || rows.Load() != 1 {
		t.Errorf("next request: %d %s, %d rows run", code, body, rows.Load())
	}
}

// POST /embed: a bare [[float]], normalized by default, mean pooling (this
// model has no pooler), dimensions cut before normalizing, truncation on
// either side, TEI's errors.
func TestTEIEmbed(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadMaskedLM, nil, Options{MaxLength: 8, MaxInputs: 3})
	code, h, body := post(t, s, "/embed", `{"inputs": ["the whale", "a ship"]}`)
	var got [][]float32
	if code != 200 || h.Get("Content-Type") != "application/json" || json.Unmarshal(body, &got) != nil || len(got) != 2 || len(got[0]) != 16 {
		t.Fatalf("status %d %s", code, body)
	}
	// Two inputs are one batch: within 1e-6 of each run alone, as in
	// TestBatchedEqualsAlone (oneDNN's AVX2 products differ in the last bit).
	for i, text := range []string{"the whale", "a ship"} {
		want := alone(t, m, tok, text, pipeline.PoolMean)
		pipeline.Normalize(want)
		if d := maxDiff(got[i], want); d > 1e-6 {
			t.Fatalf("input %d: %v, want %v (max difference %g)", i, got[i][:3], want[:3], d)
		}
	}
	if n := norm(got[0]); math.Abs(n-1) > 1e-6 {
		t.Errorf("norm %g, want 1", n)
	}
	// normalize false, dimensions 4: the first 4 values as they are.
	var raw [][]float32
	if code, _, body := post(t, s, "/embed", `{"inputs": "the whale", "normalize": false, "dimensions": 4}`); code != 200 || json.Unmarshal(body, &raw) != nil {
		t.Fatalf("status %d %s", code, body)
	}
	want := alone(t, m, tok, "the whale", pipeline.PoolMean)
	if len(raw[0]) != 4 || raw[0][0] != want[0] || raw[0][3] != want[3] {
		t.Errorf("dimensions 4, not normalized: %v, want %v", raw[0], want[:4])
	}
	var cut [][]float32
	if code, _, body := post(t, s, "/embed", `{"inputs": "the whale", "dimensions": 4}`); code != 200 || json.Unmarshal(body, &cut) != nil {
		t.Fatalf("status %d %s", code, body)
	}
	pipeline.Normalize(want[:4])
	if math.Abs(norm(cut[0])-1) > 1e-6 || cut[0][2] != want[2] {
		t.Errorf("dimensions 4, normalized: %v, want %v", cut[0], want[:4])
	}
	// Truncation: 8 tokens kept, [CLS] and [SEP] among them.
	long := "the whale ship sea a . good bad the sea"
	for _, c := range []struct{ dir, kept string }{{"Right", "the whale ship sea a ."}, {"Left", "a . good bad the sea"}} {
		var v [][]float32
		code, _, body := post(t, s, "/embed", fmt.Sprintf(`{"inputs": %q, "truncate": true, "truncation_direction": %q}`, long, c.dir))
		if code != 200 || json.Unmarshal(body, &v) != nil {
			t.Fatalf("%s: status %d %s", c.dir, code, body)
		}
		want := alone(t, m, tok, c.kept, pipeline.PoolMean)
		pipeline.Normalize(want)
		if v[0][0] != want[0] || v[0][15] != want[15] {
			t.Errorf("truncation %s: %v, want the vector of %q %v", c.dir, v[0][:2], c.kept, want[:2])
		}
	}
	for _, c := range []struct {
		name, body string
		code       int
		kind, msg  string
	}{
		{"too long", fmt.Sprintf(`{"inputs": %q}`, long), 413, "Validation", "12 tokens; the limit is 8"},
		{"too many inputs", `{"inputs": ["a", "a", "a", "a"]}`, 413, "Validation", "batch size 4 > maximum allowed batch size 3"},
		{"empty", `{"inputs": []}`, 400, "Empty", "batch is empty"},
		{"no inputs", `{}`, 422, "Validation", `"inputs" is missing`},
		{"neither texts nor ids", `{"inputs": [1, true]}`, 422, "Validation", "want a string or an array of token ids"}, // token ids are taken (tei_tokens_test.go)
		{"not JSON", `{"inputs": `, 422, "Validation", "request body"},
		{"dimensions 0", `{"inputs": "a", "dimensions": 0}`, 422, "Validation", "dimensions 0"},
		{"dimensions too large", `{"inputs": "a", "dimensions": 17}`, 422, "Validation", "vector size 16"},
		{"direction", `{"inputs": "a", "truncation_direction": "Middle"}`, 422, "Validation", "truncation_direction"},
		{"normalize not a bool", `{"inputs": "a", "normalize": "yes"}`, 422, "Validation", "normalize"},
	} {
		code, _, body := post(t, s, "/embed", c.body)
		var e TEIError
		if err := json.Unmarshal(body, &e); err != nil || code != c.code || e.ErrorType != c.kind || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s: %d %s, want %d %s with %q", c.name, code, body, c.code, c.kind, c.msg)
		}
	}
	// Unknown fields are ignored, as TEI does.
	if code, _, body := post(t, s, "/embed", `{"inputs": "a", "prompt_name": null}`); code != 200 {
		t.Errorf("unknown field: %d %s", code, body)
	}
	if len(s.slots) != 0 {
		t.Errorf("%d slots still held", len(s.slots))
	}
}

// closeTo says whether got is want within 1e-6 of want's largest value (at
// least 1): batching may move the last bits (see TestBatchedEqualsAlone).
func closeTo(got, want []float32) bool {
	if len(got) != len(want) {
		return false
	}
	scale := 1.0
	for _, x := range want {
		scale = max(scale, math.Abs(float64(x)))
	}
	for j := range want {
		if math.Abs(float64(got[j]-want[j])) > 1e-6*scale {
			return false
		}
	}
	return true
}

func norm(v []float32) float64 {
	n := 0.0
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	return math.Sqrt(n)
}

// A model with a pooler (RoFormer-Sim) embeds with it, and /info says so.
func TestTEIEmbedPooler(t *testing.T) {
	m, tok := tinyModel(t, roformer.HeadBase, nil)
	m.EnablePooler()
	for i := range m.Encoder.Pooler.W.Data {
		// The hidden states reach 60 (Scale 30): small weights keep tanh off its flat ends.
		m.Encoder.Pooler.W.Data[i] = float32(math.Sin(float64(i))) * 0.003
	}
	s, err := New(m, tok, Options{Name: "sim"})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]float32
	if code, _, body := post(t, s, "/embed", `{"inputs": ["the whale", "a ship . the sea . good"], "normalize": false}`); code != 200 || json.Unmarshal(body, &got) != nil {
		t.Fatalf("status %d %s", code, body)
	}
	for i, text := range []string{"the whale", "a ship . the sea . good"} {
		want := alone(t, m, tok, text, pipeline.PoolPooler)
		if d := maxDiff(got[i], want); d > 1e-6 || want[0] == 0 || math.Abs(float64(want[0])) > 0.99 {
			t.Errorf("input %d: %v, want the pooler output %v", i, got[i][:3], want[:3])
		}
	}
	var info map[string]any
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/info", nil))
	if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil || info["pooling"] != "pooler" {
		t.Errorf("info %s", rec.Body.String())
	}
}

func TestTEIInfoAndHealth(t *testing.T) {
	m, tok := tinyModel(t, roformer.HeadMaskedLM, nil)
	if err := m.SetPrecision(roformer.PrecisionBF16); err != nil {
		t.Skip("bf16:", err)
	}
	s, err := New(m, tok, Options{Name: "tiny", MaxConcurrentRequests: 7, MaxBatchTokens: 100, MaxInputs: 5})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/info", nil))
	want := `{"model_id":"tiny","served_model_name":"tiny","model_sha":null,"model_dtype":"bfloat16","model_type":{"embedding":{"pooling":"mean"}},"pooling":"mean",` +
		`"max_concurrent_requests":7,"max_input_length":32,"max_batch_tokens":100,"max_batch_requests":32,"max_client_batch_size":5,` +
		`"routes":` + string(must(json.Marshal(s.Info().Endpoints))) + `}`
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("GET /info: %d\n%s\nwant\n%s", rec.Code, rec.Body.String(), want)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	if rec.Code != 200 {
		t.Errorf("GET /health: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/health", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /health: %d", rec.Code)
	}
	for _, e := range []string{"GET /info", "POST /embed", "POST /v1/embeddings", "GET /health"} {
		if !strings.Contains(strings.Join(s.Info().Endpoints, ","), e) {
			t.Errorf("GET /v1/model does not list %s", e)
		}
	}
}

// POST /v1/embeddings: OpenAI's shape, normalized vectors, base64 of the
// little-endian float32 values, usage in tokens, OpenAI's errors.
func TestOpenAIEmbeddings(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadMaskedLM, nil, Options{Name: "tiny", MaxLength: 8})
	var got struct {
		Object string
		Data   []struct {
			Object    string
			Embedding []float32
			Index     int
		}
		Model string
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}
	}
	code, _, body := post(t, s, "/v1/embeddings", `{"input": ["the whale", "a ship . good"], "model": "text-embedding-3-small", "user": "x"}`)
	if code != 200 || json.Unmarshal(body, &got) != nil {
		t.Fatalf("status %d %s", code, body)
	}
	if got.Object != "list" || got.Model != "tiny" || len(got.Data) != 2 || got.Data[1].Object != "embedding" || got.Data[1].Index != 1 ||
		got.Usage.PromptTokens != 4+6 || got.Usage.TotalTokens != 10 {
		t.Errorf("answer %s", body)
	}
	want := alone(t, m, tok, "a ship . good", pipeline.PoolMean)
	pipeline.Normalize(want)
	// Batched with another input, so equal to its run alone within
	// rounding, not bit for bit: a BLAS may block a 2-row product unlike a
	// 1-row one (OpenBLAS on Zen 5 differs in the 7th digit).
	if d := maxDiff(got.Data[1].Embedding, want); d > 1e-6 {
		t.Errorf("vector %v, want %v (max difference %g)", got.Data[1].Embedding[:3], want[:3], d)
	}
	// base64 and dimensions: the same values, cut to 5 and normalized.
	var b64 struct{ Data []struct{ Embedding string } }
	if code, _, body := post(t, s, "/v1/embeddings", `{"input": "a ship . good", "encoding_format": "base64", "dimensions": 5}`); code != 200 || json.Unmarshal(body, &b64) != nil {
		t.Fatalf("status %d %s", code, body)
	}
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 20 {
		t.Fatalf("base64 %q: %v, %d bytes", b64.Data[0].Embedding, err, len(raw))
	}
	want = alone(t, m, tok, "a ship . good", pipeline.PoolMean)[:5]
	pipeline.Normalize(want)
	for j := range want {
		if x := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])); x != want[j] {
			t.Errorf("base64 value %d: %g, want %g", j, x, want[j])
		}
	}
	for _, c := range []struct {
		name, body  string
		code        int
		typ, param  string
		msgContains string
	}{
		{"too long", `{"input": "the whale ship sea a . good bad the sea"}`, 400, "invalid_request_error", "input", "limit is 8"},
		{"empty list", `{"input": []}`, 400, "invalid_request_error", "input", "batch is empty"},
		{"empty string", `{"input": ""}`, 400, "invalid_request_error", "input", "input 0 is empty"},
		{"token ids", `{"input": [[1, 2]]}`, 400, "invalid_request_error", "input", "token ids"},
		{"format", `{"input": "a", "encoding_format": "int8"}`, 400, "invalid_request_error", "encoding_format", "encoding_format"},
		{"dimensions", `{"input": "a", "dimensions": 100}`, 400, "invalid_request_error", "dimensions", "vector size 16"},
		{"not JSON", `{"input"`, 400, "invalid_request_error", "", "request body"},
	} {
		code, _, body := post(t, s, "/v1/embeddings", c.body)
		var e struct {
			Error struct {
				Message     string
				Type        string
				Param, Code *string
			}
		}
		if err := json.Unmarshal(body, &e); err != nil || code != c.code || e.Error.Type != c.typ || !strings.Contains(e.Error.Message, c.msgContains) ||
			(c.param == "") != (e.Error.Param == nil) || (e.Error.Param != nil && *e.Error.Param != c.param) {
			t.Errorf("%s: %d %s", c.name, code, body)
		}
	}
}

// Shutting down: Close fails what waits in the queue with 503, and later
// requests too.
func TestClose(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	release := make(chan struct{})
	var once sync.Once
	s.beforeBatch = func() { once.Do(func() { <-release }) }
	done := make(chan int)
	go func() {
		code, _, _ := post(t, s, "/embed", `{"inputs": "the sea"}`)
		done <- code
	}()
	waitFor(t, func() bool { return len(s.slots) == 1 && s.preparing.Load() == 0 })
	s.gate <- struct{}{} // a fill-mask forward is running: the batch waits for it
	close(release)
	s.Close()
	if code := <-done; code != http.StatusServiceUnavailable {
		t.Errorf("queued request at Close: %d, want 503", code)
	}
	<-s.gate
	if code, _, _ := post(t, s, "/embed", `{"inputs": "the sea"}`); code != http.StatusTooManyRequests {
		t.Errorf("request after Close: %d, want 429", code)
	}
}

// Many clients at once, some leaving early: every answer is right or a
// 503 for the ones that left, and no slot stays held.
func TestConcurrentClients(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadBase, nil, Options{MaxBatchRequests: 5, MaxBatchTokens: 60})
	texts := []string{"the", "the whale", "a ship . the sea . good", "bad bad", "the sea the sea the sea the whale . a ship"}
	wants := make([][]float32, len(texts))
	for i, text := range texts {
		wants[i] = alone(t, m, tok, text, pipeline.PoolMean)
	}
	var wg sync.WaitGroup
	for k := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := k % len(texts)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if k%7 == 3 {
				cancel()
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, jsonRequest("POST", "/embed", strings.NewReader(fmt.Sprintf(`{"inputs": [%q, %q], "normalize": false}`, texts[i], texts[(i+1)%len(texts)]))).WithContext(ctx))
			if k%7 == 3 {
				if rec.Code != 200 && rec.Code != 503 {
					t.Errorf("client %d (left): %d", k, rec.Code)
				}
				return
			}
			var v [][]float32
			if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &v) != nil {
				t.Errorf("client %d: %d %s", k, rec.Code, rec.Body.String())
				return
			}
			if !closeTo(v[0], wants[i]) || !closeTo(v[1], wants[(i+1)%len(texts)]) {
				t.Errorf("client %d: vectors differ from the inputs alone", k)
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool { return len(s.slots) == 0 })
}

func maxDiff(a, b []float32) float64 {
	w := 0.0
	for i := range a {
		w = max(w, math.Abs(float64(a[i]-b[i])))
	}
	return w
}

// A client that leaves gives its slot back at once, not when the scheduler
// next forms a batch: clients that leave in a crowd must not fill the queue
// and turn live requests away with 429 (bench/serve's disconnect check).
func TestLeftClientsFreeTheirSlots(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxConcurrentRequests: 2})
	release := make(chan struct{})
	var once sync.Once
	s.beforeBatch = func() { once.Do(func() { <-release }) } // the scheduler is busy
	for i := 0; i < 5; i++ {                                 // more leavers than slots
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int)
		go func() {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, jsonRequest("POST", "/embed", strings.NewReader(`{"inputs": "the sea"}`)).WithContext(ctx))
			done <- rec.Code
		}()
		waitFor(t, func() bool { return s.preparing.Load() == 0 && len(s.slots) >= 1 })
		cancel()
		if code := <-done; code != http.StatusServiceUnavailable {
			t.Fatalf("leaver %d: status %d, want 503", i, code)
		}
		if n := len(s.slots); n != 0 {
			t.Fatalf("leaver %d: %d slots still held while the scheduler is busy", i, n)
		}
	}
	close(release)
	if code, _, body := post(t, s, "/embed", `{"inputs": "the whale"}`); code != 200 {
		t.Errorf("a live request after the leavers: %d %s", code, body)
	}
}

// Concurrent /embed requests of mixed lengths run in batches of several
// shapes on the server's one Session, whose buffers each batch reuses:
// every answer is its text's vector run alone (within 1e-6, as batching
// allows), also the answers of early batches, which later ones would have
// overwritten had a vector kept the session's memory.
func TestMixedLengthsOneSession(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadBase, nil, Options{MaxBatchRequests: 3, MaxBatchTokens: 40})
	texts := []string{"the", "a ship . the sea . good", "the whale", "the sea the sea the sea the whale . a ship . good bad", "bad bad", "whales", "the sea the sea the whale"}
	var mu sync.Mutex
	shapes := map[[2]int]bool{}
	s.afterForward = func(b, tokens int) { mu.Lock(); shapes[[2]int{b, tokens}] = true; mu.Unlock() }
	const rounds, copies = 3, 2
	got := make([][]float32, rounds*copies*len(texts))
	for round := range rounds {
		var wg sync.WaitGroup
		for k := range copies * len(texts) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, _, body := post(t, s, "/embed", fmt.Sprintf(`{"inputs": %q, "normalize": false}`, texts[k%len(texts)]))
				var v [][]float32
				if code != 200 || json.Unmarshal(body, &v) != nil || len(v) != 1 {
					t.Errorf("round %d, request %d: status %d %s", round, k, code, body)
					return
				}
				got[round*copies*len(texts)+k] = v[0]
			}()
		}
		wg.Wait()
	}
	for i, v := range got {
		text := texts[i%len(texts)]
		if want := alone(t, m, tok, text, pipeline.PoolMean); v != nil && !closeTo(v, want) {
			t.Errorf("request %d (%q): differs from the text alone by %g", i, text, maxDiff(v, want))
		}
	}
	if len(shapes) < 3 {
		t.Errorf("the batches had %d shapes (%v), want several", len(shapes), shapes)
	}
	waitFor(t, func() bool { return len(s.slots) == 0 })
}
