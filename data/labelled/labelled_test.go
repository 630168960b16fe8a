package labelled

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		file    string
		content string
		opts    ReadOptions
		want    []Example
	}{
		{"jsonl", "a.jsonl", jsonl(`{"text": "fine film", "label": "pos"}`, ``, `{"text": "bad", "label": 0}`, `{"text": "x", "label": true}`),
			ReadOptions{}, []Example{{Line: 1, Text: "fine film", Label: "pos"}, {Line: 3, Text: "bad", Label: "0"}, {Line: 4, Text: "x", Label: "true"}}},
		{"jsonl_columns_pair", "a.jsonl", jsonl(`{"s1": "a", "s2": "b", "y": 1}`),
			ReadOptions{Columns: Columns{Text: "s1", Pair: "s2", Label: "y"}}, []Example{{Line: 1, Text: "a", TextPair: str("b"), Label: "1"}}},
		{"csv_quotes_bom_crlf", "a.csv", "\ufefftext,label\r\n\"hello, \"\"world\"\"\",pos\r\n\"two\nlines\",neg\r\n",
			ReadOptions{}, []Example{{Line: 2, Text: `hello, "world"`, Label: "pos"}, {Line: 3, Text: "two\nlines", Label: "neg"}}},
		// GLUE's MRPC layout: tab-separated, no quoting, quotes kept as text.
		{"tsv_glue_mrpc", "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t702876\t702977\tHe said \"yes\".\tHe agreed.\n",
			ReadOptions{Columns: Columns{Text: "#1 String", Pair: "#2 String", Label: "Quality"}}, []Example{{Line: 2, Text: `He said "yes".`, TextPair: str("He agreed."), Label: "1"}}},
		// GLUE's CoLA layout: no header, the label in column 1 and the sentence in column 3.
		{"tsv_no_header_cola", "in_domain_train.tsv", "gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n",
			ReadOptions{NoHeader: true, Columns: Columns{Text: "3", Label: "1"}}, []Example{{Line: 1, Text: "Our friends won't buy this analysis.", Label: "1"}, {Line: 2, Text: "They drank the pub.", Label: "0"}}},
		{"multi_label_json", "m.jsonl", jsonl(`{"text": "t", "label": ["a", "b"]}`, `{"text": "u", "label": []}`, `{"text": "v", "label": "b,c"}`),
			ReadOptions{Problem: MultiLabel}, []Example{{Line: 1, Text: "t", Labels: []string{"a", "b"}}, {Line: 2, Text: "u"}, {Line: 3, Text: "v", Labels: []string{"b", "c"}}}},
		{"multi_label_tsv", "m.tsv", "text\tlabel\nt\ta|b\n", ReadOptions{Problem: MultiLabel, LabelSep: "|"}, []Example{{Line: 2, Text: "t", Labels: []string{"a", "b"}}}},
		{"regression", "r.csv", "sentence,score\nx,3.5\ny,-1e-1\n", ReadOptions{Problem: Regression, Columns: Columns{Text: "sentence", Label: "score"}},
			[]Example{{Line: 2, Text: "x", Value: 3.5}, {Line: 3, Text: "y", Value: -0.1}}},
		{"token_json", "t.jsonl", jsonl(`{"tokens": ["John", "lives"], "tags": ["B-PER", "O"]}`), ReadOptions{Problem: TokenTags},
			[]Example{{Line: 1, Text: "John lives", Words: []string{"John", "lives"}, Tags: []string{"B-PER", "O"}}}},
		{"token_tsv", "t.tsv", "tokens\ttags\nJohn lives\tB-PER O\n", ReadOptions{Problem: TokenTags},
			[]Example{{Line: 2, Text: "John lives", Words: []string{"John", "lives"}, Tags: []string{"B-PER", "O"}}}},
		{"unlabelled", "p.jsonl", jsonl(`{"text": "a"}`, `{"text": "b", "label": "x"}`), ReadOptions{Unlabelled: true},
			[]Example{{Line: 1, Text: "a"}, {Line: 2, Text: "b", Label: "x"}}},
		{"unlabelled_csv_without_column", "p.csv", "text\nhello\n", ReadOptions{Unlabelled: true}, []Example{{Line: 2, Text: "hello"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := ReadFile(writeFile(t, tc.file, tc.content), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds.Examples) != len(tc.want) {
				t.Fatalf("got %d examples, want %d: %+v", len(ds.Examples), len(tc.want), ds.Examples)
			}
			for i, w := range tc.want {
				g := ds.Examples[i]
				if g.Line != w.Line || g.Text != w.Text || g.Label != w.Label || g.Value != w.Value ||
					strings.Join(g.Labels, "|") != strings.Join(w.Labels, "|") || strings.Join(g.Words, "|") != strings.Join(w.Words, "|") ||
					strings.Join(g.Tags, "|") != strings.Join(w.Tags, "|") || (g.TextPair == nil) != (w.TextPair == nil) ||
					(g.TextPair != nil && *g.TextPair != *w.TextPair) {
					t.Errorf("example %d:\n got %+v\nwant %+v", i, g, w)
				}
				wantLabel := !(tc.opts.Unlabelled && g.Label == "")
				if g.HasLabel != wantLabel {
					t.Errorf("example %d: HasLabel %v, want %v", i, g.HasLabel, wantLabel)
				}
			}
		})
	}
}

// Every bad input gives an error that names the file and, where there is
// one, the line.
func TestReadErrors(t *testing.T) {
	long := `{"text": "` + strings.Repeat("x", 200) + `", "label": "a"}`
	for _, tc := range []struct {
		name, file, content string
		opts                ReadOptions
		want                string // substring after "labelled: <path>"
	}{
		{"empty", "e.jsonl", "", ReadOptions{}, ": no examples: the file is empty"},
		{"blank_lines", "e.jsonl", "\n\n  \n", ReadOptions{}, ": no examples: the file is empty"},
		{"header_only", "e.csv", "text,label\n", ReadOptions{}, ": no examples: the file has a header but no rows"},
		{"missing_column_csv", "m.csv", "sentence,label\nhi,a\n", ReadOptions{}, `:1: no column "text" for the text (columns: "sentence", "label")`},
		{"missing_label_csv", "m.tsv", "text\tlab\nhi\ta\n", ReadOptions{}, `:1: no column "label" for the label`},
		{"missing_key_jsonl", "m.jsonl", jsonl(`{"text": "a", "label": "x"}`, `{"text": "b"}`), ReadOptions{}, `:2: no key "label" for the label (keys: "text")`},
		{"text_not_string", "m.jsonl", jsonl(`{"text": 3, "label": "x"}`), ReadOptions{}, `:1: key "text" (the text) is a number, want a string`},
		{"null_label", "m.jsonl", jsonl(`{"text": "a", "label": null}`), ReadOptions{}, `:1: key "label" (the label) is null`},
		{"empty_label", "m.csv", "text,label\na,\n", ReadOptions{}, `:2: the label in "label" is empty`},
		{"not_json", "m.jsonl", jsonl(`{"text": "a", "label": "x"}`, `{"text": "a"`), ReadOptions{}, `:2: not a JSON object`},
		{"two_values", "m.jsonl", jsonl(`{"text": "a", "label": "x"} {}`), ReadOptions{}, `:1: more than one JSON value on the line`},
		{"over_long_jsonl", "l.jsonl", jsonl(`{"text": "a", "label": "x"}`, long), ReadOptions{MaxLineBytes: 100}, `:2: the line has more than 100 bytes (the limit`},
		{"over_long_csv", "l.csv", "text,label\nok,a\n" + strings.Repeat("y", 300) + ",b\n", ReadOptions{MaxLineBytes: 100}, `:3: the line has more than 100 bytes (the limit`},
		{"over_long_tsv", "l.tsv", "text\tlabel\n" + strings.Repeat("y", 300) + "\tb\n", ReadOptions{MaxLineBytes: 100}, `:2: the line has more than 100 bytes (the limit`},
		{"field_count", "f.tsv", "text\tlabel\na\tb\tc\n", ReadOptions{}, `:2: the row has 3 fields, the header 2`},
		{"csv_quote", "q.csv", "text,label\n\"abc,x\n", ReadOptions{}, `:2: extraneous or missing " in quoted-field`},
		{"bad_utf8", "u.jsonl", "{\"text\": \"\xff\", \"label\": \"a\"}\n", ReadOptions{}, `:1: the line is not valid UTF-8`},
		{"bad_utf8_csv", "u.csv", "text,label\nok,a\nb\xffd,a\n", ReadOptions{}, `:3: the line is not valid UTF-8 (at byte 2)`},
		{"bad_utf8_tsv", "u.tsv", "text\tlabel\nok\ta\nok\ta\n\xfe\ta\n", ReadOptions{}, `:4: the line is not valid UTF-8`},
		{"too_many_labels", "m.jsonl", jsonl(`{"text": "a", "label": "x"}`, `{"text": "b", "label": "y"}`, `{"text": "c", "label": "x"}`, `{"text": "d", "label": "z"}`, `{"text": "e", "label": "w"}`),
			ReadOptions{MaxLabels: 2}, `:4: label "z" is one more than the 2 distinct labels a file may hold`},
		{"too_many_multi_labels", "m.csv", "text,label\na,\"x,y\"\nb,\"y,z\"\n", ReadOptions{Problem: MultiLabel, MaxLabels: 2}, `:3: label "z" is one more than the 2 distinct labels`},
		{"too_many_tags", "t.jsonl", jsonl(`{"tokens": ["a", "b"], "tags": ["O", "B"]}`, `{"tokens": ["c"], "tags": ["I"]}`), ReadOptions{Problem: TokenTags, MaxLabels: 2}, `:2: label "I" is one more than the 2`},
		{"regression_not_number", "r.csv", "text,label\na,high\n", ReadOptions{Problem: Regression}, `:2: the value "high" of "label" is not a finite number`},
		{"tag_count", "t.jsonl", jsonl(`{"tokens": ["a", "b"], "tags": ["O"]}`), ReadOptions{Problem: TokenTags}, `:1: 2 words in "tokens" but 1 tags in "tags"`},
		{"no_header_bad_index", "n.tsv", "a\tb\n", ReadOptions{NoHeader: true, Columns: Columns{Text: "text", Label: "1"}}, `:1: without a header, columns are named by their 0-based index`},
		{"no_header_short_row", "n.tsv", "a\tb\tc\nd\te\n", ReadOptions{NoHeader: true, Columns: Columns{Text: "2", Label: "0"}}, `:2: no column 2 for the text: the row has 2 fields`},
		{"unknown_extension", "data.txt", "x", ReadOptions{}, `: cannot tell the format from the extension ".txt"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.file, tc.content)
			_, err := ReadFile(p, tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			if want := "labelled: " + p + tc.want; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q\ndoes not contain %q", err, want)
			}
		})
	}
}

func TestReadErrorType(t *testing.T) {
	_, err := ReadFile(writeFile(t, "e.jsonl", ""), ReadOptions{})
	var ie *InputError
	if !errors.As(err, &ie) || !errors.Is(err, ErrEmpty) {
		t.Fatalf("error %v is not an *InputError wrapping ErrEmpty", err)
	}
}

func TestInferLabels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels []string
		want   string
	}{
		{"numeric", []string{"10", "2", "1", "2"}, "1,2,10"},
		{"strings", []string{"pos", "neg", "neutral"}, "neg,neutral,pos"},
		{"mixed", []string{"1", "b", "a"}, "1,a,b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &Dataset{}
			for _, l := range tc.labels {
				ds.Examples = append(ds.Examples, Example{Label: l, HasLabel: true})
			}
			if got := strings.Join(InferLabels(ds, SingleLabel), ","); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSpecCheck(t *testing.T) {
	spec := Spec{Problem: SingleLabel, Labels: []string{"neg", "pos"}}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	ds := &Dataset{File: "dev.jsonl", Examples: []Example{{Line: 1, Text: "a", Label: "pos", HasLabel: true}, {Line: 4, Text: "b", Label: "neutral", HasLabel: true}}}
	err := spec.Check(ds, "task sentiment")
	want := `labelled: dev.jsonl:4: label "neutral" is not in the label set [neg, pos] (task sentiment)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	pair := "x"
	ds = &Dataset{File: "p.jsonl", Examples: []Example{{Line: 2, Text: "a", TextPair: &pair, Label: "pos", HasLabel: true}}}
	if err := spec.Check(ds, ""); err == nil || !strings.Contains(err.Error(), "p.jsonl:2: the model takes single texts") {
		t.Errorf("pair into a single-text spec: %v", err)
	}
	for _, bad := range []Spec{
		{Problem: SingleLabel, Labels: []string{"a"}},
		{Problem: SingleLabel, Labels: []string{"a", "a"}},
		{Problem: SingleLabel, Labels: []string{"a", "b", "c"}, Metric: "f1"},
		{Problem: SingleLabel, Labels: []string{"a", "b"}, Metric: "pearson"},
		{Problem: Regression, Labels: []string{"a", "b"}},
		{Problem: SingleLabel, Labels: []string{"a", "b"}, Positive: "c"},
		{Problem: "ranking"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) passed", bad)
		}
	}
}

// writeFile writes content to name in a fresh temporary folder.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// jsonl joins lines into a JSONL file.
func jsonl(lines ...string) string { return strings.Join(lines, "\n") + "\n" }
