package finetune

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/data/labelled"
)

// The JSONL readers hold the line limit below a Scanner's 64 KiB first
// buffer too, name the line, and take the largest limit without overflow.
func TestJSONLineLimit(t *testing.T) {
	long := `{"question": "q", "choices": ["a", "b"], "label": 0, "pad": "` + strings.Repeat("x", 200) + `"}`
	short := `{"question": "q", "choices": ["a", "b"], "label": 1}`
	qa := `{"question": "q", "context": "ab", "answers": {"text": ["a"], "answer_start": [0]}, "pad": "` + strings.Repeat("x", 200) + `"}`
	pair := `{"anchor": "a", "positive": "` + strings.Repeat("b", 200) + `"}`
	read := map[string]func(in string, max int) error{
		"choices": func(in string, max int) error {
			_, err := readChoices(strings.NewReader(in), "x.jsonl", max)
			return err
		},
		"qa": func(in string, max int) error {
			_, err := readQAJSONL(strings.NewReader(in), "x.jsonl", max)
			return err
		},
		"pairs": func(in string, max int) error { _, err := readPairs(strings.NewReader(in), "x.jsonl", max); return err },
	}
	rows := map[string]string{"choices": long, "qa": qa, "pairs": pair}
	for name, f := range read {
		in := short + "\n" + rows[name] + "\n"
		if name != "choices" {
			in = rows[name] + "\n"
		}
		line := strings.Count(in, "\n")
		err := f(in, 100)
		var ie *labelled.InputError
		if !errors.As(err, &ie) || ie.Line != line || !strings.Contains(err.Error(), "more than 100 bytes") {
			t.Errorf("%s: limit 100 on a %d-byte line %d: got %v", name, len(rows[name]), line, err)
		}
		n := len(rows[name])
		if err := f(rows[name], n); err != nil {
			t.Errorf("%s: a line of exactly the limit %d: %v", name, n, err)
		}
		if err := f(rows[name], n-1); err == nil {
			t.Errorf("%s: a line of %d bytes passed the limit %d", name, n, n-1)
		}
		if err := f(rows[name], math.MaxInt); err != nil {
			t.Errorf("%s: limit MaxInt: %v", name, err)
		}
	}
}
