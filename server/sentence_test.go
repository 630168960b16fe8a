package server

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stFixture is a folder of ../sentence/testdata/st (saved by
// sentence-transformers, with its encode's vectors; see make_fixtures.py).
type stFixture struct {
	STVersion string   `json:"st_version"`
	Texts     []string `json:"texts"`
	Cases     []struct {
		PromptName *string     `json:"prompt_name"`
		Vectors    [][]float64 `json:"vectors"`
	} `json:"cases"`
}

func stFixtures(t *testing.T) map[string]stFixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "sentence", "testdata", "st", "*", "expected.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures under ../sentence/testdata/st: %v", err)
	}
	out := map[string]stFixture{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx stFixture
		if err := json.Unmarshal(raw, &fx); err != nil {
			t.Fatal(err)
		}
		out[filepath.Dir(f)] = fx
	}
	return out
}

func maxAbs(a []float32, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for j := range b {
		d = max(d, math.Abs(float64(a[j])-b[j]))
	}
	return d
}

// The embedding routes of a sentence-transformers folder give
// SentenceTransformer(folder).encode's vectors within 1e-4: POST /embed
// (with "normalize": false, TEI's default being true, and prompt_name),
// POST /v1/embeddings (the folder's vectors as they are) and POST /v1/embed.
// The server truncates as sentence-transformers does (to max_seq_length)
// when started with --auto-truncate.
func TestSentenceTransformersRoutes(t *testing.T) {
	const tol = 1e-4
	worst := 0.0
	for dir, fx := range stFixtures(t) {
		name := filepath.Base(dir)
		s, err := Load(dir, Options{AutoTruncate: true, MaxInputs: 16})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		texts, _ := json.Marshal(fx.Texts)
		check := func(route string, i int, got []float32, want []float64) {
			d := maxAbs(got, want)
			worst = max(worst, d)
			if d > tol {
				t.Errorf("%s %s: text %d %q: max |ours − sentence-transformers %s| = %.3g", name, route, i, fx.Texts[i], fx.STVersion, d)
			}
		}
		for _, c := range fx.Cases {
			body := `{"inputs": ` + string(texts) + `, "normalize": false`
			label := "/embed"
			if c.PromptName != nil {
				body += `, "prompt_name": "` + *c.PromptName + `"`
				label += " prompt_name " + *c.PromptName
			}
			var vecs [][]float32
			if code, msg := call(t, s, "POST", "/embed", body+"}", &vecs); code != 200 {
				t.Fatalf("%s %s: %d %s", name, label, code, msg)
			}
			for i, want := range c.Vectors {
				check(label, i, vecs[i], want)
			}
			var native EmbedResponse
			if code, msg := call(t, s, "POST", "/v1/embed", body+"}", &native); code != 200 {
				t.Fatalf("%s /v1/embed: %d %s", name, code, msg)
			}
			for i, want := range c.Vectors {
				check("/v1/embed", i, native.Embeddings[i], want)
			}
			if c.PromptName != nil {
				continue // OpenAI's route has no prompt name: the default prompt
			}
			var oa struct {
				Data []struct {
					Embedding []float32 `json:"embedding"`
				} `json:"data"`
			}
			if code, msg := call(t, s, "POST", "/v1/embeddings", `{"input": `+string(texts)+`, "model": "x"}`, &oa); code != 200 {
				t.Fatalf("%s /v1/embeddings: %d %s", name, code, msg)
			}
			for i, want := range c.Vectors {
				check("/v1/embeddings", i, oa.Data[i].Embedding, want)
			}
		}
		s.Close()
	}
	t.Logf("largest difference from sentence-transformers over the routes: %.3g", worst)
}

// A prompt name the folder does not have is a 422 that lists its prompts;
// TEI's /similarity uses the folder's vectors.
func TestSentenceTransformersPromptErrors(t *testing.T) {
	dir := filepath.Join("..", "sentence", "testdata", "st", "prompts")
	s, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	code, msg := call(t, s, "POST", "/embed", `{"inputs": "hello", "prompt_name": "doc"}`, nil)
	if code != 422 || !strings.Contains(msg, "passage, query") {
		t.Fatalf("unknown prompt name: %d %q", code, msg)
	}
	if _, err := Load(dir, Options{DefaultPromptName: "doc"}); err == nil || !strings.Contains(err.Error(), `prompt "doc"`) {
		t.Fatalf("unknown default prompt name: %v", err)
	}
	var sims []float64
	if code, msg := call(t, s, "POST", "/similarity", `{"inputs": {"source_sentence": "hello world", "sentences": ["hello world", "the cat sat"]}}`, &sims); code != 200 {
		t.Fatalf("/similarity: %d %s", code, msg)
	}
	if math.Abs(sims[0]-1) > 1e-6 || sims[1] >= sims[0] {
		t.Fatalf("/similarity: %v", sims)
	}
}

// Under --auto-truncate a request that says "truncate": false is still
// refused when too long (TEI's rule: the request's word wins), and one that
// does not say is cut.
func TestAutoTruncateExplicitFalse(t *testing.T) {
	s, err := Load(filepath.Join("..", "sentence", "testdata", "st", "maxlen_lower"), Options{AutoTruncate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	long := `"the cat sat on the mat and the dog ran to the river in the morning"`
	if code, msg := call(t, s, "POST", "/embed", `{"inputs": `+long+`}`, nil); code != 200 {
		t.Fatalf("no truncate field: %d %s", code, msg)
	}
	for _, route := range []string{"/embed", "/embed_all"} {
		if code, msg := call(t, s, "POST", route, `{"inputs": `+long+`, "truncate": false}`, nil); code != 413 || !strings.Contains(msg, "limit is 10") {
			t.Fatalf("%s \"truncate\": false: %d %s", route, code, msg)
		}
	}
}

// The review's cases: a pair's second text is lowercased as the first;
// the folder's pooling spelled another way keeps include_prompt; a prompt
// with a pair, and Left truncation with a prompt, are refused; a prompt
// that leaves no room for the text is refused when the server starts; and
// --default-prompt "" turns the folder's default prompt off.
func TestSentenceTransformersEdges(t *testing.T) {
	st := filepath.Join("..", "sentence", "testdata", "st")
	lower, err := Load(filepath.Join(st, "maxlen_lower"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lower.Close()
	var a, b EmbedResponse
	call(t, lower, "POST", "/v1/embed", `{"inputs": [{"text": "Hi", "text_pair": "HELLO World"}]}`, &a)
	call(t, lower, "POST", "/v1/embed", `{"inputs": [{"text": "hi", "text_pair": "hello world"}]}`, &b)
	if d := maxAbs(a.Embeddings[0], f64(b.Embeddings[0])); d > 1e-6 {
		t.Errorf("pair not lowercased: differs by %g", d)
	}

	ex, err := Load(filepath.Join(st, "prompts_exclude"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	call(t, ex, "POST", "/v1/embed", `{"inputs": ["hello world"]}`, &a)
	call(t, ex, "POST", "/v1/embed", `{"inputs": ["hello world"], "pooling": "mean+mean"}`, &b)
	if d := maxAbs(a.Embeddings[0], f64(b.Embeddings[0][:16])); d > 1e-6 {
		t.Errorf(`"mean+mean" dropped include_prompt: differs by %g`, d)
	}
	if code, msg := call(t, ex, "POST", "/v1/embed", `{"inputs": [{"text": "a", "text_pair": "b"}]}`, nil); code != 400 || !strings.Contains(msg, "text pair") {
		t.Errorf("prompt with a pair: %d %s", code, msg)
	}
	if code, msg := call(t, ex, "POST", "/embed", `{"inputs": "hello world", "truncate": true, "truncation_direction": "Left"}`, nil); code != 422 || !strings.Contains(msg, "cut the prompt") {
		t.Errorf("Left with a prompt: %d %s", code, msg)
	}
	if _, err := Load(filepath.Join(st, "prompts_exclude"), Options{MaxLength: 3}); err == nil || !strings.Contains(err.Error(), "leaving none for the text") {
		t.Errorf("prompt filling the max length: %v", err)
	}
	none := ""
	off, err := Load(filepath.Join(st, "prompts"), Options{DefaultPrompt: &none})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	on, err := Load(filepath.Join(st, "prompts"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer on.Close()
	call(t, off, "POST", "/v1/embed", `{"inputs": ["hello world"]}`, &a)
	call(t, on, "POST", "/v1/embed", `{"inputs": ["hello world"]}`, &b)
	if maxAbs(a.Embeddings[0], f64(b.Embeddings[0])) < 1e-3 {
		t.Errorf(`--default-prompt "" did not turn the default prompt off`)
	}
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
