package server

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

var words = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "whale", "ship", "sea", "a", ".", "##s", "good", "bad"}

func tinyModel(t testing.TB, head roformer.Head, labels []string) (*roformer.Model, *tokenizer.Tokenizer) {
	t.Helper()
	// Scale 30: the predictions far from uniform
	return testmodel.Tiny{Words: words, Head: head, Seed: 5, MaxPositions: 32, Labels: labels, Scale: 30}.Build(t)
}

func newServer(t testing.TB, head roformer.Head, labels []string, opts Options) (*Server, *roformer.Model, *tokenizer.Tokenizer) {
	t.Helper()
	m, tok := tinyModel(t, head, labels)
	s, err := New(m, tok, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, m, tok
}

// jsonRequest is a request with body, sent as JSON (Content-Type:
// application/json) when the method is POST.
func jsonRequest(method, path string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, path, body)
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// call sends body to s and decodes the JSON answer into out (when not nil);
// it returns the status and the error message of an error answer.
func call(t testing.TB, s http.Handler, method, path, body string, out any) (int, string) {
	t.Helper()
	req := jsonRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, body %q", method, path, ct, rec.Body.String())
	}
	if rec.Code != http.StatusOK {
		var e struct{ Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
			t.Fatalf("%s %s: status %d with a body that is not a JSON error: %q", method, path, rec.Code, rec.Body.String())
		}
		return rec.Code, e.Error
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v in %q", method, path, err, rec.Body.String())
		}
	}
	return rec.Code, ""
}

func TestFillMaskEqualsPipeline(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	var got FillMaskResponse
	if code, msg := call(t, s, "POST", "/v1/fill-mask", `{"inputs": ["the [MASK] sea .", "a ship [MASK] the [MASK]"], "top_k": 3}`, &got); code != 200 {
		t.Fatalf("status %d: %s", code, msg)
	}
	for i, text := range []string{"the [MASK] sea .", "a ship [MASK] the [MASK]"} {
		want, err := pipeline.FillMask(context.Background(), m, tok, text, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Results[i]) != len(want) {
			t.Fatalf("input %d: %d masks, want %d", i, len(got.Results[i]), len(want))
		}
		for k := range want {
			for j := range want[k] {
				g, w := got.Results[i][k][j], want[k][j]
				if g.ID != w.ID || g.Token != w.Token || g.Sequence != w.Sequence || math.Abs(g.Score-w.Score) > 1e-12 {
					t.Errorf("input %d mask %d candidate %d: %+v, want %+v", i, k, j, g, w)
				}
			}
		}
	}
	// A single string is one input.
	var one FillMaskResponse
	if code, msg := call(t, s, "POST", "/v1/fill-mask", `{"inputs": "the [MASK] sea ."}`, &one); code != 200 || len(one.Results) != 1 || len(one.Results[0][0]) != 5 {
		t.Fatalf("single input: status %d %s, %d results", code, msg, len(one.Results))
	}
}

// Embeddings of a batch with padding equal those of each input alone, and
// the [CLS] pooling is row 0 of the last hidden state.
func TestEmbed(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadBase, nil, Options{})
	texts := []string{"the whale", "a ship . the sea . good", "bad"}
	for _, pooling := range []string{"cls", "mean"} {
		var batch EmbedResponse
		body, _ := json.Marshal(EmbedRequest{Inputs: Inputs{{Text: texts[0]}, {Text: texts[1]}, {Text: texts[2]}}, Pooling: pooling})
		if code, msg := call(t, s, "POST", "/v1/embed", string(body), &batch); code != 200 {
			t.Fatalf("status %d: %s", code, msg)
		}
		if batch.Dim != 16 || len(batch.Embeddings) != 3 {
			t.Fatalf("dim %d, %d vectors", batch.Dim, len(batch.Embeddings))
		}
		for i, text := range texts {
			enc, _ := tok.Encode(text, tokenizer.EncodeOptions{})
			ids := make([]int32, len(enc.IDs))
			for j, id := range enc.IDs {
				ids[j] = int32(id)
			}
			out, err := m.Forward(context.Background(), &roformer.Batch{InputIDs: ids, B: 1, T: len(ids)}, nil, roformer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			H, T := 16, len(ids)
			for h := range H {
				want := float64(out.LastHiddenState.Data[h])
				if pooling == "mean" {
					want = 0
					for tt := range T {
						want += float64(out.LastHiddenState.Data[tt*H+h])
					}
					want /= float64(T)
				}
				if d := math.Abs(float64(batch.Embeddings[i][h]) - want); d > 1e-4*math.Max(1, math.Abs(want)) {
					t.Fatalf("%s pooling, input %d, dim %d: %g, alone %g", pooling, i, h, batch.Embeddings[i][h], want)
				}
			}
		}
	}
	var unit EmbedResponse
	if code, msg := call(t, s, "POST", "/v1/embed", `{"inputs": ["the sea"], "normalize": true}`, &unit); code != 200 {
		t.Fatalf("status %d: %s", code, msg)
	}
	n := 0.0
	for _, x := range unit.Embeddings[0] {
		n += float64(x) * float64(x)
	}
	if math.Abs(n-1) > 1e-5 {
		t.Errorf("normalized vector has squared norm %g", n)
	}
}

func TestEmbedTruncates(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxLength: 6})
	var got EmbedResponse
	if code, msg := call(t, s, "POST", "/v1/embed", `{"inputs": ["the whale ship sea a . the whale", "the sea"]}`, &got); code != 200 {
		t.Fatalf("status %d: %s", code, msg)
	}
	if got.Truncated != 1 {
		t.Errorf("truncated %d, want 1", got.Truncated)
	}
}

func TestTokenize(t *testing.T) {
	s, _, tok := newServer(t, roformer.HeadBase, nil, Options{})
	var got struct{ Results []TokenizeResult }
	if code, msg := call(t, s, "POST", "/v1/tokenize", `{"inputs": ["the whales"]}`, &got); code != 200 {
		t.Fatalf("status %d: %s", code, msg)
	}
	want, _ := tok.Encode("the whales", tokenizer.EncodeOptions{})
	if strings.Join(got.Results[0].Tokens, " ") != strings.Join(want.Tokens, " ") || len(got.Results[0].IDs) != len(want.IDs) {
		t.Errorf("tokens %v, want %v", got.Results[0].Tokens, want.Tokens)
	}
}

// Bad requests get a status and a message that says what is wrong.
func TestBadRequests(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{MaxInputs: 2, MaxBodyBytes: 200, MaxLength: 8})
	base, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	for _, c := range []struct {
		name         string
		h            http.Handler
		method, path string
		body         string
		code         int
		msg          string
	}{
		{"not JSON", s, "POST", "/v1/fill-mask", `{"inputs": `, 400, "request body"},
		{"unknown field", s, "POST", "/v1/fill-mask", `{"inputs": ["the [MASK]"], "topk": 3}`, 400, "topk"},
		{"two values", s, "POST", "/v1/fill-mask", `{"inputs": ["the [MASK]"]} {}`, 400, "more than one"},
		{"no inputs", s, "POST", "/v1/fill-mask", `{}`, 400, "inputs"},
		{"too many inputs", s, "POST", "/v1/fill-mask", `{"inputs": ["[MASK]", "[MASK]", "[MASK]"]}`, 400, "limit is 2"},
		{"input of the wrong type", s, "POST", "/v1/embed", `{"inputs": [3]}`, 400, "input 0"},
		{"body too large", s, "POST", "/v1/fill-mask", `{"inputs": ["` + strings.Repeat("the ", 60) + `"]}`, 413, "200 bytes"},
		{"no mask", s, "POST", "/v1/fill-mask", `{"inputs": ["the sea"]}`, 400, "no [MASK]"},
		{"too long for fill-mask", s, "POST", "/v1/fill-mask", `{"inputs": ["the [MASK] the sea the sea the sea"]}`, 400, "limit is 8"},
		{"top_k", s, "POST", "/v1/fill-mask", `{"inputs": ["the [MASK]"], "top_k": 1000}`, 400, "top_k 1000"},
		{"pooling", s, "POST", "/v1/embed", `{"inputs": ["the"], "pooling": "median"}`, 400, "pooling"},
		{"fill-mask on a base model", base, "POST", "/v1/fill-mask", `{"inputs": ["the [MASK]"]}`, 404, "masked-LM"},
		{"no such endpoint", s, "GET", "/v2/anything", ``, 404, "/v2/anything"},
		{"pair to fill-mask", s, "POST", "/v1/fill-mask", `{"inputs": [{"text": "[MASK]", "text_pair": "sea"}]}`, 400, "pairs"},
		{"null input", s, "POST", "/v1/embed", `{"inputs": [null]}`, 400, "input 0 is null"},
		{"input without text", s, "POST", "/v1/embed", `{"inputs": [{}]}`, 400, `no "text"`},
		{"data after the body", s, "POST", "/v1/embed", `{"inputs": ["the"]}]]`, 400, "data after"},
	} {
		code, msg := call(t, c.h, c.method, c.path, c.body, nil)
		if code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: status %d %q, want %d and a message with %q", c.name, code, msg, c.code, c.msg)
		}
	}
	if code, msg := call(t, s, "GET", "/v1/fill-mask", "", nil); code != http.StatusMethodNotAllowed || !strings.Contains(msg, "takes POST") {
		t.Errorf("GET /v1/fill-mask: status %d %q, want 405", code, msg)
	}
	var h map[string]string
	if code, _ := call(t, s, "GET", "/healthz", "", &h); code != 200 || h["status"] != "ok" {
		t.Errorf("healthz: %d %v", code, h)
	}
}

// A request whose client has gone while it waits for another's forward pass
// gets 503 and does not run.
func TestCancelledWhileWaiting(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	s.gate <- struct{}{} // another request is running
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := jsonRequest("POST", "/v1/fill-mask", strings.NewReader(`{"inputs": ["the [MASK]"]}`)).WithContext(ctx)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503: %s", rec.Code, rec.Body.String())
	}
	<-s.gate
}

// A panic inside a forward pass frees the model for the next request.
func TestGateReleasedAfterPanic(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	func() {
		defer func() { _ = recover() }()
		s.run(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/embed", nil), func(context.Context) error { panic("boom") })
	}()
	select {
	case s.gate <- struct{}{}:
		<-s.gate
	default:
		t.Fatal("the gate is still held after a panic")
	}
}

// A model that answers NaN gets a 500 with a JSON error, not a 200 with a
// broken body.
func TestNaNAnswer(t *testing.T) {
	s, m, _ := newServer(t, roformer.HeadBase, nil, Options{})
	for _, p := range m.Params() {
		for i := range p.Data {
			p.Data[i] = float32(math.NaN())
		}
	}
	if code, msg := call(t, s, "POST", "/v1/embed", `{"inputs": ["the sea"]}`, nil); code != 500 || !strings.Contains(msg, "encoding the answer") {
		t.Errorf("NaN embedding: %d %q", code, msg)
	}
}

// Load picks the head from the folder's config.json and the tokenizer from
// its files, as `roformer pretrain` writes them.
func TestLoadFolder(t *testing.T) {
	m, tok := tinyModel(t, roformer.HeadMaskedLM, nil)
	dir := filepath.Join(t.TempDir(), "model")
	testmodel.Save(t, dir, m, tok)
	s, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	info := s.Info()
	if info.Name != "model" || info.Head != "masked-lm" || info.MaxLength != 32 || info.VocabSize != len(words) {
		t.Errorf("info %+v", info)
	}
	if _, err := Load(t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("empty folder: %v", err)
	}
}

func TestNewChecks(t *testing.T) {
	m, tok := tinyModel(t, roformer.HeadBase, nil)
	if _, err := New(m, tok, Options{MaxLength: 2}); err == nil {
		t.Error("max length 2 accepted")
	}
	if _, err := New(nil, tok, Options{}); err == nil {
		t.Error("nil model accepted")
	}
	cfg := m.Config
	cfg.PositionEmbeddingType = roformer.PosLearned
	learned, err := roformer.New(cfg, roformer.HeadBase)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(learned, tok, Options{MaxLength: 64}); err == nil || !strings.Contains(err.Error(), "max_position_embeddings 32") {
		t.Errorf("max length past a learned position table: %v", err)
	}
	small, _ := tinyModel(t, roformer.HeadBase, nil)
	small.Config.VocabSize = 5
	if _, err := New(small, tok, Options{}); err == nil || !strings.Contains(err.Error(), "14 tokens") {
		t.Errorf("tokenizer larger than the model: %v", err)
	}
}
