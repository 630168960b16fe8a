package server

import (
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
)

// GET /docs takes no admission slot, so its cost must not be the
// document's reflection each time: after the first, a GET allocates about
// what any small GET does, far fewer than the document has values.
func TestOpenAPIDocsMadeOnce(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	code, first := getDoc(t, s, "/docs", "")
	if code != 200 {
		t.Fatalf("GET /docs: %d", code)
	}
	small := testing.AllocsPerRun(10, func() { send(t, s, "GET", "/health", "", nil) })
	docs := testing.AllocsPerRun(10, func() { send(t, s, "GET", "/docs", "", nil) })
	if docs > small+50 {
		t.Errorf("GET /docs: %v allocations a request (GET /health: %v); want at most 50 more: the document is remade each time", docs, small)
	}
	if _, again := getDoc(t, s, "/docs", ""); len(again) != len(first) || again["openapi"] != first["openapi"] {
		t.Errorf("GET /docs again: %v, first %v", again, first)
	}
}
