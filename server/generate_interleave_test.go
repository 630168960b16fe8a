package server

import (
	"fmt"
	"testing"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/model/roformer"
)

// A long generation gives the gate back between its passes: at its 5th
// pass (the hook runs before it waits for the gate) the gate is free, an
// embedding request and a whole second generation are answered while it is
// still in progress, and both generations give what each gives alone.
func TestGenerateInterleaves(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadCausalLM, nil, Options{MaxLength: 256})
	const long, short = 200, 4
	_, wantLong := generateAlone(t, m, tok, "the whale", generate.Options{MaxNewTokens: long, EOS: -1}, false)
	_, wantShort := generateAlone(t, m, tok, "the sea", generate.Options{MaxNewTokens: short, EOS: -1}, false)
	var (
		nested, met bool
		passes      int
	)
	s.beforeGeneratePass = func(pass int) {
		if nested {
			return // the second generation's passes
		}
		passes++
		if pass != 5 {
			return
		}
		met = true
		select {
		case s.gate <- struct{}{}:
			<-s.gate
		default:
			t.Error("the gate is held between a generation's passes")
			return // an embedding would wait for the whole generation
		}
		if code, _, body := post(t, s, "/embed", `{"inputs": "the sea"}`); code != 200 {
			t.Errorf("embedding during a generation: %d %s", code, body)
		}
		nested = true
		var res GenerateResponse
		if code, kind := teiCall(t, s, "/generate", fmt.Sprintf(`{"inputs": "the sea", "parameters": {"max_new_tokens": %d}}`, short), &res); code != 200 || res.GeneratedText != wantShort {
			t.Errorf("generation during a generation: %d %s %q, want %q", code, kind, res.GeneratedText, wantShort)
		}
		nested = false
	}
	var res GenerateResponse
	if code, kind := teiCall(t, s, "/generate", fmt.Sprintf(`{"inputs": "the whale", "parameters": {"max_new_tokens": %d}}`, long), &res); code != 200 {
		t.Fatalf("status %d %s", code, kind)
	}
	if !met || passes != long {
		t.Errorf("met the 5th pass %v, %d passes, want %d (the prompt's and one a new token but the last)", met, passes, long)
	}
	if res.GeneratedText != wantLong {
		t.Errorf("interleaved generation %q, want %q", res.GeneratedText, wantLong)
	}
}

// A generation waiting between its passes stops when the server closes:
// 503, the gate not taken.
func TestGenerateStopsWhenClosed(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{})
	s.beforeGeneratePass = func(pass int) {
		if pass == 3 {
			s.gate <- struct{}{} // another forward runs, and the server closes
			s.Close()
		}
	}
	code, kind := teiCall(t, s, "/generate", `{"inputs": "the whale", "parameters": {"max_new_tokens": 10}}`, nil)
	if code != 503 || kind != "Unhealthy" {
		t.Errorf("closed while waiting: %d %s, want 503 Unhealthy", code, kind)
	}
	<-s.gate
}
