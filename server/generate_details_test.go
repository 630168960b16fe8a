package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// scoresAlone is Generate's ids and processed scores for text alone (the
// scores each id was chosen from).
func scoresAlone(t *testing.T, m *roformer.Model, tok *tokenizer.Tokenizer, text string, o generate.Options) ([]int32, [][]float32) {
	t.Helper()
	enc, err := tok.Encode(text, tokenizer.EncodeOptions{NoSpecialTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	prompt := tokenizer.Int32s(enc.IDs)
	dec, err := m.NewDecoder(roformer.DecoderOptions{Mode: roformer.DecodeCausal})
	if err != nil {
		t.Fatal(err)
	}
	o.OutputScores = true
	gen, err := generate.Generate(context.Background(), dec, [][]int32{prompt}, o)
	if err != nil {
		t.Fatal(err)
	}
	return gen.Sequences[0][len(prompt):], gen.Scores[0]
}

// logSoftmax is log softmax(z)_v in float64, by hand.
func logSoftmax(z []float32, v int) float64 {
	mx := math.Inf(-1)
	for _, x := range z {
		mx = max(mx, float64(x))
	}
	sum := 0.0
	for _, x := range z {
		sum += math.Exp(float64(x) - mx)
	}
	return float64(z[v]) - mx - math.Log(sum)
}

// details: true gives each token's id, text and log-probability under the
// scores it was chosen from (the penalised logits for greedy, the warped
// ones for sampling), the top_n_tokens best ones, the finish reason, the
// count and the seed when sampling; a stream gives the same tokens, the
// details on its last event.
func TestGenerateDetails(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadCausalLM, nil, Options{})
	for _, c := range []struct {
		params string
		o      generate.Options
	}{
		{`"max_new_tokens": 6, "repetition_penalty": 1.2`, generate.Options{MaxNewTokens: 6, EOS: -1, RepetitionPenalty: 1.2}},
		{`"max_new_tokens": 5, "temperature": 0.7, "top_k": 4, "seed": 9`, generate.Options{MaxNewTokens: 5, EOS: -1, Strategy: generate.Sample, Temperature: 0.7, TopK: 4, Seed: 9}},
	} {
		ids, scores := scoresAlone(t, m, tok, "the whale", c.o)
		var res struct {
			GeneratedText string `json:"generated_text"`
			Details       struct {
				GenerateDetails
				Prefill json.RawMessage `json:"prefill"`
			} `json:"details"`
		}
		body := fmt.Sprintf(`{"inputs": "the whale", "parameters": {%s, "details": true, "top_n_tokens": 3}}`, c.params)
		if code, kind := teiCall(t, s, "/generate", body, &res); code != 200 {
			t.Fatalf("%s: %d %s", body, code, kind)
		}
		d := res.Details
		if d.FinishReason != "length" || d.GeneratedTokens != len(ids) || string(d.Prefill) != "[]" || len(d.Tokens) != len(ids) || len(d.TopTokens) != len(ids) {
			t.Fatalf("%s: details %+v, want length, %d tokens, prefill []", body, d, len(ids))
		}
		if sample := c.o.Strategy == generate.Sample; (d.Seed != nil) != sample || sample && *d.Seed != c.o.Seed {
			t.Errorf("%s: seed %v", body, d.Seed)
		}
		text := ""
		for i, tk := range d.Tokens {
			want := logSoftmax(scores[i], int(ids[i]))
			if tk.ID != int(ids[i]) || math.Abs(tk.LogProb-want) > 1e-9 || tk.LogProb > 0 {
				t.Errorf("%s token %d: %+v, want id %d logprob %g", body, i, tk, ids[i], want)
			}
			text += tk.Text
			top := d.TopTokens[i]
			if len(top) == 0 || len(top) > 3 {
				t.Fatalf("%s step %d: %d top tokens", body, i, len(top))
			}
			for j, tp := range top {
				if w := logSoftmax(scores[i], tp.ID); math.Abs(tp.LogProb-w) > 1e-9 || j > 0 && tp.LogProb > top[j-1].LogProb || tp.LogProb < tk.LogProb && j == 0 {
					t.Errorf("%s step %d top %d: %+v (logprob by hand %g)", body, i, j, tp, w)
				}
			}
			if c.o.Strategy == generate.Greedy && top[0].ID != tk.ID && top[0].LogProb != tk.LogProb {
				t.Errorf("greedy step %d: chose %+v, the best is %+v", i, tk, top[0])
			}
		}
		if text != res.GeneratedText {
			t.Errorf("%s: the tokens' texts join to %q, generated_text %q", body, text, res.GeneratedText)
		}
		// The stream: the same tokens, each with its logprob and top
		// tokens, the details on the last event only.
		body = strings.Replace(body, `{"inputs"`, `{"stream": true, "inputs"`, 1)
		code, _, raw := post(t, s, "/generate", body)
		evs := events(t, raw)
		if code != 200 || len(evs) != len(ids) {
			t.Fatalf("%s: %d, %d events for %d tokens", body, code, len(evs), len(ids))
		}
		for i, ev := range evs {
			var tk StreamToken
			var top []StreamToken
			_ = json.Unmarshal(ev["token"], &tk)
			_ = json.Unmarshal(ev["top_tokens"], &top)
			if tk != d.Tokens[i] || len(top) != len(d.TopTokens[i]) {
				t.Errorf("%s event %d: %+v with %d top tokens, want %+v with %d", body, i, tk, len(top), d.Tokens[i], len(d.TopTokens[i]))
			}
			last := i == len(evs)-1
			var sd *StreamDetails
			_ = json.Unmarshal(ev["details"], &sd)
			if (sd != nil) != last || last && (sd.FinishReason != "length" || sd.GeneratedTokens != len(ids)) {
				t.Errorf("%s event %d: details %s", body, i, ev["details"])
			}
		}
	}
	// Without details the answer has none; beam search's have no tokens.
	code, _, raw := post(t, s, "/generate", `{"inputs": "the whale", "parameters": {"max_new_tokens": 3}}`)
	if code != 200 || strings.Contains(string(raw), "details") {
		t.Errorf("no details asked: %d %s", code, raw)
	}
	var beams GenerateResponse
	if code, kind := teiCall(t, s, "/generate", `{"inputs": "the ship", "parameters": {"max_new_tokens": 4, "num_beams": 3, "details": true}}`, &beams); code != 200 ||
		beams.Details == nil || beams.Details.FinishReason != "length" || beams.Details.GeneratedTokens != 4 || len(beams.Details.Tokens) != 0 {
		t.Errorf("beams: %d %s %+v", code, kind, beams.Details)
	}
}

// RoFormer-Sim's generation that ends at [SEP] finishes with "eos_token".
func TestGenerateDetailsEOS(t *testing.T) {
	m, tok := tinyModel(t, roformer.HeadMaskedLM, nil)
	m.Config.IsDecoder = true
	m.EnablePooler()
	s, err := New(m, tok, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The most new tokens before [SEP] among a few prompts.
	for _, text := range []string{"the sea", "the whale", "a ship", "the"} {
		ids, _ := generateAlone(t, m, tok, text, generate.Options{MaxNewTokens: 24, EOS: tok.SepID()}, true)
		n := len(ids)
		if ids[n-1] != int32(tok.SepID()) {
			continue
		}
		var res GenerateResponse
		if code, kind := teiCall(t, s, "/generate", fmt.Sprintf(`{"inputs": %q, "parameters": {"max_new_tokens": 24, "details": true}}`, text), &res); code != 200 {
			t.Fatalf("%d %s", code, kind)
		}
		d := res.Details
		if d.FinishReason != "eos_token" || d.GeneratedTokens != n || d.Tokens[n-1].ID != tok.SepID() || !d.Tokens[n-1].Special {
			t.Errorf("%q: details %+v, want eos_token after %d tokens, the last [SEP]", text, d, n)
		}
		return
	}
	t.Fatal("no prompt ends at [SEP] within 24 tokens: the eos_token case is untested")
}

// A stop sequence ends the generation at the first token after which the
// new text contains it (the text keeps it), streaming or not; one never
// met leaves the generation to max_new_tokens.
func TestGenerateStop(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadCausalLM, nil, Options{})
	const n = 12
	ids, full := generateAlone(t, m, tok, "the whale", generate.Options{MaxNewTokens: n, EOS: -1}, false)
	prefix := func(k int) string { return tok.Decode(ints(ids[:k]), true) }
	// The stop is the text that the 4th token adds (and a never met
	// one); the answer ends at the first prefix that contains it.
	stop := strings.TrimSpace(strings.TrimPrefix(prefix(4), prefix(3)))
	if stop == "" {
		t.Fatalf("the 4th token of %q adds no text", full)
	}
	k := 1
	for !strings.Contains(prefix(k), stop) {
		k++
	}
	for _, c := range []struct {
		stops  []string
		k      int
		reason string
	}{
		{[]string{stop}, k, "stop_sequence"},
		{[]string{"zzz never", stop}, k, "stop_sequence"},
		{[]string{"zzz never"}, n, "length"},
	} {
		stops, _ := json.Marshal(c.stops)
		body := fmt.Sprintf(`{"inputs": "the whale", "parameters": {"max_new_tokens": %d, "stop": %s, "details": true}}`, n, stops)
		var res GenerateResponse
		if code, kind := teiCall(t, s, "/generate", body, &res); code != 200 {
			t.Fatalf("%s: %d %s", body, code, kind)
		}
		if res.GeneratedText != prefix(c.k) || res.Details.FinishReason != c.reason || res.Details.GeneratedTokens != c.k {
			t.Errorf("stop %v: %q, %+v; want %q, %s after %d tokens", c.stops, res.GeneratedText, res.Details, prefix(c.k), c.reason, c.k)
		}
		body = strings.Replace(body, `{"inputs"`, `{"stream": true, "inputs"`, 1)
		_, _, raw := post(t, s, "/generate", body)
		evs := events(t, raw)
		if len(evs) != c.k {
			t.Fatalf("stop %v: %d events, want %d: %s", c.stops, len(evs), c.k, raw)
		}
		var g string
		var sd StreamDetails
		_ = json.Unmarshal(evs[c.k-1]["generated_text"], &g)
		_ = json.Unmarshal(evs[c.k-1]["details"], &sd)
		if g != prefix(c.k) || sd.FinishReason != c.reason {
			t.Errorf("stop %v streaming: last event %q %+v, want %q %s", c.stops, g, sd, prefix(c.k), c.reason)
		}
	}
	if k >= n {
		t.Errorf("the stop %q met only at the end: untested", stop)
	}
}

// The bounds of stop and top_n_tokens, and what beam search refuses, are
// 422s that name the field and the limit.
func TestGenerateOutputErrors(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadCausalLM, nil, Options{})
	long := strings.Repeat("a", MaxStopBytes+1)
	for _, c := range []struct{ params, want string }{
		{`"stop": ["a", "b", "c", "d", "e"]`, "`stop` supports up to 4 stop sequences. Given: 5"},
		{`"stop": ["a", ""]`, "`stop[1]` must have 1 to 256 bytes. Given: 0 bytes"},
		{`"stop": ["` + long + `"]`, "`stop[0]` must have 1 to 256 bytes. Given: 257 bytes"},
		{`"top_n_tokens": 6`, "`top_n_tokens` must be >= 0 and <= 5. Given: 6"},
		{`"top_n_tokens": -1`, "`top_n_tokens` must be >= 0 and <= 5. Given: -1"},
		{`"num_beams": 2, "stop": ["a"]`, "`stop` does not work with `num_beams` > 1"},
		{`"num_beams": 2, "top_n_tokens": 2`, "`top_n_tokens` does not work with `num_beams` > 1"},
	} {
		code, _, raw := post(t, s, "/generate", `{"inputs": "the", "parameters": {`+c.params+`}}`)
		var e map[string]string
		_ = json.Unmarshal(raw, &e)
		if code != 422 || e["error_type"] != "Validation" || !strings.Contains(e["error"], c.want) {
			t.Errorf("%s: %d %s, want 422 %q", c.params, code, raw, c.want)
		}
	}
}
