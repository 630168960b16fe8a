package bpe

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// corpus is a few English and Spanish verses.
var corpus = []string{
	"In the beginning God created the heaven and the earth.",
	"En el principio crió Dios los cielos y la tierra.",
	"And the earth was without form, and void; and darkness was upon the face of the deep.",
	"Y la tierra estaba desordenada y vacía, y las tinieblas estaban sobre la haz del abismo,",
	"And God said, Let there be light: and there was light.",
	"Y dijo Dios: Sea la luz: y fué la luz.",
	"And God saw the light, that it was good: and God divided the light from the darkness.",
	"Y vió Dios que la luz era buena: y apartó Dios la luz de las tinieblas.",
}

// The example of Sennrich et al. (2016, §3.2) with the end of word on the
// last character: low ×5, lower ×2, newest ×6, widest ×3. The merges below
// were worked out by hand from the pair counts (ties to the smaller left
// symbol, then right).
func TestTrainPaperExample(t *testing.T) {
	var texts []string
	for w, n := range map[string]int{"low": 5, "lower": 2, "newest": 6, "widest": 3} {
		for range n {
			texts = append(texts, w)
		}
	}
	m, err := Train(texts, 10000)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{
		{"e", "s"}, {"es", "t</w>"}, {"l", "o"}, {"e", "w"}, {"ew", "est</w>"}, {"n", "ewest</w>"}, {"lo", "w</w>"},
		{"d", "est</w>"}, {"i", "dest</w>"}, {"w", "idest</w>"}, {"e", "r</w>"}, {"lo", "w"}, {"low", "er</w>"},
	}
	if got := m.Merges(); !reflect.DeepEqual(got, want) {
		t.Errorf("merges\n got %q\nwant %q", got, want)
	}
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"lowest", []string{"low", "est</w>"}},
		{"newer", []string{"n", "ew", "er</w>"}},
		{"wider low", []string{"w", "i", "d", "er</w>", "low</w>"}},
	} {
		var got []string
		for _, id := range m.Encode(tc.text) {
			got = append(got, m.Token(id))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Encode(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// randomText draws sentences over a small alphabet with punctuation, so that
// many pairs tie.
func randomText(r *rand.Rand, n int) []string {
	letters := []rune("abcdeñé")
	var out []string
	for range n {
		var b strings.Builder
		for w := range 1 + r.IntN(8) {
			if w > 0 {
				b.WriteByte(' ')
			}
			for range 1 + r.IntN(6) {
				b.WriteRune(letters[r.IntN(len(letters))])
			}
			if r.IntN(4) == 0 {
				b.WriteString([]string{",", ".", "!", "¿"}[r.IntN(4)])
			}
		}
		out = append(out, b.String())
	}
	return out
}

// The incremental trainer learns the merges, in order, that recounting every
// pair at every step does.
func TestTrainMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name  string
		texts []string
		vocab int
	}{
		{"verses_small", corpus, 350},
		{"verses_all", corpus, 2000},
		{"random_ties", randomText(r, 400), 600},
		{"random_short", randomText(r, 30), 330},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fast, err := Train(tc.texts, tc.vocab)
			if err != nil {
				t.Fatal(err)
			}
			slow, err := trainNaive(tc.texts, tc.vocab)
			if err != nil {
				t.Fatal(err)
			}
			if fast.NumMerges() < 20 {
				t.Fatalf("only %d merges: the case tests little", fast.NumMerges())
			}
			if !reflect.DeepEqual(fast.Merges(), slow.Merges()) || !reflect.DeepEqual(fast.keys, slow.keys) {
				t.Errorf("incremental merges %q\nnaive %q", fast.Merges(), slow.Merges())
			}
			if fast.VocabSize() > tc.vocab {
				t.Errorf("vocabulary %d > %d", fast.VocabSize(), tc.vocab)
			}
		})
	}
}

func TestTrainOrderIndependent(t *testing.T) {
	a, _ := Train(corpus, 400)
	rev := append([]string(nil), corpus...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	b, _ := Train(rev, 400)
	if !reflect.DeepEqual(a.keys, b.keys) {
		t.Error("the order of the texts changed the vocabulary")
	}
}

func TestTrainErrors(t *testing.T) {
	if _, err := Train([]string{" ", ""}, 1000); !errors.Is(err, ErrNoText) {
		t.Errorf("no words: got %v", err)
	}
	_, err := Train(corpus, 100)
	if err == nil || !strings.Contains(err.Error(), "vocabulary size 100 is below the 261 fixed tokens") {
		t.Errorf("small vocabulary: got %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	m, err := Train(corpus, 500)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"In the beginning God created the heaven and the earth.",
		"  Y  dijo\tDios:\n«Sea la luz»  ",
		"unseen: 東京 Ωmega — ok",
		"bad \xff\xfe utf8",
		"",
		"¿Qué?!",
		"a</w> <0x41> <unk>",
	} {
		ids := m.Encode(s)
		for _, id := range ids {
			if id < UnkID+1 || id >= m.VocabSize() {
				t.Errorf("%q: id %d is special or out of range", s, id)
			}
		}
		if got, want := m.Decode(ids), Normalize(s); got != want {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	}
	known := m.Encode("the earth")
	for _, id := range known {
		if id < firstSym {
			t.Errorf("known words fell back to bytes: %v", known)
		}
	}
	if m.Token(known[0]) != "the</w>" {
		t.Fatalf("the first token of %q is %q", "the earth", m.Token(known[0]))
	}
	if got := m.Decode([]int{BosID, known[0], PadID, EosID, UnkID, -1, 1 << 30}); got != "the \uFFFD\uFFFD\uFFFD" {
		t.Errorf("specials: %q", got)
	}
}

func TestSaveLoad(t *testing.T) {
	m, err := Train(corpus, 450)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tok")
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.keys, m.keys) || !reflect.DeepEqual(got.Merges(), m.Merges()) {
		t.Error("loaded vocabulary differs")
	}
	for _, s := range corpus {
		if a, b := m.Encode(s), got.Encode(s); !reflect.DeepEqual(a, b) {
			t.Errorf("%q: %v after loading, %v before", s, b, a)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("folder holds %v, want only %s", ents, FileName)
	}
}

func TestLoadErrors(t *testing.T) {
	m, _ := Train([]string{"ab ab abc"}, 300)
	dir := t.TempDir()
	m.Save(dir)
	good, _ := os.ReadFile(filepath.Join(dir, FileName))
	for _, tc := range []struct{ name, old, new, want string }{
		{"format", `"roformer-bpe"`, `"other"`, `format "other"`},
		{"unknown_symbol", `"a b</w>"`, `"a z"`, `merges[0] "a z": a symbol is neither`},
		{"left_ends_word", `"a b</w>"`, `"c</w> b"`, `the left symbol ends a word`},
		{"one_symbol", `"a b</w>"`, `"ab"`, `not two symbols`},
		{"alphabet", `"a",`, `"aa",`, `alphabet[0] "aa"`},
		{"size", `"vocab_size": 2`, `"vocab_size": 9`, "vocab_size 966"},
		{"unknown_field", `"version"`, `"versio"`, "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(good), tc.old) {
				t.Fatalf("bpe.json lacks %s:\n%s", tc.old, good)
			}
			d := t.TempDir()
			os.WriteFile(filepath.Join(d, FileName), []byte(strings.Replace(string(good), tc.old, tc.new, 1)), 0o644)
			_, err := Load(d)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), FileName) {
				t.Errorf("got %v, want an error naming %s and saying %q", err, FileName, tc.want)
			}
		})
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), FileName) {
		t.Errorf("missing file: %v", err)
	}
}

// FuzzRoundTrip: any string encodes to ordinary tokens and decodes to its
// normalized form. Seeds in testdata/fuzz/FuzzRoundTrip.
func FuzzRoundTrip(f *testing.F) {
	m, err := Train(corpus, 500)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range corpus {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := m.Encode(s)
		for _, id := range ids {
			if id <= UnkID || id >= m.VocabSize() {
				t.Fatalf("%q: id %d", s, id)
			}
		}
		if got, want := m.Decode(ids), Normalize(s); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	})
}

// Encode is safe for concurrent use: goroutines sharing a model (and its
// piece cache) get the ids a fresh model gives.
func TestEncodeConcurrent(t *testing.T) {
	m, err := Train(corpus, 500)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := Train(corpus, 500)
	texts := append(randomText(rand.New(rand.NewPCG(5, 6)), 200), corpus...)
	want := make([][]int, len(texts))
	for i, s := range texts {
		want[i] = fresh.Encode(s)
	}
	errs := make(chan string, 4)
	for g := range 4 {
		go func() {
			for k := range texts {
				i := (k + g*50) % len(texts)
				if got := m.Encode(texts[i]); !reflect.DeepEqual(got, want[i]) {
					errs <- texts[i]
					return
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if s := <-errs; s != "" {
			t.Errorf("concurrent Encode(%q) differs", s)
		}
	}
}
