package metrics

import (
	"math"
	"testing"
)

func TestNormalizeAnswer(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"The Eiffel  Tower!", "eiffel tower"},
		{"an apple, a pear", "apple pear"},
		{"theatre anthem", "theatre anthem"}, // articles only as whole words
		{"A_the 2the", "athe 2the"},          // "_" is punctuation; a digit is a word character
		{"l'été — the end", "lété — end"},    // only ASCII punctuation goes; é is a word character
		{"Théa the", "théa"},
		{"\tNew\nYork\x1f", "new york"},
		{"", ""},
	} {
		if got := NormalizeAnswer(c.in); got != c.want {
			t.Errorf("NormalizeAnswer(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSQuADHandComputed(t *testing.T) {
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("EM", ExactMatch("the Denver Broncos", "Denver Broncos"), 1)
	near("EM differs", ExactMatch("Broncos", "Denver Broncos"), 0)
	// pred {denver, broncos, won}, gold {denver, broncos}: P 2/3, R 1, F1 0.8.
	near("F1", AnswerF1("Denver Broncos won", "The Denver Broncos"), 0.8)
	// Bags: pred "x x y", gold "x y y": common 2 (one x, one y), P 2/3, R 2/3.
	near("F1 bags", AnswerF1("x x y", "x y y"), 2.0/3)
	near("F1 none", AnswerF1("cat", "dog"), 0)
	near("F1 empty both", AnswerF1("", "the"), 1)
	near("F1 empty one", AnswerF1("", "dog"), 0)
	// Question 1: best of two golds (EM 1); question 2: F1 0.8, EM 0; question 3
	// unanswerable answered "": EM 1, F1 1.
	em, f1 := SQuAD([]string{"Paris", "Denver Broncos won", ""},
		[][]string{{"London", "paris."}, {"Denver Broncos"}, nil})
	near("SQuAD EM", em, 2.0/3)
	near("SQuAD F1", f1, (1+0.8+1)/3)
	if em, f1 := SQuAD(nil, nil); em != 0 || f1 != 0 {
		t.Errorf("empty input: %v %v", em, f1)
	}
}
