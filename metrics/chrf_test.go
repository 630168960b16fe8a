package metrics

import (
	"testing"
)

func TestCHRFSacreBLEU(t *testing.T) {
	type tc struct {
		hyp, ref []string
		want     float64
	}
	beta3Eps := []tc{
		{[]string{"abcdefg"}, []string{"hijklmnop"}, 0},
		{[]string{"a"}, []string{"b"}, 0},
		{[]string{""}, []string{"b"}, 0},
		{[]string{""}, []string{"ref"}, 0},
		{[]string{""}, []string{"reference"}, 0},
		{[]string{"aa"}, []string{"ab"}, 8.3333},
		{[]string{"a", "b"}, []string{"a", "c"}, 8.3333},
		{[]string{"a"}, []string{"a"}, 16.6667},
		{[]string{"a b c"}, []string{"a b c"}, 50},
		{[]string{"a b c"}, []string{"abc"}, 50},
		{[]string{" risk assessment must be made of those who are qualified and expertise in the sector - these are the scientists ."},
			[]string{"risk assessment has to be undertaken by those who are qualified and expert in that area - that is the scientists ."}, 63.361730},
		{[]string{" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "},
			[]string{"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."}, 64.1302698},
		{[]string{"Niemand hat die Absicht, eine Mauer zu errichten"}, []string{"Niemand hat die Absicht, eine Mauer zu errichten"}, 100},
	}
	beta3Eff := []tc{
		{[]string{"a"}, []string{"a"}, 100},
		{[]string{""}, []string{"reference"}, 0},
		{[]string{"a b c"}, []string{"a b c"}, 100},
		{[]string{"a b c"}, []string{"abc"}, 100},
		{[]string{""}, []string{"c"}, 0},
		{[]string{"a", "b"}, []string{"a", "c"}, 50},
		{[]string{"aa"}, []string{"ab"}, 25},
	}
	beta3Space := []tc{
		{[]string{"Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich."},
			[]string{"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."}, 67.3481606},
		{[]string{"risk assessment must be made of those who are qualified and expertise in the sector - these are the scientists ."},
			[]string{"risk assessment has to be undertaken by those who are qualified and expert in that area - that is the scientists ."}, 65.2414427},
	}
	for _, set := range []struct {
		name  string
		c     CHRF
		cases []tc
	}{
		{"eps_smoothing", CHRF{Beta: 3, EpsSmoothing: true}, beta3Eps},
		{"effective_order", CHRF{Beta: 3}, beta3Eff},
		{"whitespace", CHRF{Beta: 3, Whitespace: true}, beta3Space},
	} {
		for i, tc := range set.cases {
			got, err := set.c.Corpus(tc.hyp, [][]string{tc.ref})
			if err != nil {
				t.Fatal(err)
			}
			if !within(got.Score, tc.want, 1e-4) {
				t.Errorf("%s %d %q: %.7f, want %.7f", set.name, i, tc.hyp, got.Score, tc.want)
			}
		}
	}
	for _, tc := range []struct {
		hyp, ref string
		want     float64
	}{
		{"Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře.",
			"Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře.", 39.14078509},
		{"Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři.",
			"A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři.", 31.22557079},
		{"Lapali po dechu, jejich životy skončily dřív, než skutečně začaly.",
			"Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, připomněli.", 57.15704367},
	} {
		got, err := CHRF{EpsSmoothing: true}.Sentence(tc.hyp, []string{tc.ref})
		if err != nil {
			t.Fatal(err)
		}
		if !within(got.Score, tc.want, 1e-4) {
			t.Errorf("sentence %q: %.8f, want %.8f", tc.hyp, got.Score, tc.want)
		}
	}
}

// The defaults are chrF2 (orders 6, 0, β 2); chrF++'s words have
// punctuation split off.
func TestCHRFDefaults(t *testing.T) {
	got, err := CorpusCHRF(readmeHyps, readmeRefs)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name() != "chrF2" || got.CharOrder != 6 || got.Beta != 2 || got.Score <= 0 || got.Score >= 100 {
		t.Errorf("defaults: %+v %s", got, got.Name())
	}
	if n := (CHRFScore{Beta: 2, WordOrder: 2}).Name(); n != "chrF2++" {
		t.Errorf("name %q", n)
	}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello, world! (x) a .b", []string{"Hello", ",", "world", "!", "(x", ")", "a", ".", "b"}},
		{"«ok» —", []string{"«ok»", "—"}},
	} {
		if got := chrfWords(tc.in); len(got) != len(tc.want) || func() bool {
			for i := range got {
				if got[i] != tc.want[i] {
					return true
				}
			}
			return false
		}() {
			t.Errorf("chrfWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// One hypothesis "ab" against "abc": orders 1–6 give hyp/ref/match
// 2/3/2, 1/2/1 and nothing above; P = (1 + 1)/2, R = (2/3 + 1/2)/2 = 7/12,
// chrF2 = 5·P·R/(4P + R) = 100·(35/12)/(55/12) = 63.6363…
func TestCHRFStatistics(t *testing.T) {
	got, err := CHRF{}.Sentence("a b", []string{"abc"})
	if err != nil {
		t.Fatal(err)
	}
	if want := 100 * 35.0 / 55.0; !within(got.Score, want, 1e-12) {
		t.Errorf("chrF2(ab, abc) = %.12f, want %.12f", got.Score, want)
	}
	// Two references: the one with the better segment score is used.
	two, _ := CHRF{}.Corpus([]string{"a b"}, [][]string{{"xyz"}, {"abc"}})
	if !within(two.Score, got.Score, 1e-12) {
		t.Errorf("best of two references: %g, want %g", two.Score, got.Score)
	}
}
