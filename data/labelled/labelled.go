package labelled

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/internal/lines"
)

// Problem is what a model learns from the labels.
type Problem string

const (
	// SingleLabel is classification into one of the labels: softmax and
	// cross-entropy (HF problem_type single_label_classification).
	SingleLabel Problem = "single-label"
	// MultiLabel is classification into any subset of the labels: one
	// sigmoid and binary cross-entropy per label (multi_label_classification).
	MultiLabel Problem = "multi-label"
	// Regression predicts one number with the mean squared error (regression).
	Regression Problem = "regression"
	// TokenTags gives every word of a text a tag (RoFormerForTokenClassification):
	// the first sub-token of each word carries the word's tag, the others are
	// ignored (−100), as Hugging Face's token-classification examples do.
	TokenTags Problem = "token"
)

// Problems lists the valid problems.
var Problems = []Problem{SingleLabel, MultiLabel, Regression, TokenTags}

// ParseProblem returns the problem named s.
func ParseProblem(s string) (Problem, error) {
	for _, p := range Problems {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("labelled: unknown problem %q (valid: single-label, multi-label, regression, token)", s)
}

// Example is one labelled (or, for prediction, unlabelled) input.
type Example struct {
	Line     int     // 1-based line of the record in its file; 0 when not read from a file
	Text     string  // the text; for TokenTags the words joined by single spaces
	TextPair *string // the second text of a pair; nil for a single text
	HasLabel bool    // the label fields below are set

	Label  string   // SingleLabel: the class
	Labels []string // MultiLabel: the classes present (possibly none)
	Value  float64  // Regression: the target
	Words  []string // TokenTags: the words
	Tags   []string // TokenTags: one tag per word
}

// Dataset is a list of examples and the file they came from.
type Dataset struct {
	File     string // path or name used in error messages
	Examples []Example
}

// Columns names the fields of a record that a reader takes.
type Columns struct {
	Text  string `json:"text"`            // the text; for TokenTags the words (JSON array or space-separated)
	Pair  string `json:"pair,omitempty"`  // the second text of a pair; empty for single texts
	Label string `json:"label,omitempty"` // the label; for TokenTags the tags (JSON array or space-separated)
}

// DefaultColumns returns the column names used when none are given: text,
// label; tokens and tags for token classification.
func DefaultColumns(p Problem) Columns {
	if p == TokenTags {
		return Columns{Text: "tokens", Label: "tags"}
	}
	return Columns{Text: "text", Label: "label"}
}

// Format is a file format.
type Format string

const (
	JSONL Format = "jsonl" // one JSON object per line
	CSV   Format = "csv"   // RFC 4180 comma-separated values with a header row
	TSV   Format = "tsv"   // tab-separated values without quoting (GLUE's layout), with a header row
)

// ParseFormat accepts jsonl (or json, ndjson), csv and tsv.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "jsonl", "json", "ndjson":
		return JSONL, nil
	case "csv":
		return CSV, nil
	case "tsv", "tab":
		return TSV, nil
	}
	return "", fmt.Errorf("labelled: unknown format %q (valid: jsonl, csv, tsv)", s)
}

// DetectFormat returns the format that path's extension names.
func DetectFormat(path string) (Format, error) {
	ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	f, err := ParseFormat(ext)
	if err != nil {
		return "", fmt.Errorf("labelled: %s: cannot tell the format from the extension %q; name it with .jsonl, .csv or .tsv or give the format", path, filepath.Ext(path))
	}
	return f, nil
}

// DefaultMaxLineBytes is the longest line a reader accepts unless told
// otherwise (1 MiB): the default of every line reader of the toolkit.
const DefaultMaxLineBytes = lines.DefaultMaxBytes

// DefaultMaxLabels is the most distinct labels a file may hold unless told
// otherwise: 2²⁰, model/roformer's MaxLabels, the bound on num_labels.
const DefaultMaxLabels = 1 << 20

// ReadOptions say how to read a data file.
type ReadOptions struct {
	Format  Format // empty: from the file's extension
	Problem Problem
	Columns Columns
	// NoHeader reads CSV and TSV files without a header row; columns are then
	// named by their 0-based index ("0", "1", …), as GLUE's CoLA files need.
	NoHeader bool
	// LabelSep separates the labels of a MultiLabel cell in CSV and TSV
	// files (and in a JSON string); default ",". JSON arrays need none.
	LabelSep string
	// Unlabelled reads input for prediction: the label column may be absent;
	// when present it is read and checked.
	Unlabelled bool
	// MaxLineBytes bounds the length of a physical line, its end of line
	// not counted (DefaultMaxLineBytes when ≤ 0). A longer line is refused
	// as soon as the limit is passed, without reading the rest of it.
	MaxLineBytes int
	// MaxLabels bounds the distinct labels (classes, or tags) of the file
	// (DefaultMaxLabels when ≤ 0): the first label past it is refused as
	// it is read, before the rows after it.
	MaxLabels int
}

// InputError is a problem with a data file; Line is 1-based (0: the file as
// a whole).
type InputError struct {
	File string
	Line int
	Err  error
}

func (e *InputError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("labelled: %s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("labelled: %s: %v", e.File, e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

// ErrEmpty is wrapped by the error for a file that holds no examples.
var ErrEmpty = errors.New("no examples")

// ReadFile reads a data file.
func ReadFile(path string, opts ReadOptions) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("labelled: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, &InputError{File: path, Err: errors.New("is a folder, not a data file")}
	}
	if opts.Format == "" {
		if opts.Format, err = DetectFormat(path); err != nil {
			return nil, err
		}
	}
	return Read(f, path, opts)
}

// Read reads examples from r; name is the file name used in errors. Lines
// are read through one bounded reader (see ReadOptions.MaxLineBytes) that
// refuses invalid UTF-8 and drops a leading byte-order mark; every error is
// an *InputError naming the file and, where it has one, the line.
func Read(r io.Reader, name string, opts ReadOptions) (*Dataset, error) {
	if opts.Problem == "" {
		opts.Problem = SingleLabel
	}
	if _, err := ParseProblem(string(opts.Problem)); err != nil {
		return nil, err
	}
	def := DefaultColumns(opts.Problem)
	if opts.Columns.Text == "" {
		opts.Columns.Text = def.Text
	}
	if opts.Columns.Label == "" {
		opts.Columns.Label = def.Label
	}
	if opts.LabelSep == "" {
		opts.LabelSep = ","
	}
	if opts.MaxLabels <= 0 {
		opts.MaxLabels = DefaultMaxLabels
	}
	lr := lines.NewReader(r, name, opts.MaxLineBytes)
	ds := &Dataset{File: name}
	labels := labelSet{seen: map[string]struct{}{}, max: opts.MaxLabels}
	keep := func(ex Example) error {
		if err := labels.add(&ex); err != nil {
			return err
		}
		ds.Examples = append(ds.Examples, ex)
		return nil
	}
	var err error
	headed := false // a CSV or TSV header was read
	switch opts.Format {
	case JSONL:
		err = readJSONL(lr, keep, &opts)
	case CSV, TSV:
		headed, err = readTable(lr, keep, &opts)
	default:
		return nil, fmt.Errorf("labelled: %s: unknown format %q", name, opts.Format)
	}
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			ie.File = name
			return nil, ie
		}
		return nil, lineError(err, name)
	}
	if len(ds.Examples) == 0 {
		what := "the file is empty"
		if headed {
			what = "the file has a header but no rows"
		}
		return nil, &InputError{File: name, Err: fmt.Errorf("%w: %s", ErrEmpty, what)}
	}
	return ds, nil
}

// lineError returns err as an *InputError of the file name, with its line
// when the line reader refused one.
func lineError(err error, name string) *InputError {
	var le *lines.Error
	if errors.As(err, &le) {
		return &InputError{File: le.File, Line: le.Line, Err: le.Err}
	}
	return &InputError{File: name, Err: err}
}

// labelSet counts the distinct labels of a file, up to max.
type labelSet struct {
	seen map[string]struct{}
	max  int
}

// add counts the labels of ex, refusing the first one past the limit.
func (s *labelSet) add(ex *Example) error {
	if !ex.HasLabel {
		return nil
	}
	labels := ex.Labels
	switch {
	case ex.Tags != nil:
		labels = ex.Tags
	case ex.Labels == nil && ex.Label != "":
		labels = []string{ex.Label}
	}
	for _, l := range labels {
		if _, ok := s.seen[l]; ok {
			continue
		}
		if len(s.seen) == s.max {
			return &InputError{Line: ex.Line, Err: fmt.Errorf("label %q is one more than the %d distinct labels a file may hold (the most num_labels a model may have)", l, s.max)}
		}
		s.seen[l] = struct{}{}
	}
	return nil
}

// csvSource hands encoding/csv the physical lines of a lines.Reader, each
// with a "\n", so that a CSV file's lines are bounded and checked as every
// other file's are.
type csvSource struct {
	lr      *lines.Reader
	pending []byte
}

func (c *csvSource) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		b, err := c.lr.Next()
		if err != nil {
			return 0, err
		}
		c.pending = append(append(c.pending[:0], b...), '\n')
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func readJSONL(lr *lines.Reader, keep func(Example) error, opts *ReadOptions) error {
	for {
		b, err := lr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		line := lr.Line()
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		var rec map[string]json.RawMessage
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&rec); err != nil || rec == nil {
			if err == nil {
				err = errors.New("null")
			}
			return &InputError{Line: line, Err: fmt.Errorf("not a JSON object: %v", err)}
		}
		if d.More() {
			return &InputError{Line: line, Err: errors.New("more than one JSON value on the line")}
		}
		ex, err := jsonExample(rec, opts)
		if err != nil {
			return &InputError{Line: line, Err: err}
		}
		ex.Line = line
		if err := keep(ex); err != nil {
			return err
		}
	}
}

func keysOf(rec map[string]json.RawMessage) string {
	ks := make([]string, 0, len(rec))
	for k := range rec {
		ks = append(ks, strconv.Quote(k))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// jsonKind names the JSON type of a raw value.
func jsonKind(raw json.RawMessage) string {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 {
		return "empty"
	}
	switch s[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func jsonString(rec map[string]json.RawMessage, key, what string) (string, error) {
	raw, ok := rec[key]
	if !ok {
		return "", fmt.Errorf("no key %q for the %s (keys: %s)", key, what, keysOf(rec))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("key %q (the %s) is %s, want a string", key, what, jsonKind(raw))
	}
	return s, nil
}

// jsonScalar reads a label value: a string, a number (kept as written) or a boolean.
func jsonScalar(raw json.RawMessage, key string) (string, error) {
	s := bytes.TrimSpace(raw)
	switch jsonKind(s) {
	case "a string":
		var v string
		if err := json.Unmarshal(s, &v); err != nil {
			return "", fmt.Errorf("key %q (the label): %v", key, err)
		}
		return v, nil
	case "a number", "a boolean":
		return string(s), nil
	}
	return "", fmt.Errorf("key %q (the label) is %s, want a string, number or boolean", key, jsonKind(s))
}

// jsonList reads an array of scalars, or a string split by sep (words:
// split on white space when sep is "").
func jsonList(raw json.RawMessage, key, what, sep string) ([]string, error) {
	s := bytes.TrimSpace(raw)
	switch jsonKind(s) {
	case "an array":
		var items []json.RawMessage
		if err := json.Unmarshal(s, &items); err != nil {
			return nil, err
		}
		out := make([]string, len(items))
		for i, it := range items {
			v, err := jsonScalar(it, key)
			if err != nil {
				return nil, fmt.Errorf("%s[%d] (the %s) is %s, want a string or number", key, i, what, jsonKind(it))
			}
			out[i] = v
		}
		return out, nil
	case "a string":
		var v string
		json.Unmarshal(s, &v)
		return splitList(v, sep), nil
	}
	return nil, fmt.Errorf("key %q (the %s) is %s, want an array of strings", key, what, jsonKind(s))
}

func splitList(s, sep string) []string {
	if sep == "" {
		return strings.Fields(s)
	}
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func jsonExample(rec map[string]json.RawMessage, opts *ReadOptions) (Example, error) {
	var ex Example
	c := opts.Columns
	var err error
	if opts.Problem == TokenTags {
		raw, ok := rec[c.Text]
		if !ok {
			return ex, fmt.Errorf("no key %q for the words (keys: %s)", c.Text, keysOf(rec))
		}
		if ex.Words, err = jsonList(raw, c.Text, "words", ""); err != nil {
			return ex, err
		}
		ex.Text = strings.Join(ex.Words, " ")
	} else if ex.Text, err = jsonString(rec, c.Text, "text"); err != nil {
		return ex, err
	}
	if c.Pair != "" {
		p, err := jsonString(rec, c.Pair, "second text")
		if err != nil {
			return ex, err
		}
		ex.TextPair = &p
	}
	raw, ok := rec[c.Label]
	if !ok || jsonKind(raw) == "null" {
		if opts.Unlabelled {
			return ex, nil
		}
		if ok {
			return ex, fmt.Errorf("key %q (the label) is null", c.Label)
		}
		return ex, fmt.Errorf("no key %q for the label (keys: %s)", c.Label, keysOf(rec))
	}
	switch opts.Problem {
	case SingleLabel:
		ex.Label, err = jsonScalar(raw, c.Label)
	case MultiLabel:
		ex.Labels, err = jsonList(raw, c.Label, "labels", opts.LabelSep)
	case Regression:
		var s string
		if s, err = jsonScalar(raw, c.Label); err == nil {
			ex.Value, err = parseValue(s, c.Label)
		}
	case TokenTags:
		ex.Tags, err = jsonList(raw, c.Label, "tags", "")
	}
	if err != nil {
		return ex, err
	}
	ex.HasLabel = true
	return ex, checkExample(&ex, opts)
}

func parseValue(s, key string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("the value %q of %q is not a finite number", s, key)
	}
	return v, nil
}

// checkExample applies the checks common to every format.
func checkExample(ex *Example, opts *ReadOptions) error {
	switch opts.Problem {
	case SingleLabel:
		if strings.TrimSpace(ex.Label) == "" {
			return fmt.Errorf("the label in %q is empty", opts.Columns.Label)
		}
	case TokenTags:
		if len(ex.Words) == 0 {
			return fmt.Errorf("no words in %q", opts.Columns.Text)
		}
		if len(ex.Tags) != len(ex.Words) {
			return fmt.Errorf("%d words in %q but %d tags in %q", len(ex.Words), opts.Columns.Text, len(ex.Tags), opts.Columns.Label)
		}
	}
	return nil
}

// readTable reads the rows of a CSV or TSV table, one example a row, and
// hands each to keep; headed says that a header row was read.
func readTable(lr *lines.Reader, keep func(Example) error, opts *ReadOptions) (headed bool, err error) {
	next := tableRows(lr, opts.Format)
	cols, ok, err := tableColumns(next, opts)
	if err != nil || !ok {
		return false, err
	}
	headed = !opts.NoHeader
	for {
		rec, line, err := next()
		if err == io.EOF {
			return headed, nil
		}
		if err != nil {
			return headed, err
		}
		ex, err := tableExample(rec, line, cols, opts)
		if err != nil {
			return headed, err
		}
		if err := keep(ex); err != nil {
			return headed, err
		}
	}
}

// tableRows returns the reader of a table's rows: each call gives the
// next row's fields and its line, io.EOF at the end. CSV is quoted as RFC
// 4180 says; TSV is split at every tab, without quoting, blank lines
// skipped.
func tableRows(lr *lines.Reader, f Format) func() ([]string, int, error) {
	if f == CSV {
		cr := csv.NewReader(&csvSource{lr: lr})
		cr.FieldsPerRecord = -1
		cr.ReuseRecord = false
		return func() ([]string, int, error) {
			rec, err := cr.Read()
			if err != nil {
				var pe *csv.ParseError
				if errors.As(err, &pe) {
					return nil, 0, &InputError{Line: pe.StartLine, Err: pe.Err}
				}
				return nil, 0, err
			}
			line, _ := cr.FieldPos(0)
			return rec, line, nil
		}
	}
	return func() ([]string, int, error) {
		for {
			b, err := lr.Next()
			if err != nil {
				return nil, 0, err
			}
			if len(bytes.TrimSpace(b)) == 0 {
				continue
			}
			return strings.Split(string(b), "\t"), lr.Line(), nil
		}
	}
}

// tableCols are the indices of a table's columns (−1: the column is not
// read) and the header's number of fields (0 without a header).
type tableCols struct{ text, pair, label, width int }

// tableColumns reads the header (unless opts.NoHeader) and resolves the
// columns of opts.Columns: from the header's names, or parsed as 0-based
// indices when there is none (then checked against each row's width). ok
// is false for an empty file.
func tableColumns(next func() ([]string, int, error), opts *ReadOptions) (cols tableCols, ok bool, err error) {
	var header []string
	col := map[string]int{}
	if !opts.NoHeader {
		h, line, err := next()
		if err == io.EOF {
			return cols, false, nil
		}
		if err != nil {
			return cols, false, err
		}
		for i, name := range h {
			name = strings.TrimSpace(name)
			if _, dup := col[name]; dup {
				return cols, false, &InputError{Line: line, Err: fmt.Errorf("the header names column %q twice", name)}
			}
			col[name] = i
			header = append(header, name)
		}
	}
	index := func(name, what string, optional bool) (int, error) {
		if opts.NoHeader {
			i, err := strconv.Atoi(name)
			if err != nil || i < 0 {
				return 0, &InputError{Line: 1, Err: fmt.Errorf("without a header, columns are named by their 0-based index; %q (the %s) is not one", name, what)}
			}
			return i, nil
		}
		i, ok := col[name]
		if !ok {
			if optional {
				return -1, nil
			}
			return 0, &InputError{Line: 1, Err: fmt.Errorf("no column %q for the %s (columns: %s)", name, what, QuoteLabels(header))}
		}
		return i, nil
	}
	c := opts.Columns
	if header == nil && !opts.NoHeader {
		return cols, false, nil // empty file
	}
	cols = tableCols{pair: -1, width: len(header)}
	if cols.text, err = index(c.Text, "text", false); err != nil {
		return cols, false, err
	}
	if c.Pair != "" {
		if cols.pair, err = index(c.Pair, "second text", false); err != nil {
			return cols, false, err
		}
	}
	if cols.label, err = index(c.Label, "label", opts.Unlabelled); err != nil {
		return cols, false, err
	}
	return cols, true, nil
}

// tableExample makes the example of one row (its fields rec, read from
// line) of a table with columns cols.
func tableExample(rec []string, line int, cols tableCols, opts *ReadOptions) (Example, error) {
	width := len(rec)
	if cols.width > 0 && width != cols.width {
		return Example{}, &InputError{Line: line, Err: fmt.Errorf("the row has %d fields, the header %d", width, cols.width)}
	}
	for _, x := range []struct {
		i    int
		what string
	}{{cols.text, "text"}, {cols.pair, "second text"}, {cols.label, "label"}} {
		if x.i >= width && !(x.what == "label" && opts.Unlabelled) {
			return Example{}, &InputError{Line: line, Err: fmt.Errorf("no column %d for the %s: the row has %d fields", x.i, x.what, width)}
		}
	}
	c := opts.Columns
	ex := Example{Line: line}
	if opts.Problem == TokenTags {
		ex.Words = strings.Fields(rec[cols.text])
		ex.Text = strings.Join(ex.Words, " ")
	} else {
		ex.Text = rec[cols.text]
	}
	if cols.pair >= 0 {
		p := rec[cols.pair]
		ex.TextPair = &p
	}
	if li := cols.label; li >= 0 && li < width {
		v := rec[li]
		var err error
		switch opts.Problem {
		case SingleLabel:
			ex.Label = strings.TrimSpace(v)
		case MultiLabel:
			ex.Labels = splitList(v, opts.LabelSep)
		case Regression:
			if ex.Value, err = parseValue(v, c.Label); err != nil {
				return Example{}, &InputError{Line: line, Err: err}
			}
		case TokenTags:
			ex.Tags = strings.Fields(v)
		}
		ex.HasLabel = true
		if err := checkExample(&ex, opts); err != nil {
			return Example{}, &InputError{Line: line, Err: err}
		}
	} else if opts.Problem == TokenTags && len(ex.Words) == 0 {
		return Example{}, &InputError{Line: line, Err: fmt.Errorf("no words in %q", c.Text)}
	}
	return ex, nil
}

// QuoteLabels returns the names quoted (strconv.Quote) and joined by ", ":
// how messages list a label set.
func QuoteLabels(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}
