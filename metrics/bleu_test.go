package metrics

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// The cases of sacreBLEU 2.6.0's own tests (test/test_bleu.py,
// test/test_sentence_bleu.py, test/test_chrf.py), with their expected
// values; its tolerances are 1e-8 (BLEU), 1e-3 (sentence BLEU) and 1e-4
// (chrF). Cases of tokenizers not implemented here (intl) are left out.

// The README example of sacreBLEU: three hypotheses, two reference streams.
var (
	readmeRefs = [][]string{
		{"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
		{"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."},
	}
	readmeHyps = []string{"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."}
)

func within(got, want, tol float64) bool { return math.Abs(got-want) < tol }

func TestCorpusBLEUSacreBLEU(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    BLEU
		hyps []string
		want float64
	}{
		{"default", BLEU{}, readmeHyps, 48.530827},
		{"empty_hypotheses_kept", BLEU{}, []string{"", "", ""}, 0},
		{"tokenize_none", BLEU{Tokenize: "none"}, readmeHyps, 49.1919566},
		{"tokenize_13a", BLEU{Tokenize: "13a"}, readmeHyps, 48.530827},
		{"tokenize_intl", BLEU{Tokenize: "intl"}, readmeHyps, 43.91623493},
		{"smooth_none", BLEU{Smooth: "none"}, readmeHyps, 48.530827},
	} {
		got, err := tc.b.Corpus(tc.hyps, readmeRefs)
		if err != nil {
			t.Fatal(err)
		}
		if !within(got.Score, tc.want, 1e-8) {
			t.Errorf("%s: BLEU %.8f, want %.8f", tc.name, got.Score, tc.want)
		}
	}
	for order, want := range map[int]string{1: "77.65", 2: "60.50", 3: "53.93", 4: "48.53", 5: "46.14", 6: "43.28"} {
		got, err := BLEU{MaxOrder: order}.Corpus(readmeHyps, readmeRefs)
		if err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprintf("%.2f", got.Score); s != want {
			t.Errorf("max order %d: BLEU %s, want %s", order, s, want)
		}
	}
}

// rawCorpusBLEU is sacreBLEU's raw_corpus_bleu: no tokenization, floor
// smoothing with the given value (0 included), effective order.
func rawCorpusBLEU(t *testing.T, hyps []string, refs [][]string, floor float64) BLEUScore {
	t.Helper()
	b := BLEU{Tokenize: "none", EffectiveOrder: true}
	stats, err := b.segmentStats(hyps, refs)
	if err != nil {
		t.Fatal(err)
	}
	s := sumStats(stats, b.width())
	return ComputeBLEU(s[2:6], s[6:10], int(s[0]), int(s[1]), "floor", floor, true)
}

// sacreBLEU's README: the example, and the example without the first
// reference of the first segment ("" in its stream).
func TestBLEUReadmeSacreBLEU(t *testing.T) {
	got, _ := CorpusBLEU(readmeHyps, readmeRefs)
	if s := got.String(); s != "48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)" {
		t.Errorf("README example: %s", s)
	}
	refs := [][]string{append([]string{""}, readmeRefs[0][1:]...), readmeRefs[1]}
	got, _ = CorpusBLEU(readmeHyps, refs)
	if s := got.String(); s != "29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 ref_len = 19)" {
		t.Errorf("README example, variable references: %s", s)
	}
	chrf, _ := CorpusCHRF(readmeHyps, readmeRefs)
	if s := fmt.Sprintf("%s = %.2f", chrf.Name(), chrf.Score); s != "chrF2 = 59.73" {
		t.Errorf("README example: %s, want chrF2 = 59.73", s)
	}
}

func TestRawBLEUSacreBLEU(t *testing.T) {
	for _, tc := range []struct {
		hyps  []string
		refs  [][]string
		floor float64
		want  float64 // 0–1
	}{
		{[]string{"this is a test", "another test"}, [][]string{{"ref1", "ref2"}}, 0.01, 0},
		{[]string{"this is a test"}, [][]string{{"this is a test"}}, 0.01, 1},
		{[]string{"this is a fest"}, [][]string{{"this is a test"}}, 0.01, 0.223606797749979},
		// effective order
		{[]string{"test"}, [][]string{{"a test"}}, 0.01, 0.3678794411714425},
		{[]string{"a test"}, [][]string{{"a test"}}, 0.01, 1},
		{[]string{"a little test"}, [][]string{{"a test"}}, 0.01, 0.03218297948685433},
		// offset
		{[]string{"am I am a character sequence"}, [][]string{{"I am a symbol string sequence a a"}}, 0, 0},
		{[]string{"am I am a character sequence"}, [][]string{{"I am a symbol string sequence a a"}}, 0.1, 0.1555722182},
	} {
		got := rawCorpusBLEU(t, tc.hyps, tc.refs, tc.floor).Score / 100
		if !within(got, tc.want, 1e-8) {
			t.Errorf("%q vs %q (floor %g): %.12f, want %.12f", tc.hyps, tc.refs, tc.floor, got, tc.want)
		}
	}
	got := rawCorpusBLEU(t, []string{"am I am a character sequence"}, [][]string{{"I am a symbol string sequence a a"}}, 0.01)
	if !reflect.DeepEqual(got.Counts, []float64{4, 2, 1, 0}) || !reflect.DeepEqual(got.Totals, []float64{6, 5, 4, 3}) {
		t.Errorf("statistics %v / %v, want [4 2 1 0] / [6 5 4 3]", got.Counts, got.Totals)
	}
}

func TestComputeBLEUSacreBLEU(t *testing.T) {
	if got := ComputeBLEU([]float64{9, 7, 5, 3}, []float64{10, 8, 6, 4}, 11, 11, "none", 0, false).Score / 100; !within(got, 0.8375922397, 1e-8) {
		t.Errorf("scoring: %.10f, want 0.8375922397", got)
	}
	for i, tc := range []struct {
		correct, total []float64
		sys, ref       int
		floor          float64
	}{
		{[]float64{0, 0, 0, 0}, []float64{4, 4, 2, 1}, 0, 1, 0},
		{[]float64{0, 0, 0, 0}, []float64{10, 11, 12, 0}, 14, 10, 0},
		{[]float64{0, 0, 0, 0}, []float64{0, 0, 0, 0}, 0, 0, 0},
		{[]float64{6, 5, 4, 0}, []float64{6, 5, 4, 3}, 6, 6, 0},
		{[]float64{0, 0, 0, 0}, []float64{0, 0, 0, 0}, 0, 0, 0.1},
		{[]float64{0, 0, 0, 0}, []float64{0, 0, 0, 0}, 1, 5, 0.01},
	} {
		if got := ComputeBLEU(tc.correct, tc.total, tc.sys, tc.ref, "floor", tc.floor, false).Score; got != 0 {
			t.Errorf("degenerate %d: %g, want 0", i, got)
		}
	}
}

func TestSentenceBLEUSacreBLEU(t *testing.T) {
	const (
		ref = "producţia de zahăr brut se exprimă în zahăr alb;"
		sys = "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;"
	)
	for _, tc := range []struct {
		smooth    string
		value     float64
		lowercase bool
		tok       string
		want      float64
	}{
		{"exp", 0, false, "13a", 8.493},
		{"none", 0, false, "13a", 0},
		{"floor", 0, false, "13a", 4.51688},
		{"floor", 0.1, false, "13a", 4.51688},
		{"floor", 0.5, false, "13a", 10.10},
		{"add-k", 0, false, "13a", 14.882},
		{"add-k", 1, false, "13a", 14.882},
		{"add-k", 2, false, "13a", 21.389},
		{"exp", 0, false, "none", 7.347},
		{"exp", 0, false, "intl", 8.493},
		{"exp", 0, false, "char", 40.8759},
		{"exp", 0, true, "char", 42.0267},
	} {
		b := BLEU{Smooth: tc.smooth, SmoothValue: tc.value, Lowercase: tc.lowercase, Tokenize: tc.tok, EffectiveOrder: true}
		got, err := b.Sentence(sys, []string{ref})
		if err != nil {
			t.Fatal(err)
		}
		if !within(got.Score, tc.want, 1e-3) {
			t.Errorf("%+v: %.5f, want %.5f", b, got.Score, tc.want)
		}
	}
	for _, smooth := range []string{"exp", "none", "floor", "add-k"} {
		got, _ := BLEU{Smooth: smooth, EffectiveOrder: true}.Sentence("this is a cat", []string{"okay thanks"})
		if got.Score != 0 {
			t.Errorf("no match, %s: %g, want 0", smooth, got.Score)
		}
	}
	if got, _ := SentenceBLEU(sys, []string{ref}); !within(got.Score, 8.493, 1e-3) {
		t.Errorf("SentenceBLEU: %.4f, want 8.493", got.Score)
	}
}

// Cases worked out by hand from mteval-v13a's rules.
func TestTokenize13a(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"The dog bit the man.", "The dog bit the man ."},
		{"It wasn't surprising.", "It wasn't surprising ."},
		{"3.14, 1,000 and 2-3 well-known", "3.14 , 1,000 and 2 - 3 well-known"},
		{"a.b,c", "a . b , c"},
		{"end...", "end . . ."},
		{"x.5 5.x", "x . 5 5 . x"}, // rule 2 splits "x." before rule 3 could see ".5"
		{"(quote) \"q\" [b] {c} a/b 50% $5 #1 @me ^_^ `x` ~|", `( quote ) " q " [ b ] { c } a / b 50 % $ 5 # 1 @ me ^ _ ^ ` + "` x ` ~ |"},
		{"&quot;x&quot; &amp;lt; A&amp;B &gt;", `" x " < A & B >`}, // replaced in turn: &amp;lt; → &lt; → <
		{"a<skipped>b line-\nbreak\nnext", "ab linebreak next"},
		{"  spaced\t\x1ctext  ", "spaced text"},
		{"¿Qué? ¡Sí! «comillas» — ok", "¿Qué ? ¡Sí ! «comillas» — ok"},
	} {
		if got := Tokenize13a(tc.in); got != tc.want {
			t.Errorf("Tokenize13a(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Cases worked out by hand from mteval-v14's international rules.
func TestTokenizeIntl(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"The dog bit the man.", "The dog bit the man ."},
		{"It wasn't surprising.", "It wasn ' t surprising ."},
		{"3.14, 1,000 in 1999.", "3.14 , 1,000 in 1999."}, // a number then a period at the end stays, as in mteval-v14
		{"¿Qué? «sí» 5€ a+b", "¿ Qué ? « sí » 5 € a + b"},
		{"x.5", "x . 5"},
	} {
		if got := TokenizeIntl(tc.in); got != tc.want {
			t.Errorf("TokenizeIntl(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestBLEUErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    BLEU
		hyps []string
		refs [][]string
		want string
	}{
		{"no_refs", BLEU{}, []string{"a"}, nil, "no reference stream"},
		{"short_stream", BLEU{}, []string{"a", "b"}, [][]string{{"a", "b"}, {"a"}}, "reference stream 2 has 1 segments, the hypotheses 2"},
		{"tokenizer", BLEU{Tokenize: "zh"}, []string{"a"}, [][]string{{"a"}}, `tokenizer "zh"`},
		{"smoothing", BLEU{Smooth: "add-one"}, []string{"a"}, [][]string{{"a"}}, `smoothing "add-one"`},
	} {
		_, err := tc.b.Corpus(tc.hyps, tc.refs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestBLEUScoreString(t *testing.T) {
	got, _ := CorpusBLEU(readmeHyps, readmeRefs)
	if s := got.String(); s[:6] != "48.53 " || !strings.Contains(s, "hyp_len = ") {
		t.Errorf("String() = %q", s)
	}
}
