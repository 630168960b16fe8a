package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// generateAlone is what Generate gives for text by itself, decoded as the
// route decodes it.
func generateAlone(t *testing.T, m *roformer.Model, tok *tokenizer.Tokenizer, text string, o generate.Options, unilm bool) ([]int32, string) {
	t.Helper()
	enc, err := tok.Encode(text, tokenizer.EncodeOptions{NoSpecialTokens: !unilm})
	if err != nil {
		t.Fatal(err)
	}
	prompt := tokenizer.Int32s(enc.IDs)
	mode := roformer.DecodeCausal
	if unilm {
		mode = roformer.DecodeUniLM
	}
	dec, err := m.NewDecoder(roformer.DecoderOptions{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := generate.Generate(context.Background(), dec, [][]int32{prompt}, o)
	if err != nil {
		t.Fatal(err)
	}
	ids := gen.Sequences[0][len(prompt):]
	var kept []int
	for _, id := range ids {
		if o.EOS >= 0 && int(id) == o.EOS {
			break
		}
		kept = append(kept, int(id))
	}
	return ids, tok.Decode(kept, true)
}

// events reads a server-sent-events body.
func events(t *testing.T, body []byte) []map[string]json.RawMessage {
	t.Helper()
	var out []map[string]json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		var ev map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%v in %q", err, data)
		}
		out = append(out, ev)
	}
	return out
}

func TestGenerateCausal(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadCausalLM, nil, Options{})
	_, want := generateAlone(t, m, tok, "the whale", generate.Options{MaxNewTokens: 6, EOS: -1}, false)
	var res GenerateResponse
	if code, kind := teiCall(t, s, "/generate", `{"inputs": "the whale", "parameters": {"max_new_tokens": 6}}`, &res); code != 200 {
		t.Fatalf("status %d %s", code, kind)
	}
	if res.GeneratedText != want {
		t.Errorf("generated_text %q, want %q", res.GeneratedText, want)
	}
	// Sampling with a seed is Generate's sampling with that seed.
	ids, want := generateAlone(t, m, tok, "the whale", generate.Options{MaxNewTokens: 5, EOS: -1,
		Strategy: generate.Sample, Temperature: 0.7, TopK: 4, Seed: 9}, false)
	if code, _ := teiCall(t, s, "/generate", `{"inputs": "the whale", "parameters": {"max_new_tokens": 5, "do_sample": true, "temperature": 0.7, "top_k": 4, "seed": 9}}`, &res); code != 200 || res.GeneratedText != want {
		t.Errorf("sampled: %d %q, want %q", code, res.GeneratedText, want)
	}
	// Streaming: one event per token, ids as Generate's, the whole text on
	// the last one only.
	code, h, body := post(t, s, "/generate", `{"inputs": "the whale", "stream": true, "parameters": {"max_new_tokens": 5, "do_sample": true, "temperature": 0.7, "top_k": 4, "seed": 9}}`)
	if code != 200 || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %q %s", code, h.Get("Content-Type"), body)
	}
	evs := events(t, body)
	if len(evs) != len(ids) {
		t.Fatalf("%d events for %d tokens: %s", len(evs), len(ids), body)
	}
	text := ""
	for i, ev := range evs {
		var tk StreamToken
		if err := json.Unmarshal(ev["token"], &tk); err != nil {
			t.Fatal(err)
		}
		if tk.ID != int(ids[i]) {
			t.Errorf("event %d: id %d, want %d", i, tk.ID, ids[i])
		}
		text += tk.Text
		last := i == len(evs)-1
		if got := string(ev["generated_text"]); (got == "null") == last {
			t.Errorf("event %d: generated_text %s", i, got)
		}
		if last {
			var g string
			_ = json.Unmarshal(ev["generated_text"], &g)
			if g != want {
				t.Errorf("last generated_text %q, want %q", g, want)
			}
		}
	}
	if text != want {
		t.Errorf("the tokens' texts join to %q, want %q", text, want)
	}
	// Beam search.
	_, want = generateAlone(t, m, tok, "the ship", generate.Options{MaxNewTokens: 4, EOS: -1, Strategy: generate.Beam, NumBeams: 3, LengthPenalty: 1}, false)
	if code, _ := teiCall(t, s, "/generate", `{"inputs": "the ship", "parameters": {"max_new_tokens": 4, "num_beams": 3}}`, &res); code != 200 || res.GeneratedText != want {
		t.Errorf("beams: %d %q, want %q", code, res.GeneratedText, want)
	}
}

func TestGenerateUniLM(t *testing.T) {
	m, tok := tinyModel(t, roformer.HeadMaskedLM, nil)
	m.Config.IsDecoder = true
	m.EnablePooler()
	s, err := New(m, tok, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := generate.Options{MaxNewTokens: 8, EOS: tok.SepID()}
	_, want := generateAlone(t, m, tok, "the sea", o, true)
	var res GenerateResponse
	if code, kind := teiCall(t, s, "/generate", `{"inputs": "the sea", "parameters": {"max_new_tokens": 8}}`, &res); code != 200 || res.GeneratedText != want {
		t.Errorf("%d %s: %q, want %q", code, kind, res.GeneratedText, want)
	}
	if !strings.Contains(strings.Join(s.Info().Endpoints, " "), "POST /generate") {
		t.Errorf("/v1/model does not list /generate: %v", s.Info().Endpoints)
	}
	// A masked-LM model without is_decoder is not a generator: /generate
	// is not one of its routes (404, and not in /info), asked for UniLM
	// decoding or not.
	m2, tok2 := tinyModel(t, roformer.HeadMaskedLM, nil)
	s2, _ := New(m2, tok2, Options{})
	for _, body := range []string{`{"inputs": "the sea"}`, `{"inputs": "the sea", "parameters": {"max_new_tokens": 8, "unilm": true}}`} {
		if code, kind := teiCall(t, s2, "/generate", body, nil); code != http.StatusNotFound || kind != "Backend" {
			t.Errorf("masked-LM %s: %d %s, want 404", body, code, kind)
		}
	}
	if slices.Contains(s2.Info().Endpoints, "POST /generate") || slices.Contains(s2.TEIInfo().Routes, "POST /generate") {
		t.Errorf("a masked-LM model lists /generate: %v", s2.Info().Endpoints)
	}
}

func TestGenerateErrors(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{MaxLength: 12})
	for _, c := range []struct {
		body   string
		status int
		kind   string
	}{
		{`{"parameters": {}}`, 422, "Validation"},
		{`{"inputs": "the", "parameters": {"max_new_tokens": 0}}`, 422, "Validation"},
		{`{"inputs": "the", "parameters": {"temperature": 0}}`, 422, "Validation"},
		{`{"inputs": "the", "parameters": {"top_p": 1.5}}`, 422, "Validation"},
		{`{"inputs": "the", "parameters": {"top_k": -1}}`, 422, "Validation"},
		{`{"inputs": "the", "parameters": {"repetition_penalty": -1}}`, 422, "Validation"},
		{`{"inputs": "the", "parameters": {"num_beams": 2, "do_sample": true}}`, 422, "Validation"},
		{`{"inputs": "the", "stream": true, "parameters": {"num_beams": 2}}`, 422, "Validation"},
		{`{"inputs": "the whale", "parameters": {"max_new_tokens": 11}}`, 422, "Validation"},
		{`{"inputs": ""}`, 422, "Validation"},
		{`{"inputs": "the"`, 422, "Validation"},
	} {
		if code, kind := teiCall(t, s, "/generate", c.body, nil); code != c.status || kind != c.kind {
			t.Errorf("%s: %d %s, want %d %s", c.body, code, kind, c.status, c.kind)
		}
	}
	cls, _, _ := newServer(t, roformer.HeadSequenceCls, []string{"a", "b"}, Options{})
	if code, kind := teiCall(t, cls, "/generate", `{"inputs": "the"}`, nil); code != 404 || kind != "Backend" {
		t.Errorf("classifier: %d %s, want 404 Backend", code, kind)
	}
	if strings.Contains(strings.Join(cls.Info().Endpoints, " "), "/generate") {
		t.Errorf("a classifier lists /generate")
	}
}

// cancelWriter cancels the request once n events are written.
type cancelWriter struct {
	*httptest.ResponseRecorder
	n, seen int
	cancel  func()
}

func (w *cancelWriter) Write(b []byte) (int, error) {
	w.seen++
	if w.seen == w.n {
		w.cancel()
	}
	return w.ResponseRecorder.Write(b)
}

func TestGenerateStreamStopsWhenClientLeaves(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := jsonRequest("POST", "/generate", strings.NewReader(`{"inputs": "the", "stream": true, "parameters": {"max_new_tokens": 20}}`)).WithContext(ctx)
	w := &cancelWriter{ResponseRecorder: httptest.NewRecorder(), n: 2, cancel: cancel}
	s.ServeHTTP(w, req)
	if evs := events(t, w.Body.Bytes()); len(evs) != 2 {
		t.Errorf("%d events after the client left at the second: %s", len(evs), w.Body.Bytes())
	}
	// The gate is free again.
	select {
	case s.gate <- struct{}{}:
		<-s.gate
	default:
		t.Fatal("the gate is still held")
	}
}

func TestGenerateWaitsForTheGate(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{})
	s.gate <- struct{}{} // another forward is running
	ctx, cancel := context.WithCancel(context.Background())
	req := jsonRequest("POST", "/generate", strings.NewReader(`{"inputs": "the"}`)).WithContext(ctx)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { s.ServeHTTP(rec, req); close(done) }()
	select {
	case <-done:
		t.Fatal("generation ran while the gate was held")
	default:
	}
	cancel()
	<-done
	<-s.gate
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", rec.Code)
	}
}
