package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
)

func TestInvalidUTF8(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	for _, c := range []struct {
		path, body string
		code       int
		field      string
	}{
		{"/embed", "{\"inputs\": [\"the\", \"a\xffb\"]}", 422, "inputs[1]"},
		{"/embed", "{\"inputs\": \"\xc3\"}", 422, "inputs"},
		{"/embed_all", "{\"truncate\": true, \"a\": [1, {\"b\": \"x\"}, [\"y\"]], \"inputs\": [\"\xfe\"]}", 422, "inputs[0]"},
		{"/embed", "{\"inputs\": \"the\", \"p\xffx\": 1}", 422, "p\ufffdx"},
		{"/v1/embed", "{\"inputs\": [{\"text\": \"the\"}, {\"text\": \"sea\", \"text_pair\": \"\xed\xa0\x80\"}]}", 422, "inputs[1].text_pair"},
		{"/v1/embeddings", "{\"input\": [\"ok\", \"\xff\"]}", 400, "input[1]"},
		{"/embed", "{\"inputs\": \"the\"} \xff", 422, ""},
	} {
		code, _, b := post(t, s, c.path, c.body)
		off := strings.IndexFunc(c.body, func(r rune) bool { return r == '\ufffd' })
		want := fmt.Sprintf("invalid UTF-8 at byte %d (in %s)", off, describeField(c.field))
		var e struct {
			Error any `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		msg := fmt.Sprint(e.Error)
		if m, ok := e.Error.(map[string]any); ok {
			msg = fmt.Sprint(m["message"])
		}
		if code != c.code || !strings.Contains(msg, want) {
			t.Errorf("%s %q: %d %s; want %d with %q", c.path, c.body, code, b, c.code, want)
		}
		if c.path == "/v1/embeddings" {
			var e OpenAIError
			if json.Unmarshal(b, &e) != nil || e.Error.Param == nil || *e.Error.Param != c.field {
				t.Errorf("/v1/embeddings: param of %s, want %q", b, c.field)
			}
		}
	}
	// Valid UTF-8 of every length is taken.
	if code, _, b := post(t, s, "/embed", `{"inputs": ["é the", "鲸 the", "😀 the"]}`); code != 200 {
		t.Errorf("valid UTF-8: %d %s", code, b)
	}
}
