package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// hiddenAlone runs ids through m by itself and returns its last hidden
// state, [T][H], in float64.
func hiddenAlone(t *testing.T, m *roformer.Model, ids []int32) [][]float64 {
	t.Helper()
	mask := make([]int32, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	out, err := m.Forward(context.Background(), &roformer.Batch{InputIDs: ids, TokenTypeIDs: make([]int32, len(ids)), AttentionMask: mask, B: 1, T: len(ids)}, nil, roformer.Options{SkipHead: true})
	if err != nil {
		t.Fatal(err)
	}
	H := m.Config.HiddenSize
	hs := make([][]float64, len(ids))
	for p := range hs {
		hs[p] = make([]float64, H)
		for h := range H {
			hs[p][h] = float64(out.LastHiddenState.Data[p*H+h])
		}
	}
	return hs
}

func encodeIDs(t *testing.T, tok *tokenizer.Tokenizer, text string) []int32 {
	t.Helper()
	enc, err := tok.Encode(text, tokenizer.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tokenizer.Int32s(enc.IDs)
}

func TestTEIEmbedAll(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	texts := []string{"the whale", "a ship . the sea . good"}
	var got [][][]float32
	body, _ := json.Marshal(map[string]any{"inputs": texts})
	if code, kind := teiCall(t, s, "/embed_all", string(body), &got); code != 200 {
		t.Fatalf("status %d %s", code, kind)
	}
	if len(got) != len(texts) {
		t.Fatalf("%d inputs answered, want %d", len(got), len(texts))
	}
	for i, text := range texts {
		want := hiddenAlone(t, m, encodeIDs(t, tok, text))
		if len(got[i]) != len(want) {
			t.Fatalf("input %d: %d tokens, want %d", i, len(got[i]), len(want))
		}
		for p := range want {
			for h := range want[p] {
				if d := math.Abs(float64(got[i][p][h]) - want[p][h]); d > 1e-4*max(1, math.Abs(want[p][h])) {
					t.Fatalf("input %d token %d dim %d: %g, alone %g", i, p, h, got[i][p][h], want[p][h])
				}
			}
		}
	}
	// 2 inputs of 4 and 9 tokens × 16 = 208 values.
	small, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxEmbedAllValues: 207})
	if code, kind := teiCall(t, small, "/embed_all", string(body), nil); code != 413 || kind != "Validation" {
		t.Errorf("208 values over a limit of 207: status %d %s, want 413 Validation", code, kind)
	}
	small, _, _ = newServer(t, roformer.HeadBase, nil, Options{MaxEmbedAllValues: 208})
	if code, kind := teiCall(t, small, "/embed_all", string(body), &got); code != 200 {
		t.Errorf("208 values, limit 208: status %d %s", code, kind)
	}
}

func TestTEIEmbedSparse(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	texts := []string{"the whale", "a ship . the sea . good", "bad"}
	var got [][]TEISparseValue
	body, _ := json.Marshal(map[string]any{"inputs": texts})
	if code, kind := teiCall(t, s, "/embed_sparse", string(body), &got); code != 200 {
		t.Fatalf("status %d %s", code, kind)
	}
	V := m.Config.VocabSize
	for i, text := range texts {
		logits := logitsAlone(t, m, tok, text, nil) // [T][V]
		want := make([]float64, V)
		for p := range len(logits) / V {
			for v := range V {
				want[v] = math.Max(want[v], math.Log(1+math.Max(0, logits[p*V+v])))
			}
		}
		gotv := make([]float64, V)
		for k, e := range got[i] {
			if e.Index < 0 || e.Index >= V || e.Value == 0 || (k > 0 && e.Index <= got[i][k-1].Index) {
				t.Fatalf("input %d entry %d: %+v (indices ascending, in the vocabulary, values non-zero)", i, k, e)
			}
			gotv[e.Index] = float64(e.Value)
		}
		nonzero := 0
		for v := range V {
			if want[v] > 0 {
				nonzero++
			}
			if math.Abs(gotv[v]-want[v]) > 1e-5*max(1, want[v]) {
				t.Errorf("input %d entry %d: %g, reference %g", i, v, gotv[v], want[v])
			}
		}
		if nonzero == 0 || nonzero == V {
			t.Errorf("input %d: %d of %d entries non-zero: the test cannot tell relu from none", i, nonzero, V)
		}
	}
	base, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	if code, kind := teiCall(t, base, "/embed_sparse", string(body), nil); code != 404 || kind != "Backend" {
		t.Errorf("/embed_sparse without the masked-LM head: status %d %s, want 404 Backend", code, kind)
	}
	if slices.Contains(base.TEIInfo().Routes, "POST /embed_sparse") || !slices.Contains(s.TEIInfo().Routes, "POST /embed_sparse") {
		t.Errorf("/info routes: base %v, masked-LM %v", base.TEIInfo().Routes, s.TEIInfo().Routes)
	}
}

func TestTEITokenIDs(t *testing.T) {
	s, _, tok := newServer(t, roformer.HeadMaskedLM, nil, Options{MaxLength: 12})
	texts := []string{"the whale", "a ship . the sea . good"}
	ids := [][]int32{encodeIDs(t, tok, texts[0]), encodeIDs(t, tok, texts[1])}
	for _, path := range []string{"/embed", "/embed_all", "/embed_sparse"} {
		var fromText, fromIDs, one any
		tb, _ := json.Marshal(map[string]any{"inputs": texts})
		ib, _ := json.Marshal(map[string]any{"inputs": ids})
		ob, _ := json.Marshal(map[string]any{"inputs": ids[0]})
		for _, c := range []struct {
			body string
			out  *any
		}{{string(tb), &fromText}, {string(ib), &fromIDs}, {string(ob), &one}} {
			if code, kind := teiCall(t, s, path, c.body, c.out); code != 200 {
				t.Fatalf("%s %s: status %d %s", path, c.body, code, kind)
			}
		}
		a, b, c := fmt.Sprint(fromText), fmt.Sprint(fromIDs), fmt.Sprint(one)
		if a != b {
			t.Errorf("%s: token ids answer\n%s\nthe texts\n%s", path, b, a)
		}
		// One row alone against the first row of a 2-row batch: equal
		// within rounding, not bit for bit (a BLAS may block the two
		// products differently), as the other batching tests compare.
		if want := fromText.([]any)[:1]; !numbersClose(one, want, 1e-5) {
			t.Errorf("%s: one list of ids answers\n%s\nwant\n%s", path, c, fmt.Sprint(want))
		}
	}
	long := strings.Repeat("7,", 12) + "3"
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"inputs": [2, 5, 14, 3]}`, 422},      // 14: past the vocabulary of 14
		{`{"inputs": [2, -1, 3]}`, 422},         // negative
		{`{"inputs": [2, 5.5, 3]}`, 422},        // not an integer
		{`{"inputs": [[2, 5, 3], []]}`, 422},    // no ids
		{`{"inputs": [[2, 5, 3], "the"]}`, 200}, // texts and ids mixed, as TEI takes them
		{`{"inputs": [[2, 5, 3], 7]}`, 422},
		{`{"inputs": [[2, 5, 3], null]}`, 422},
		{`{"inputs": [` + long + `]}`, 413}, // 13 ids, limit 12
		{`{"inputs": [` + long + `], "truncate": true}`, 200},
	} {
		if code, _ := teiCall(t, s, "/embed", c.body, new(any)); code != c.code {
			t.Errorf("%s: status %d, want %d", c.body, code, c.code)
		}
	}
}

func TestTruncationAdvice(t *testing.T) {
	long := strings.TrimSpace(strings.Repeat("the whale ", 10)) // 22 tokens
	for _, auto := range []bool{false, true} {
		s, _, _ := newServer(t, roformer.HeadBase, nil, Options{MaxLength: 8, AutoTruncate: auto})
		body, _ := json.Marshal(map[string]any{"input": long})
		code, _, b := post(t, s, "/v1/embeddings", string(body))
		if !auto {
			if code != 400 || !strings.Contains(string(b), "shorten") || strings.Contains(string(b), `\"truncate\": true`) {
				t.Errorf("/v1/embeddings, too long: status %d %s; want 400 advising to shorten it, not \"truncate\"", code, b)
			}
			tb, _ := json.Marshal(map[string]any{"inputs": long})
			code, _, b = post(t, s, "/embed", string(tb))
			if code != 413 || !strings.Contains(string(b), `\"truncate\": true`) {
				t.Errorf("/embed, too long: status %d %s; want 413 advising \"truncate\": true", code, b)
			}
			continue
		}
		var res OpenAIEmbeddingsResponse
		if code != 200 || json.Unmarshal(b, &res) != nil {
			t.Fatalf("/v1/embeddings with AutoTruncate: status %d %s", code, b)
		}
		var want [][]float32
		tb, _ := json.Marshal(map[string]any{"inputs": long, "truncate": true})
		if code, kind := teiCall(t, s, "/embed", string(tb), &want); code != 200 {
			t.Fatalf("/embed truncate: %d %s", code, kind)
		}
		if got := fmt.Sprint(res.Data[0].Embedding); got != fmt.Sprint(want[0]) || res.Usage.PromptTokens != 8 {
			t.Errorf("auto-truncated /v1/embeddings: %s (%d tokens), /embed truncated %v", got, res.Usage.PromptTokens, want[0])
		}
		var plain [][]float32
		if code, kind := teiCall(t, s, "/embed", `{"inputs": "`+long+`"}`, &plain); code != 200 || fmt.Sprint(plain) != fmt.Sprint(want) {
			t.Errorf("/embed with AutoTruncate and no truncate: %d %s", code, kind)
		}
	}
}

// Sparse rows run in batches of their own whose logits (rows × padded
// tokens × vocabulary) stay within MaxSparseBatchLogits, and give the
// vectors they give in one batch; the answer's inputs × vocabulary is
// Sparse rows run the masked-LM head MaxSparseBatchLogits / vocabulary
// positions at a time: with a chunk of 2 positions the vectors are those of
// the default chunk (bit for bit on go-asm and gonum, whose product of a
// row does not depend on the rows beside it; within rounding on OpenBLAS
// and oneDNN), and the forward passes are those of any other rows
// (MaxBatchTokens); the answer's inputs × vocabulary is bounded by
// MaxEmbedAllValues.
func TestTEIEmbedSparseBatches(t *testing.T) {
	texts := []string{"the whale", "a ship . the sea . good", "bad", "the sea"}
	body, _ := json.Marshal(map[string]any{"inputs": texts})
	for _, be := range blas.Available() {
		t.Run(strings.Fields(be.Name())[0], func(t *testing.T) {
			prev := blas.Set(be)
			defer blas.Set(prev)
			exact := blas.Chosen().Kind == blas.KindGo || blas.Chosen().Kind == blas.KindGoAsm
			wide, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
			var want, got [][]TEISparseValue
			if code, kind := teiCall(t, wide, "/embed_sparse", string(body), &want); code != 200 {
				t.Fatalf("status %d %s", code, kind)
			}
			s, m, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{MaxSparseBatchLogits: 2 * 14})
			if m.Config.VocabSize != 14 {
				t.Fatalf("vocabulary %d, the test assumes 14", m.Config.VocabSize)
			}
			var passes [][2]int
			s.afterForward = func(rows, tokens int) { passes = append(passes, [2]int{rows, tokens}) }
			if code, kind := teiCall(t, s, "/embed_sparse", string(body), &got); code != 200 {
				t.Fatalf("status %d %s", code, kind)
			}
			if len(passes) != 1 || passes[0][0] != 4 {
				t.Errorf("passes %v: 4 rows within MaxBatchTokens make one", passes)
			}
			if len(got) != len(want) {
				t.Fatalf("%d answers, want %d", len(got), len(want))
			}
			for i := range want {
				if len(got[i]) != len(want[i]) {
					t.Fatalf("input %d: %d entries, %d with the default chunk", i, len(got[i]), len(want[i]))
				}
				for k, w := range want[i] {
					g := got[i][k]
					if g.Index != w.Index || exact && g.Value != w.Value || math.Abs(float64(g.Value-w.Value)) > 1e-5*max(1, float64(w.Value)) {
						t.Errorf("input %d entry %d: %+v in chunks of 2 positions, %+v with the default chunk", i, k, g, w)
					}
				}
			}
		})
	}
	// 4 inputs × 14 = 56 values.
	small, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{MaxEmbedAllValues: 55})
	if code, kind := teiCall(t, small, "/embed_sparse", string(body), nil); code != 413 || kind != "Validation" {
		t.Errorf("56 values over a limit of 55: status %d %s, want 413 Validation", code, kind)
	}
}

// POST /embed_sparse holds one chunk of logits, not its tokens ×
// vocabulary: 2 inputs of 480 tokens over 4,005 entries are 15 MB of
// logits; the request allocates (TotalAlloc, the encoder's pass and the
// answer included) less than a third of that. Before the head ran in
// chunks it allocated them all.
func TestTEIEmbedSparseHoldsOneChunk(t *testing.T) {
	ws := slices.Clone(words)
	for i := range 4000 - len(ws) + 5 {
		ws = append(ws, fmt.Sprintf("w%d", i))
	}
	m, tok := testmodel.Tiny{Words: ws, Seed: 5, MaxPositions: 512, Scale: 3}.Build(t)
	s, err := New(m, tok, Options{MaxSparseBatchLogits: 64 * len(ws)})
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, 2)
	for i := range texts {
		var x []string
		for j := range 478 {
			x = append(x, fmt.Sprintf("w%d", (i*131+j*17)%3000))
		}
		texts[i] = strings.Join(x, " ")
	}
	body, _ := json.Marshal(map[string]any{"inputs": texts})
	var got [][]TEISparseValue
	if code, kind := teiCall(t, s, "/embed_sparse", string(body), &got); code != 200 { // warm: the kernels' pools
		t.Fatalf("status %d %s", code, kind)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, jsonRequest("POST", "/embed_sparse", strings.NewReader(string(body))))
	runtime.ReadMemStats(&after)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	logits := int64(2*480*len(ws)) * 4
	alloc := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("allocated %.1f MB (answer %.1f MB); the logits of its tokens are %.1f MB", float64(alloc)/1e6, float64(rec.Body.Len())/1e6, float64(logits)/1e6)
	if alloc > logits/3 {
		t.Errorf("/embed_sparse allocated %d bytes; its 960 tokens × %d logits are %d", alloc, len(ws), logits)
	}
}

// AutoTruncate truncates /predict's long inputs too, as TEI's
// --auto-truncate does; without it they are a 413.
func TestAutoTruncatePredict(t *testing.T) {
	long := strings.TrimSpace(strings.Repeat("the whale ", 10))
	for _, auto := range []bool{false, true} {
		m, tok := classifierModel(t, []string{"a", "b"})
		s, err := New(m, tok, Options{MaxLength: 8, AutoTruncate: auto})
		if err != nil {
			t.Fatal(err)
		}
		want := 413
		if auto {
			want = 200
		}
		if code, kind := teiCall(t, s, "/predict", `{"inputs": "`+long+`"}`, new(any)); code != want {
			t.Errorf("AutoTruncate %v: /predict of 22 tokens, limit 8: %d %s, want %d", auto, code, kind, want)
		}
	}
}

// numbersClose says whether two decoded JSON values have the same shape
// and keys, and numbers within tol of the larger magnitude (at least 1).
func numbersClose(a, b any, tol float64) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !numbersClose(x[i], y[i], tol) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !numbersClose(x[k], y[k], tol) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && math.Abs(x-y) <= tol*max(1, math.Abs(x), math.Abs(y))
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}
