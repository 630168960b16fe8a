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
		"pairs": func(in string, max int) error {
			_, err := labelled.ReadPairsFrom(strings.NewReader(in), "x.jsonl", max)
			return err
		},
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

// The JSONL readers drop a UTF-8 byte-order mark at the start of the file
// (Windows Notepad saves one), not counting it in the line limit, and only
// there: one starting a later line is still an error on that line.
func TestJSONLineBOM(t *testing.T) {
	const bom = "\ufeff"
	rows := map[string]string{
		"choices": `{"question": "q", "choices": ["a", "b"], "label": 1}`,
		"qa":      `{"question": "q", "context": "ab", "answers": {"text": ["a"], "answer_start": [0]}}`,
		"pairs":   `{"anchor": "a", "positive": "b"}`,
	}
	read := map[string]func(in string, max int) (int, error){
		"choices": func(in string, max int) (int, error) {
			s, err := readChoices(strings.NewReader(in), "x.jsonl", max)
			if err != nil {
				return 0, err
			}
			return len(s), nil
		},
		"qa": func(in string, max int) (int, error) {
			s, err := readQAJSONL(strings.NewReader(in), "x.jsonl", max)
			if err != nil {
				return 0, err
			}
			return len(s), nil
		},
		"pairs": func(in string, max int) (int, error) {
			s, err := labelled.ReadPairsFrom(strings.NewReader(in), "x.jsonl", max)
			if err != nil {
				return 0, err
			}
			return len(s.Rows), nil
		},
	}
	for name, f := range read {
		row := rows[name]
		if n, err := f(bom+row+"\r\n"+row+"\n", 0); err != nil || n != 2 {
			t.Errorf("%s: a file starting with a byte-order mark: %d rows, %v", name, n, err)
		}
		if n, err := f(bom+row, len(row)); err != nil || n != 1 {
			t.Errorf("%s: the mark counted in the first line's limit %d: %d rows, %v", name, len(row), n, err)
		}
		if n, err := f(bom+"\n"+row, 0); err != nil || n != 1 {
			t.Errorf("%s: a mark alone on line 1: %d rows, %v", name, n, err)
		}
		_, err := f(row+"\n"+bom+row+"\n", 0)
		var ie *labelled.InputError
		if !errors.As(err, &ie) || ie.Line != 2 {
			t.Errorf("%s: a mark starting line 2: got %v, want an error on line 2", name, err)
		}
	}
	// Files shorter than the mark reach the row parser whole.
	for _, in := range []string{"\xef", "\xef\xbb", "\xef\xbb\n" + rows["pairs"]} {
		_, err := labelled.ReadPairsFrom(strings.NewReader(in), "x.jsonl", 0)
		var ie *labelled.InputError
		if !errors.As(err, &ie) || ie.Line != 1 {
			t.Errorf("%q: got %v, want an error on line 1", in, err)
		}
	}
}

// The JSONL readers refuse a line that is not valid UTF-8, naming it
// (encoding/json would read its bytes as U+FFFD and train on them).
func TestJSONLineUTF8(t *testing.T) {
	rows := map[string]string{
		"choices": `{"question": "q", "choices": ["a", "b"], "label": 1}`,
		"qa":      `{"question": "q", "context": "ab", "answers": {"text": ["a"], "answer_start": [0]}}`,
		"pairs":   `{"anchor": "a", "positive": "b"}`,
	}
	bad := map[string]string{
		"choices": "{\"question\": \"q\xff\", \"choices\": [\"a\", \"b\"], \"label\": 1}",
		"qa":      "{\"question\": \"q\xff\", \"context\": \"ab\", \"answers\": {\"text\": [\"a\"], \"answer_start\": [0]}}",
		"pairs":   "{\"anchor\": \"a\", \"positive\": \"b\xfe\"}",
	}
	read := map[string]func(in string) error{
		"choices": func(in string) error { _, err := readChoices(strings.NewReader(in), "x.jsonl", 0); return err },
		"qa":      func(in string) error { _, err := readQAJSONL(strings.NewReader(in), "x.jsonl", 0); return err },
		"pairs": func(in string) error {
			_, err := labelled.ReadPairsFrom(strings.NewReader(in), "x.jsonl", 0)
			return err
		},
	}
	for name, f := range read {
		err := f(rows[name] + "\n" + rows[name] + "\n" + bad[name] + "\n")
		var ie *labelled.InputError
		if !errors.As(err, &ie) || ie.Line != 3 || !strings.Contains(err.Error(), "x.jsonl:3: the line is not valid UTF-8") {
			t.Errorf("%s: got %v, want an error naming line 3 and UTF-8", name, err)
		}
	}
}
