package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
)

// A list of inputs over MaxInputs is refused (413) before a row is built
// for each of its items: the allocations of such a request grow by at most
// a few per item (the list's own decoding), not by the rows' and their
// re-encoding's.
func TestRootListsBoundedBeforeRows(t *testing.T) {
	const n = 20000
	qa, _, _ := newServer(t, roformer.HeadQA, nil, Options{MaxBodyBytes: 4 << 20})
	cls, _, _ := newServer(t, roformer.HeadSequenceCls, []string{"good", "bad"}, Options{MaxBodyBytes: 4 << 20})
	for _, c := range []struct {
		name string
		s    *Server
		item string
	}{
		{"question answering", qa, `{"question": "the whale", "context": "the sea"}`},
		{"text classification", cls, `{"text": "the whale", "text_pair": "the sea"}`},
	} {
		body := `{"inputs": [` + strings.Repeat(c.item+",", n-1) + c.item + `]}`
		var code int
		var b []byte
		allocs := testing.AllocsPerRun(1, func() { code, _, b = post(t, c.s, "/", body) })
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "maximum allowed batch size") {
			t.Errorf("%s: %d %.200s, want 413 for %d inputs", c.name, code, b, n)
		}
		if per := allocs / n; per > 3 {
			t.Errorf("%s: %.1f allocations per input (%v in all) for a list over MaxInputs; want at most 3", c.name, per, allocs)
		}
	}
}

// The 422 of an "inputs" object of no task names a few of its keys, not
// all of them: its size does not grow with the body's.
func TestRootManyKeysRefusedBriefly(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadBase, nil, Options{})
	var b strings.Builder
	b.WriteString(`{"inputs": {`)
	for i := range 5000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"key%05d": 1`, i)
	}
	b.WriteString(`}}`)
	code, _, out := post(t, s, "/", b.String())
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(out), "key00000, key00001") || !strings.Contains(string(out), "and 4992 more") {
		t.Errorf("%d %.300s", code, out)
	}
	if len(out) > 2000 {
		t.Errorf("the 422 of an object of 5000 keys has %d bytes; want at most 2000", len(out))
	}
}
