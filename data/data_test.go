package data

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Toy vocabulary: 0 [PAD], 1 [UNK], 2 [CLS], 3 [SEP], 4 [MASK]; word-start
// pieces in [5, 500), continuation pieces in [500, 1000).
var toyVocab = Vocab{Size: 1000, PAD: 0, CLS: 2, SEP: 3, MASK: 4,
	IsContinuation: func(id int) bool { return id >= 500 }}

func hashOf(s string) int {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int(h.Sum32() & 0x7fffffff)
}

// toyEncoder splits on spaces and cuts each word into 3-byte pieces.
var toyEncoder = EncoderFunc(func(text string) []int {
	var ids []int
	for _, w := range strings.Fields(text) {
		for i := 0; i < len(w); i += 3 {
			p := w[i:min(i+3, len(w))]
			if i == 0 {
				ids = append(ids, 5+hashOf(p)%495)
			} else {
				ids = append(ids, 500+hashOf(p)%500)
			}
		}
	}
	return ids
})

// wordEncoder maps each space-separated word to one id from its number.
var wordEncoder = EncoderFunc(func(text string) []int {
	var ids []int
	for _, w := range strings.Fields(text) {
		var n int
		fmt.Sscan(w, &n)
		ids = append(ids, n)
	}
	return ids
})

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadCorpus(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "good", "b.txt"), []byte("second file\n"))
	writeFile(t, filepath.Join(dir, "good", "a.txt"), []byte("\uFEFFfirst file\r\nline two\n"))
	writeFile(t, filepath.Join(dir, "good", "sub", "c.txt"), []byte("nested"))
	writeFile(t, filepath.Join(dir, "good", "skip.md"), []byte("not a txt"))
	docs, err := ReadCorpus(filepath.Join(dir, "good"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range docs {
		names = append(names, filepath.Base(d.Name))
	}
	if got := strings.Join(names, ","); got != "a.txt,b.txt,c.txt" {
		t.Errorf("files %s, want a.txt,b.txt,c.txt", got)
	}
	if docs[0].Text != "first file\r\nline two\n" {
		t.Errorf("BOM not stripped: %q", docs[0].Text)
	}
	single, err := ReadCorpus(filepath.Join(dir, "good", "b.txt"))
	if err != nil || len(single) != 1 || single[0].Text != "second file\n" {
		t.Errorf("single file: %v %v", single, err)
	}

	writeFile(t, filepath.Join(dir, "nul.txt"), []byte("text\x00more"))
	bin := make([]byte, 400)
	for i := range bin {
		bin[i] = byte(0x80 + i%64)
	}
	writeFile(t, filepath.Join(dir, "latin1.bin.txt"), bin)
	writeFile(t, filepath.Join(dir, "onebad.txt"), []byte(strings.Repeat("good text ", 20)+"caf\xe9"))
	writeFile(t, filepath.Join(dir, "blank.txt"), []byte(" \n\n\t\n"))
	os.MkdirAll(filepath.Join(dir, "empty"), 0o755)
	writeFile(t, filepath.Join(dir, "blanks", "x.txt"), []byte("\n"))
	writeFile(t, filepath.Join(dir, "blanks", "y.txt"), nil)
	writeFile(t, filepath.Join(dir, "dangling", "ok.txt"), []byte("fine"))
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling", "z.txt")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		path  string
		want  string
		empty bool
	}{
		{"nul", "nul.txt", "nul.txt looks binary (NUL byte at offset 4)", false},
		{"binary", "latin1.bin.txt", "latin1.bin.txt looks binary (400 of 400 bytes are not UTF-8)", false},
		{"invalid_utf8", "onebad.txt", "onebad.txt is not valid UTF-8 at byte offset 203", false},
		{"blank_file", "blank.txt", "blank.txt has no text", true},
		{"empty_folder", "empty", "no .txt files in folder", true},
		{"blank_folder", "blanks", "the 2 .txt files in", true},
		{"unreadable", "dangling", "z.txt", false},
		{"missing", "nope", "nope", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadCorpus(filepath.Join(dir, tc.path))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "data: ") {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if errors.Is(err, ErrEmptyCorpus) != tc.empty {
				t.Errorf("errors.Is(err, ErrEmptyCorpus) = %v, want %v", !tc.empty, tc.empty)
			}
		})
	}
}

func TestPack(t *testing.T) {
	v := Vocab{Size: 100, PAD: 0, CLS: 1, SEP: 2, MASK: 3}
	line := func(ids ...int) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = fmt.Sprint(id)
		}
		return strings.Join(s, " ")
	}
	rng := func(lo, n int) []int {
		r := make([]int, n)
		for i := range r {
			r[i] = lo + i
		}
		return r
	}
	for _, tc := range []struct {
		name string
		docs []Document
		T    int
		want [][]int32
	}{
		{"fill_lines", []Document{{"d", line(10, 11) + "\n" + line(12, 13) + "\n\n" + line(14)}}, 7,
			[][]int32{{1, 10, 11, 12, 13, 14, 2}}},
		{"close_when_half_full", []Document{{"d", line(10, 11, 12) + "\n" + line(20, 21, 22)}}, 6,
			[][]int32{{1, 10, 11, 12, 2}, {1, 20, 21, 22, 2}}},
		{"split_when_under_half", []Document{{"d", line(10) + "\n" + line(rng(20, 5)...)}}, 6,
			[][]int32{{1, 10, 20, 21, 22, 2}, {1, 23, 24, 2}}},
		{"long_line", []Document{{"d", line(rng(10, 9)...)}}, 6,
			[][]int32{{1, 10, 11, 12, 13, 2}, {1, 14, 15, 16, 17, 2}, {1, 18, 2}}},
		{"documents_apart", []Document{{"a", line(10)}, {"b", ""}, {"c", line(11)}}, 8,
			[][]int32{{1, 10, 2}, {1, 11, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Pack(tc.docs, wordEncoder, v, PackOptions{SeqLen: tc.T})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Seqs, tc.want) {
				t.Errorf("got %v\nwant %v", p.Seqs, tc.want)
			}
		})
	}
}

func TestPackProperties(t *testing.T) {
	var docs []Document
	for d := 0; d < 40; d++ {
		var lines []string
		for l := 0; l < 1+d%7; l++ {
			lines = append(lines, strings.Repeat(fmt.Sprintf("word%d piece%d longerword ", l, d), 1+(d*l)%9))
		}
		docs = append(docs, Document{Name: fmt.Sprint("doc", d), Text: strings.Join(lines, "\n")})
	}
	const T = 16
	p1, err := Pack(docs, toyEncoder, toyVocab, PackOptions{SeqLen: T})
	if err != nil {
		t.Fatal(err)
	}
	p4, err := Pack(docs, toyEncoder, toyVocab, PackOptions{SeqLen: T, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p1, p4) {
		t.Error("Workers=4 packs differently from Workers=1")
	}
	var inner []int32
	tokens := 0
	for i, s := range p1.Seqs {
		if len(s) > T || len(s) < 3 || s[0] != 2 || s[len(s)-1] != 3 {
			t.Fatalf("sequence %d malformed: %v", i, s)
		}
		for _, id := range s[1 : len(s)-1] {
			if toyVocab.special(id) {
				t.Fatalf("sequence %d has special id %d inside", i, id)
			}
		}
		inner = append(inner, s[1:len(s)-1]...)
		tokens += len(s) - 2
	}
	var all []int32
	for _, d := range docs {
		for _, id := range toyEncoder.EncodeIDs(strings.ReplaceAll(d.Text, "\n", " ")) {
			all = append(all, int32(id))
		}
	}
	if !reflect.DeepEqual(inner, all) || tokens != p1.Tokens {
		t.Errorf("packing lost or reordered tokens: %d inner, %d encoded, Tokens=%d", len(inner), len(all), p1.Tokens)
	}
}

func TestPackErrors(t *testing.T) {
	v := Vocab{Size: 100, PAD: 0, CLS: 1, SEP: 2, MASK: 3}
	for _, tc := range []struct {
		name string
		docs []Document
		v    Vocab
		T    int
		want string
	}{
		{"out_of_vocab", []Document{{"f.txt", "5\n7 100"}}, v, 8, "f.txt line 2: token id 100 is outside the vocabulary [0, 100)"},
		{"short", []Document{{"f", "5"}}, v, 2, "sequence length 2"},
		{"no_tokens", []Document{{"f", "\n\n"}}, v, 8, "empty corpus"},
		{"bad_vocab", []Document{{"f", "5"}}, Vocab{Size: 100, PAD: 0, CLS: 1, SEP: 1, MASK: 3}, 8, "CLS and SEP share id 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Pack(tc.docs, wordEncoder, tc.v, PackOptions{SeqLen: tc.T})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSplitEval(t *testing.T) {
	seqs := make([][]int32, 10)
	for i := range seqs {
		seqs[i] = []int32{int32(i)}
	}
	train, eval, err := SplitEval(seqs, 4)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(eval) != "[[3] [7]]" || len(train) != 8 || train[3][0] != 4 {
		t.Errorf("train %v eval %v", train, eval)
	}
	if train, eval, _ := SplitEval(seqs, 0); len(train) != 10 || len(eval) != 0 {
		t.Errorf("k=0: %d/%d", len(train), len(eval))
	}
	if _, _, err := SplitEval(seqs, 1); err == nil {
		t.Error("k=1 accepted")
	}
}

// randomSeqs returns n sequences of length T of ids in [5, 1000), with
// [CLS]/[SEP] ends and some shorter rows.
func randomSeqs(n, T int) [][]int32 {
	seqs := make([][]int32, n)
	x := uint32(12345)
	for i := range seqs {
		L := T
		if i%5 == 0 {
			L = T / 2
		}
		s := make([]int32, L)
		s[0], s[L-1] = 2, 3
		for j := 1; j < L-1; j++ {
			x = x*1664525 + 1013904223
			s[j] = int32(5 + x%995)
		}
		seqs[i] = s
	}
	return seqs
}

func TestMaskingRates(t *testing.T) {
	const T = 64
	seqs := randomSeqs(400, T)
	l, err := NewLoader(seqs, toyVocab, LoaderOptions{BatchSize: 8, SeqLen: T, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var cand, sel, masked, random, same int
	for k := 0; k < 50; k++ {
		b := l.Next()
		rows := l.lastRows(b)
		for i := range b.InputIDs {
			orig := rows[i]
			if b.AttentionMask[i] == 0 {
				if b.Labels[i] != IgnoreIndex || b.InputIDs[i] != 0 {
					t.Fatalf("padding at %d: input %d label %d", i, b.InputIDs[i], b.Labels[i])
				}
				continue
			}
			if toyVocab.special(orig) {
				if b.Labels[i] != IgnoreIndex || b.InputIDs[i] != orig {
					t.Fatalf("special token %d at %d was selected", orig, i)
				}
				continue
			}
			cand++
			if b.Labels[i] == IgnoreIndex {
				if b.InputIDs[i] != orig {
					t.Fatalf("unselected token changed at %d", i)
				}
				continue
			}
			if b.Labels[i] != orig {
				t.Fatalf("label %d, original %d", b.Labels[i], orig)
			}
			sel++
			switch b.InputIDs[i] {
			case 4:
				masked++
			case orig:
				same++
			default:
				random++
			}
		}
	}
	rate := float64(sel) / float64(cand)
	t.Logf("%d candidates, selected %.4f, [MASK] %.4f, random %.4f, unchanged %.4f", cand, rate,
		float64(masked)/float64(sel), float64(random)/float64(sel), float64(same)/float64(sel))
	for _, c := range []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"selected", rate, 0.15, 0.01},
		{"mask", float64(masked) / float64(sel), 0.8, 0.02},
		{"random", float64(random) / float64(sel), 0.1, 0.015},
		{"unchanged", float64(same) / float64(sel), 0.1, 0.015},
	} {
		if math.Abs(c.got-c.want) > c.tol {
			t.Errorf("%s rate %.4f, want %.2f ± %.3f", c.name, c.got, c.want, c.tol)
		}
	}
}

// lastRows rebuilds the unmasked, padded ids of the batch just served, from
// the loader's position, for tests.
func (l *Loader) lastRows(b *Batch) []int32 {
	out := make([]int32, 0, b.B*b.T)
	pos := l.pos
	order := l.order
	var idx []int
	for r := 0; r < b.B; r++ {
		if pos.Index == 0 {
			pos = Position{pos.Epoch - 1, len(l.seqs)}
			order = epochOrder(len(l.seqs), l.opt.Seed, pos.Epoch)
		}
		pos.Index--
		idx = append([]int{order[pos.Index]}, idx...)
	}
	for _, i := range idx {
		row := make([]int32, b.T)
		copy(row, l.seqs[i])
		out = append(out, row...)
	}
	return out
}

func TestWholeWordMasking(t *testing.T) {
	docs := []Document{{"d", strings.Repeat("antidisestablishment of the extraordinarily long words and tiny ones ", 400)}}
	p, err := Pack(docs, toyEncoder, toyVocab, PackOptions{SeqLen: 40})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMasker(toyVocab, MaskOptions{WholeWord: true}, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	words, selWords := 0, 0
	for _, s := range p.Seqs {
		in, lab := make([]int32, len(s)), make([]int32, len(s))
		m.Mask(in, lab, s)
		for i := 1; i < len(s)-1; {
			j := i + 1
			for j < len(s)-1 && s[j] >= 500 {
				j++
			}
			// s[i:j] is one word (a packing split may start a sequence mid-word).
			n := 0
			for k := i; k < j; k++ {
				if lab[k] != IgnoreIndex {
					n++
				}
			}
			if n != 0 && n != j-i {
				t.Fatalf("word %v partly selected: labels %v", s[i:j], lab[i:j])
			}
			words++
			if n > 0 {
				selWords++
			}
			i = j
		}
	}
	if r := float64(selWords) / float64(words); math.Abs(r-0.15) > 0.02 {
		t.Errorf("word selection rate %.4f over %d words, want 0.15 ± 0.02", r, words)
	}
	if _, err := NewMasker(Vocab{Size: 10, PAD: 0, CLS: 1, SEP: 2, MASK: 3}, MaskOptions{WholeWord: true}, 1, 0); err == nil {
		t.Error("whole-word masking without IsContinuation accepted")
	}
}

func TestLoaderEpochs(t *testing.T) {
	seqs := randomSeqs(10, 8)
	l, err := NewLoader(seqs, toyVocab, LoaderOptions{BatchSize: 4, SeqLen: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]int{}
	seeds := map[uint64]bool{}
	for k := 0; k < 5; k++ { // 20 rows = two epochs exactly
		b := l.Next()
		if b.Seed == 0 || seeds[b.Seed] {
			t.Errorf("batch %d seed %d is zero or repeated", k, b.Seed)
		}
		seeds[b.Seed] = true
	}
	if got := l.Position(); got != (Position{Epoch: 2, Index: 0}) {
		t.Errorf("position %+v, want epoch 2 index 0", got)
	}
	for e := 0; e < 2; e++ {
		for _, i := range epochOrder(10, 1, e) {
			seen[i]++
		}
	}
	for i := 0; i < 10; i++ {
		if seen[i] != 2 {
			t.Errorf("sequence %d visited %d times in two epochs", i, seen[i])
		}
	}
	if reflect.DeepEqual(epochOrder(10, 1, 0), epochOrder(10, 1, 1)) {
		t.Error("two epochs share an order")
	}
}

func TestLoaderResume(t *testing.T) {
	seqs := randomSeqs(23, 16)
	opt := LoaderOptions{BatchSize: 5, SeqLen: 16, Seed: 99}
	for _, at := range []int{0, 3, 4, 9} { // 4 and 9 straddle epoch ends
		t.Run(fmt.Sprint("after_", at), func(t *testing.T) {
			a, _ := NewLoader(seqs, toyVocab, opt)
			for k := 0; k < at; k++ {
				a.Next()
			}
			state, err := a.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := NewLoader(seqs, toyVocab, opt)
			b.Next() // move it somewhere else first
			if err := b.UnmarshalBinary(state); err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 8; k++ {
				x, y := a.Next(), b.Next()
				if !reflect.DeepEqual(x, y) {
					t.Fatalf("batch %d after restore differs", k)
				}
			}
		})
	}
	a, _ := NewLoader(seqs, toyVocab, opt)
	state, _ := a.MarshalBinary()
	other, _ := NewLoader(seqs[:20], toyVocab, opt)
	if err := other.UnmarshalBinary(state); err == nil || !strings.Contains(err.Error(), "for 23 sequences, this corpus has 20") {
		t.Errorf("foreign state: %v", err)
	}
	if err := other.UnmarshalBinary([]byte("garbage")); err == nil {
		t.Error("garbage state accepted")
	}
}

func TestEvalBatches(t *testing.T) {
	seqs := randomSeqs(11, 8)
	a, err := EvalBatches(seqs, toyVocab, 4, 8, 0, 5, MaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := EvalBatches(seqs, toyVocab, 4, 8, 0, 5, MaskOptions{})
	if len(a) != 3 || a[2].B != 3 || !reflect.DeepEqual(a, b) {
		t.Errorf("got %d batches (last B=%d), deterministic=%v", len(a), a[len(a)-1].B, reflect.DeepEqual(a, b))
	}
	if c, _ := EvalBatches(seqs, toyVocab, 4, 8, 2, 5, MaskOptions{}); len(c) != 2 || !reflect.DeepEqual(c[1], a[1]) {
		t.Error("limiting the batch count changed the batches")
	}
}
