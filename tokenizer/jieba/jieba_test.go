package jieba

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/roformer-go/roformer/internal/testutil"
)

func defaultSegmenter(t testing.TB) *Segmenter {
	t.Helper()
	s, err := NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFixtureJiebaCalls replays every word-segmenter call that HF's
// RoFormerTokenizer made while producing the shared tokenizer fixtures.
func TestFixtureJiebaCalls(t *testing.T) {
	path := testutil.Shared(t, "fixtures", "hf-roformer", "tokenizer", "tokenizer_cases.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		RoFormer struct {
			Cases []struct {
				ID         int    `json:"id"`
				Text       string `json:"text"`
				JiebaCalls []struct {
					Input string   `json:"input"`
					HMM   bool     `json:"hmm"`
					Words []string `json:"words"`
				} `json:"jieba_calls"`
			} `json:"cases"`
		} `json:"roformer_tokenizer"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	s := defaultSegmenter(t)
	calls := 0
	for _, c := range fx.RoFormer.Cases {
		for k, call := range c.JiebaCalls {
			if call.HMM {
				t.Fatalf("case %d call %d: HMM on, the fixtures promise HMM off", c.ID, k)
			}
			calls++
			got := s.Cut(call.Input)
			if !slices.Equal(got, call.Words) {
				t.Errorf("case %d (%q) call %d: Cut(%q)\n got %q\nwant %q", c.ID, c.Text, k, call.Input, got, call.Words)
			}
		}
	}
	if calls < 40 {
		t.Fatalf("only %d jieba calls in the fixtures, expected more than 40", calls)
	}
	t.Logf("%d jieba calls match", calls)
}

// TestGeneratedCuts compares with jieba 0.42.1 on the synthetic sentences
// of testdata/cuts.json (made by testdata/gen_cuts.py).
func TestGeneratedCuts(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "cuts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []struct {
			Text  string   `json:"text"`
			Words []string `json:"words"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) < 100 {
		t.Fatalf("testdata/cuts.json has %d cases, want at least 100", len(ref.Cases))
	}
	s := defaultSegmenter(t)
	for i, c := range ref.Cases {
		if got := s.Cut(c.Text); !slices.Equal(got, c.Words) {
			t.Errorf("case %d: Cut(%q)\n got %q\nwant %q", i, c.Text, got, c.Words)
		}
	}
}

// TestTinyDictionary checks the route rules on a hand-made dictionary; the
// expectations were confirmed with jieba 0.42.1 (Tokenizer(dictionary=...)).
func TestTinyDictionary(t *testing.T) {
	d, err := ReadDictionary(strings.NewReader("ab 5 n\nbc 5 n\na 3 n\nc 3 n\nxy 2 n\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := New(d)
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		// ab+c and a+bc score the same sum: the larger first end index wins.
		{"tie goes to the longer first word", "abc", []string{"ab", "c"}},
		{"single letters on the route merge", "xabcx", []string{"x", "ab", "cx"}},
		{"whitespace and CRLF", "a1b2 abc\r\nq", []string{"a1b2", " ", "ab", "c", "\r\n", "q"}},
		{"case matters", "ABC", []string{"ABC"}},
		{"symbols in a run", "c++和c#", []string{"c", "+", "+", "和", "c", "#"}},
		{"empty", "", []string{}},
		{"lone CR", "\r\r\n", []string{"\r", "\r\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Cut(tc.text); !slices.Equal(got, tc.want) {
				t.Errorf("Cut(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}

func TestDefaultDictionaryStats(t *testing.T) {
	d, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	// Python: t = jieba.Tokenizer(); t.initialize(); t.total, len(t.FREQ),
	// number of FREQ values > 0.
	if d.Total() != 60101967 || d.Nodes() != 498113 || d.Words() != 349045 {
		t.Errorf("total %d, nodes %d, words %d; want 60101967, 498113, 349045", d.Total(), d.Nodes(), d.Words())
	}
	for _, tc := range []struct {
		word       string
		freq       float64
		ok, isWord bool
	}{
		{"的", 318825, true, true},
		{"中国科学院", 873, true, true},
		{"B超", 3, true, true}, // listed twice (3 and 3): last wins
		{"中国科", 0, true, false},
		{"qqqq", 0, false, false},
	} {
		w, ok := d.Freq(tc.word)
		if ok != tc.ok || ok && (w == w) != tc.isWord {
			t.Errorf("Freq(%q): weight %v ok %v; want ok %v word %v", tc.word, w, ok, tc.ok, tc.isWord)
			continue
		}
		if tc.isWord {
			if want := math.Log(tc.freq) - math.Log(60101967); math.Abs(w-want) > 1e-12 {
				t.Errorf("Freq(%q) = %v, want %v", tc.word, w, want)
			}
		}
	}
}

func TestReadDictionaryErrors(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"no frequency", "word\n"},
		{"bad frequency", "word x n\n"},
		{"negative frequency", "word -3\n"},
		{"invalid utf8", "w\xffd 3\n"},
		{"zero total", "a 0\n"},
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadDictionary(strings.NewReader(tc.text))
			if !errors.Is(err, ErrBadDictionary) {
				t.Fatalf("err = %v, want ErrBadDictionary", err)
			}
		})
	}
	// Duplicates keep the last frequency, the total counts every line.
	d, err := ReadDictionary(strings.NewReader("ab 2\r\nab 7 n\n\nb 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Total() != 10 {
		t.Errorf("total %d, want 10", d.Total())
	}
	if w, _ := d.Freq("ab"); math.Abs(w-(math.Log(7)-math.Log(10))) > 1e-15 {
		t.Errorf("weight of ab %v, want log(7/10)", w)
	}
}

// lnRef computes ln(x) with 256-bit big.Float arithmetic (atanh series),
// rounded to nearest float64: the reference for correct rounding.
func lnRef(x float64) float64 {
	const prec = 256
	m, e := math.Frexp(x)
	m, e = m*2, e-1                           // m in [1, 2)
	atanh2 := func(s *big.Float) *big.Float { // 2·atanh(s)
		s2 := new(big.Float).SetPrec(prec).Mul(s, s)
		sum := new(big.Float).SetPrec(prec)
		term := new(big.Float).SetPrec(prec).Set(s)
		eps := new(big.Float).SetMantExp(big.NewFloat(1), -300)
		for k := 0; ; k++ {
			q := new(big.Float).SetPrec(prec).Quo(term, new(big.Float).SetInt64(int64(2*k+1)))
			sum.Add(sum, q)
			if q.Abs(q).Cmp(eps) < 0 {
				break
			}
			term.Mul(term, s2)
		}
		return sum.Mul(sum, big.NewFloat(2))
	}
	bm := new(big.Float).SetPrec(prec).SetFloat64(m)
	one := new(big.Float).SetPrec(prec).SetInt64(1)
	s := new(big.Float).SetPrec(prec).Quo(new(big.Float).SetPrec(prec).Sub(bm, one), new(big.Float).SetPrec(prec).Add(bm, one))
	third := new(big.Float).SetPrec(prec).Quo(one, new(big.Float).SetPrec(prec).SetInt64(3))
	ln2 := atanh2(third)
	r := atanh2(s)
	r.Add(r, new(big.Float).SetPrec(prec).Mul(ln2, new(big.Float).SetPrec(prec).SetInt64(int64(e))))
	f, _ := r.Float64()
	return f
}

func TestLnCorrectlyRounded(t *testing.T) {
	// Values where Go's math.Log and glibc's log (CPython's math.log)
	// disagree; glibc's is the correctly rounded one (checked with Python's
	// decimal module at 60 digits).
	glibc := map[float64]float64{
		3:        1.0986122886681098,
		14:       2.6390573296152584,
		48:       3.871201010907891,
		74:       4.30406509320417,
		60101967: 17.91155312775522, // the dictionary total
	}
	for x, want := range glibc {
		if got := ln(x); got != want {
			t.Errorf("ln(%v) = %v, want %v (glibc)", x, got, want)
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	xs := []float64{1, 2, 0.5, 1e-300, 1e300, math.SmallestNonzeroFloat64, math.MaxFloat64}
	for i := 1; i <= 3000; i++ {
		xs = append(xs, float64(i))
	}
	for range 3000 {
		xs = append(xs, float64(r.Int64N(1<<40)+1), r.Float64()*1e6)
	}
	bad := 0
	for _, x := range xs {
		if got, want := ln(x), lnRef(x); got != want {
			bad++
			if bad < 10 {
				t.Errorf("ln(%v) = %v, correctly rounded %v", x, got, want)
			}
		}
	}
	if got := ln(0); !math.IsInf(got, -1) {
		t.Errorf("ln(0) = %v, want -Inf", got)
	}
}

func TestEmbeddedDictIsUpstream(t *testing.T) {
	zr, err := gzip.NewReader(bytes.NewReader(dictGz))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 5071852 || bytes.Count(buf.Bytes(), []byte{'\n'}) != 349046 {
		t.Errorf("embedded dict.txt: %d bytes, %d lines; want 5071852, 349046", buf.Len(), bytes.Count(buf.Bytes(), []byte{'\n'}))
	}
}

// FuzzCut: any string, invalid UTF-8 included, is cut without panic into
// words that concatenate back to the (decoded) text.
func FuzzCut(f *testing.F) {
	for _, s := range []string{"", "永和服装饰品有限公司,今天天气非常好", "e.g. 3.14%", "\r\n\r", "a\xffb", "AT&T和c++", "𠀀㐀豈", "  多个  空格  "} {
		f.Add(s)
	}
	s := defaultSegmenter(f)
	f.Fuzz(func(t *testing.T, text string) {
		runes := []rune(text)
		ends := s.AppendCut(nil, runes)
		prev := 0
		for _, e := range ends {
			if e <= prev || e > len(runes) {
				t.Fatalf("Cut(%q): bad word end %d after %d (len %d)", text, e, prev, len(runes))
			}
			prev = e
		}
		if prev != len(runes) {
			t.Fatalf("Cut(%q): words cover %d of %d runes", text, prev, len(runes))
		}
		if got := strings.Join(s.Cut(text), ""); got != string(runes) {
			t.Fatalf("Cut(%q) joins to %q", text, got)
		}
		if utf8.ValidString(text) && strings.Join(s.Cut(text), "") != text {
			t.Fatalf("Cut(%q) lost text", text)
		}
	})
}

func BenchmarkReadDictionary(b *testing.B) {
	zr, err := gzip.NewReader(bytes.NewReader(dictGz))
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(zr); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadDictionary(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCut cuts Debian fortunes-zh's "chinese" file (GPL-3+, read from
// the system when installed, never shipped) and reports characters/s.
func BenchmarkCut(b *testing.B) {
	raw, err := os.ReadFile("/usr/share/games/fortunes/chinese")
	if err != nil {
		b.Skipf("Chinese text absent (apt-get install fortunes-zh): %v", err)
	}
	runes := []rune(string(raw))
	s := defaultSegmenter(b)
	dst := make([]int, 0, len(runes))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		dst = s.AppendCut(dst[:0], runes)
	}
	b.ReportMetric(float64(len(runes))*float64(b.N)/b.Elapsed().Seconds(), "chars/s")
}
