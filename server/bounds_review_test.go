package server

import (
	"strings"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
)

// A body of nested brackets with an invalid byte at the end is refused
// naming the offset, without following a million levels to name a field.
func TestInvalidUTF8Deep(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	body := strings.Repeat("[", 1<<19) + "\xff"
	var code int
	var got []byte
	n := allocated(func() { code, _, got = post(t, s, "/embed", body) })
	if code != 422 || !strings.Contains(string(got), "invalid UTF-8 at byte 524288") {
		t.Fatalf("status %d %s", code, got)
	}
	if n > 16<<20 {
		t.Errorf("refusing a %d-byte body allocated %d bytes", len(body), n)
	}
}

// A batch over --max-inputs is refused before a row is made for each
// input, and /decode bounds the ids of all its lists.
func TestBatchBoundsBeforeAllocating(t *testing.T) {
	s, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{MaxInputs: 4, MaxLength: 8})
	many := "[" + strings.Repeat("[],", 200000) + "[]]"
	var code int
	var got []byte
	n := allocated(func() { code, _, got = post(t, s, "/embed", `{"inputs": `+many+`}`) })
	if code != 413 || !strings.Contains(string(got), "batch size 200001 > maximum allowed batch size 4") {
		t.Fatalf("status %d %s", code, got)
	}
	// About 90 MB today, most of it encoding/json trying the shapes a
	// batch may have (strings, then ids) on 200,001 items; before the count
	// was checked first, each item was also decoded into its own row.
	if n > 128<<20 {
		t.Errorf("refusing 200,001 inputs allocated %d bytes", n)
	}
	ids := "[" + strings.Repeat("5,", 32) + "5]" // 33 ids > 4 × 8
	if code, _, got := post(t, s, "/decode", `{"ids": `+ids+`}`); code != 413 || !strings.Contains(string(got), "33 ids in all, more than the 32") {
		t.Errorf("/decode of 33 ids: status %d %s", code, got)
	}
	if code, _, got := post(t, s, "/decode", `{"ids": [5, 6]}`); code != 200 {
		t.Errorf("/decode of 2 ids: status %d %s", code, got)
	}
}
