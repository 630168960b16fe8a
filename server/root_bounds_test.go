package server

import (
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
