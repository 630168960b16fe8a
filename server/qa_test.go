package server

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

func TestQuestionAnsweringRoute(t *testing.T) {
	s, m, tok := newServer(t, roformer.HeadQA, nil, Options{MaxLength: 16})
	const q, c = "the whale", "the whale ship . the sea . a ship . the whales sea . a good ship . the bad sea"
	want := func(o pipeline.QuestionAnsweringOptions) []pipeline.QAAnswer {
		t.Helper()
		if o.MaxSeqLen == 0 {
			o.MaxSeqLen = 16 // absent: min(384, --max-length)
		}
		if o.DocStride == 0 {
			o.DocStride = 2
		}
		a, err := pipeline.QuestionAnswering(context.Background(), m, tok, q, c, o)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// One answer: an object; windows of 16 tokens, stride 2.
	var one pipeline.QAAnswer
	body := `{"question": "the whale", "context": "` + c + `", "doc_stride": 2}`
	if code, kind := teiCall(t, s, "/v1/question-answering", body, &one); code != 200 || one != want(pipeline.QuestionAnsweringOptions{})[0] || one.Answer == "" {
		t.Errorf("one: %d %s %+v, want %+v", code, kind, one, want(pipeline.QuestionAnsweringOptions{}))
	}
	// top_k > 1: a list; the options pass through.
	var many []pipeline.QAAnswer
	body = `{"question": "the whale", "context": "` + c + `", "top_k": 3, "max_answer_len": 2, "handle_impossible_answer": true, "doc_stride": 0, "max_seq_len": 12}`
	w := want(pipeline.QuestionAnsweringOptions{TopK: 3, MaxAnswerLen: 2, HandleImpossibleAnswer: true, DocStride: -1, MaxSeqLen: 12})
	if code, kind := teiCall(t, s, "/v1/question-answering", body, &many); code != 200 || len(many) != 3 || !reflect.DeepEqual(many, w) {
		t.Errorf("top_k 3: %d %s %+v, want %+v", code, kind, many, w)
	}
	// A list of requests: a list of answers.
	var list []any
	body = `[{"question": "the whale", "context": "` + c + `", "doc_stride": 2}, {"question": "the sea", "context": "a ship", "top_k": 2}]`
	if code, kind := teiCall(t, s, "/v1/question-answering", body, &list); code != 200 || len(list) != 2 {
		t.Fatalf("list: %d %s %+v", code, kind, list)
	}
	if first, ok := list[0].(map[string]any); !ok || first["answer"] != one.Answer || first["start"] != float64(one.Start) {
		t.Errorf("list[0] %+v, want %+v", list[0], one)
	}
	if second, ok := list[1].([]any); !ok || len(second) != 2 { // top_k 2 of "a", "a ship", "ship"
		t.Errorf("list[1] %+v", list[1])
	}
	for _, e := range []struct {
		body   string
		status int
		kind   string
	}{
		{`{"question": "", "context": "the sea"}`, 422, "Validation"},
		{`{"question": "the", "context": ""}`, 422, "Validation"},
		{`{"question": "the", "context": "the sea", "top_k": -1}`, 422, "Validation"},
		{`{"question": "the", "context": "the sea", "max_seq_len": 17}`, 413, "Validation"},
		{`{"question": "the", "context": "the sea", "max_seq_len": 8, "doc_stride": 9}`, 422, "Validation"},
		{`{"question": "the whale the whale", "context": "` + c + `", "max_seq_len": 10}`, 422, "Validation"}, // stride 5 ≥ 3 context tokens a window
		{`[]`, 400, "Empty"},
		{`{"question": 1}`, 422, "Validation"},
	} {
		if code, kind := teiCall(t, s, "/v1/question-answering", e.body, nil); code != e.status || kind != e.kind {
			t.Errorf("%s: %d %s, want %d %s", e.body, code, kind, e.status, e.kind)
		}
	}
	if !slices.Contains(s.Info().Endpoints, "POST /v1/question-answering") {
		t.Errorf("GET /v1/model and /info lack the route: %v", s.Info().Endpoints)
	}
	emb, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	if code, kind := teiCall(t, emb, "/v1/question-answering", `{"question": "the", "context": "the sea"}`, nil); code != 404 || kind != "Backend" {
		t.Errorf("masked-LM: %d %s, want 404 (not one of its routes)", code, kind)
	}
	if slices.Contains(emb.Info().Endpoints, "POST /v1/question-answering") {
		t.Error("a masked-LM model lists /v1/question-answering")
	}
}

// The route bounds the windows that pipeline.QuestionAnswering makes, by
// the pipeline's own count and defaults: max_seq_len absent is the
// pipeline's, at most --max-length, and doc_stride absent is its default.
func TestQuestionAnsweringWindowBound(t *testing.T) {
	const inputs, length = 16, 24
	s, _, tok := newServer(t, roformer.HeadQA, nil, Options{MaxInputs: inputs, MaxLength: length})
	ctx := strings.Repeat("the sea a ship . ", 20)
	counts := map[bool]int{}
	for _, stride := range []int{-1, 0, 1, 11, 15, 17} { // -1: absent
		o := pipeline.QuestionAnsweringOptions{MaxSeqLen: min(pipeline.QADefaultMaxSeqLen(tok), length)}
		body := `{"question": "the whale", "context": "` + ctx + `"`
		if stride >= 0 {
			body += `, "doc_stride": ` + strconv.Itoa(stride)
			o.DocStride = stride
			if stride == 0 {
				o.DocStride = -1 // HF's doc_stride=0
			}
		}
		_, ws, err := pipeline.QAWindows(tok, "the whale", ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		code, _, b := send(t, s, "POST", "/v1/question-answering", body+"}", map[string]string{"Content-Type": "application/json"})
		over := len(ws)*o.MaxSeqLen > inputs*length
		counts[over]++
		if !over && code != 200 || over && (code != 413 || !strings.Contains(b, fmt.Sprintf("%d windows of up to %d tokens", len(ws), o.MaxSeqLen))) {
			t.Errorf("doc_stride %d: %d windows of %d tokens, limit %d: %d %s", stride, len(ws), o.MaxSeqLen, inputs*length, code, b)
		}
	}
	if counts[true] == 0 || counts[false] == 0 {
		t.Errorf("%d requests over the limit, %d under: the test misses one kind", counts[true], counts[false])
	}
}
