package batchembed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

var words = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "whale", "ship", "sea", "a", ".", "##s", "good", "bad"}

func tinyModel(t *testing.T) (*roformer.Model, *tokenizer.Tokenizer) {
	t.Helper()
	return testmodel.Tiny{Words: words, Seed: 5, MaxPositions: 32, Scale: 8}.Build(t)
}

// writeInput writes n lines of varied lengths and forms (objects with and
// without ids and pairs, bare strings) and returns the file and the inputs.
func writeInput(t *testing.T, dir string, n int) (string, []pipeline.EmbedInput) {
	t.Helper()
	w := strings.Fields("the whale ship sea a good bad .")
	var b strings.Builder
	var ins []pipeline.EmbedInput
	for i := range n {
		var s strings.Builder
		for k := range 1 + (i*5)%11 {
			s.WriteString(w[(i+k)%len(w)] + " ")
		}
		text := s.String()
		in := pipeline.EmbedInput{Text: text}
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "{\"text\": %q, \"id\": \"doc-%d\", \"extra\": [1, 2]}\n", text, i)
		case 1:
			fmt.Fprintf(&b, "%q\r\n", text)
		case 2:
			pair := w[i%len(w)]
			in.TextPair = &pair
			fmt.Fprintf(&b, "{\"id\": %d, \"text_pair\": %q, \"text\": %q}\n", i, pair, text)
		case 3:
			fmt.Fprintf(&b, "{\"text\": %q, \"text_pair\": null}\n", text)
		}
		ins = append(ins, in)
	}
	path := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(path, []byte(strings.TrimSuffix(b.String(), "\n")), 0o644); err != nil { // no final newline
		t.Fatal(err)
	}
	return path, ins
}

type outLine struct {
	Index     int             `json:"index"`
	ID        json.RawMessage `json:"id"`
	Embedding []float32       `json:"embedding"`
}

func readOutput(t *testing.T, path string) []outLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []outLine
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var l outLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("output line %d: %v", i+1, err)
		}
		out = append(out, l)
	}
	return out
}

// One process: the output has each line's index and id and the vector
// pipeline.Embed gives for it; with one part, the same bits.
func TestRunMatchesPipeline(t *testing.T) {
	m, tok := tinyModel(t)
	dir := t.TempDir()
	in, inputs := writeInput(t, dir, 37)
	for _, window := range []int{37, 5} {
		t.Run(fmt.Sprintf("window %d", window), func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("out-%d.jsonl", window))
			eo := pipeline.EmbedOptions{Normalize: true, MaxBatch: 8}
			st, err := Run(context.Background(), m, tok, in, out, Options{EmbedOptions: eo, Window: window, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			if st.Lines != 37 || st.Embedded.Rows != 37 || st.Parts != (37+window-1)/window || st.Resumed != 0 {
				t.Errorf("stats %+v", st)
			}
			want, _, err := pipeline.Embed(context.Background(), m, tok, inputs, eo)
			if err != nil {
				t.Fatal(err)
			}
			got := readOutput(t, out)
			if len(got) != len(inputs) {
				t.Fatalf("%d output lines, want %d", len(got), len(inputs))
			}
			for i, l := range got {
				wantID := ""
				switch i % 4 {
				case 0:
					wantID = fmt.Sprintf(`"doc-%d"`, i)
				case 2:
					wantID = fmt.Sprint(i)
				}
				if l.Index != i || string(l.ID) != wantID {
					t.Errorf("line %d: index %d, id %s; want %d, %q", i, l.Index, l.ID, i, wantID)
				}
				tol := 1e-6
				if window == len(inputs) {
					tol = 0 // the same batches
				}
				if d := maxDiff(l.Embedding, want[i]); d > tol {
					t.Errorf("line %d: off by %g from pipeline.Embed", i, d)
				}
			}
			if _, err := os.Stat(out + ".parts"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the work folder is left: %v", err)
			}
		})
	}
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return 1e9
	}
	d := 0.0
	for i := range a {
		d = max(d, float64(max(a[i]-b[i], b[i]-a[i])))
	}
	return d
}

// A run stopped after its second part, then run again, ends with the bytes
// of a run that never stopped; so does one whose folder holds a temporary
// file of a part cut short by a kill.
func TestResume(t *testing.T) {
	m, tok := tinyModel(t)
	dir := t.TempDir()
	in, _ := writeInput(t, dir, 30)
	o := Options{Window: 4, NoSync: true}
	whole := filepath.Join(dir, "whole.jsonl")
	if _, err := Run(context.Background(), m, tok, in, whole, o); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(whole)

	out := filepath.Join(dir, "out.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	stop := o
	stop.Progress = func(p Progress) {
		if p.Done == 2 {
			cancel()
		}
	}
	_, err := Run(ctx, m, tok, in, out, stop)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: error %v, want context.Canceled", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stopped run left an output: %v", err)
	}
	parts, _ := filepath.Glob(filepath.Join(out+".parts", "part-*.jsonl"))
	if len(parts) != 2 {
		t.Fatalf("the stopped run left %d parts, want 2", len(parts))
	}
	var pg map[string]any
	if b, err := os.ReadFile(filepath.Join(out+".parts", "progress-0.json")); err != nil || json.Unmarshal(b, &pg) != nil || pg["done"] != 2.0 || pg["parts"] != 8.0 {
		t.Errorf("progress record %v (%v), want 2 of 8 parts done", pg, err)
	}
	// A kill during the third part's write leaves a temporary file.
	tmp := filepath.Join(out+".parts", atomicfile.TempPrefix+"part-000002.jsonl-123")
	if err := os.WriteFile(tmp, []byte(`{"index":8,"embedding":[0.`), 0o644); err != nil {
		t.Fatal(err)
	}
	var done []int
	o.Progress = func(p Progress) { done = append(done, p.Done) }
	st, err := Run(context.Background(), m, tok, in, out, o)
	if err != nil {
		t.Fatal(err)
	}
	if st.Resumed != 2 || st.Embedded.Rows != 30-8 || len(done) != 6 || done[0] != 3 {
		t.Errorf("resumed run: stats %+v, progress %v; want 2 parts resumed, 22 lines embedded, progress from 3", st, done)
	}
	got, _ := os.ReadFile(out)
	if !bytes.Equal(got, want) {
		t.Errorf("resumed output differs from the uninterrupted one (%d and %d bytes)", len(got), len(want))
	}
	if _, err := os.Stat(out + ".parts"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the work folder is left: %v", err)
	}
}

// A folder made for another run is refused, naming what differs.
func TestResumeOtherRun(t *testing.T) {
	m, tok := tinyModel(t)
	dir := t.TempDir()
	in, _ := writeInput(t, dir, 10)
	out := filepath.Join(dir, "out.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	o := Options{Window: 4, NoSync: true, Progress: func(Progress) { cancel() }}
	if _, err := Run(ctx, m, tok, in, out, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	o.Progress, o.Normalize = nil, true
	_, err := Run(context.Background(), m, tok, in, out, o)
	if err == nil || !strings.Contains(err.Error(), "normalize false, now true") || !strings.Contains(err.Error(), "remove "+out+".parts") {
		t.Errorf("other options: error %v", err)
	}
	o.Normalize = false
	if err := os.WriteFile(in, []byte(`"the sea"`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), m, tok, in, out, o)
	if err == nil || !strings.Contains(err.Error(), "input_sha256") || !strings.Contains(err.Error(), "lines 10, now 1") {
		t.Errorf("other input: error %v", err)
	}
}

func TestBadInput(t *testing.T) {
	m, tok := tinyModel(t)
	for _, c := range []struct{ name, input, want string }{
		{"empty line", "\"the sea\"\n\n\"a ship\"\n", `in.jsonl:2: the line is empty`},
		{"not json", "\"the sea\"\nthe whale\n", `in.jsonl:2: want a JSON object`},
		{"broken object", "{\"text\": \"a\"\n", `in.jsonl:1: not a JSON object`},
		{"no text", "{\"txt\": \"a\"}\n", `in.jsonl:1: no "text"`},
		{"text number", "{\"text\": 3}\n", `in.jsonl:1: "text" is a number, want a string`},
		{"text null", "{\"text\": null}\n", `in.jsonl:1: "text" is null, want a string`},
		{"pair array", "{\"text\": \"a\", \"text_pair\": [\"b\"]}\n", `"text_pair" is an array`},
		{"id object", "\"a\"\n{\"text\": \"a\", \"id\": {}}\n", `in.jsonl:2: "id" is an object, want a string or a number`},
		{"too long", "\"a\"\n\"" + strings.Repeat("whale ", 40) + "\"\n", `in.jsonl:2: pipeline: the input has 42 tokens; the limit is 32`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.jsonl")
			if err := os.WriteFile(in, []byte(c.input), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out.jsonl")
			_, err := Run(context.Background(), m, tok, in, out, Options{NoSync: true})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("a failed check left %d files", len(ents)-1)
			}
		})
	}
	dir := t.TempDir()
	if _, err := Run(context.Background(), m, tok, filepath.Join(dir, "none.jsonl"), filepath.Join(dir, "out.jsonl"), Options{}); err == nil || !strings.Contains(err.Error(), "none.jsonl") {
		t.Errorf("missing input: error %v", err)
	}
}

// The line reader's bounds: a line that is not valid UTF-8 (encoding/json
// would embed U+FFFD in place of its bytes) and a line over
// Options.MaxLineBytes are refused naming the line, before anything is
// written.
func TestBadInputBounds(t *testing.T) {
	m, tok := tinyModel(t)
	for _, c := range []struct {
		name, input, want string
		max               int
	}{
		{"invalid utf-8", "\"the sea\"\n\"a ship\"\n\"the whale\"\n\"the s\xffa\"\n", `in.jsonl:4: the line is not valid UTF-8 (at byte 7)`, 0},
		{"over the limit", "\"the sea\"\n\"" + strings.Repeat("whale ", 20) + "\"\n", `in.jsonl:2: the line has more than 64 bytes (the limit; raise it with --max-line-bytes)`, 64},
		{"over the default", "\"the sea\"\n\"" + strings.Repeat("whale ", 200_000) + "\"\n", `in.jsonl:2: the line has more than 1048576 bytes`, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.jsonl")
			if err := os.WriteFile(in, []byte(c.input), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Run(context.Background(), m, tok, in, filepath.Join(dir, "out.jsonl"), Options{NoSync: true, MaxLineBytes: c.max})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("a failed check left %d files", len(ents)-1)
			}
		})
	}
}

// An output that is the input, by its path, a symlink or a hard link, is
// refused before anything is written: the input stays as it was.
func TestOutputIsInput(t *testing.T) {
	m, tok := tinyModel(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	content := []byte("\"the sea\"\n\"a ship\"\n")
	if err := os.WriteFile(in, content, 0o644); err != nil {
		t.Fatal(err)
	}
	link, hard := filepath.Join(dir, "link.jsonl"), filepath.Join(dir, "hard.jsonl")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{in, link, hard} {
		_, err := Run(context.Background(), m, tok, in, out, Options{NoSync: true})
		if err == nil || !strings.Contains(err.Error(), "replace the input") {
			t.Errorf("--output %s: error %v, want a refusal", filepath.Base(out), err)
		}
		if b, _ := os.ReadFile(in); !bytes.Equal(b, content) {
			t.Fatalf("--output %s: the input now holds %q", filepath.Base(out), b)
		}
		if _, err := os.Stat(out + ".parts"); err == nil {
			t.Errorf("--output %s: a work folder was made", filepath.Base(out))
		}
	}
}

func TestEmptyInput(t *testing.T) {
	m, tok := tinyModel(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(in, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := Run(context.Background(), m, tok, in, out, Options{NoSync: true}); err != nil || st.Lines != 0 {
		t.Fatalf("stats %+v, error %v", st, err)
	}
	if b, err := os.ReadFile(out); err != nil || len(b) != 0 {
		t.Errorf("output %q, %v; want an empty file", b, err)
	}
}

// chanGroup is an in-process group whose ranks are goroutines.
type chanGroup struct {
	rank int
	h    *hub
}

type hub struct{ gather, bcast []chan []byte }

func newGroup(n int) []Group {
	h := &hub{make([]chan []byte, n), make([]chan []byte, n)}
	gs := make([]Group, n)
	for r := range n {
		h.gather[r], h.bcast[r] = make(chan []byte, 1), make(chan []byte, 1)
		gs[r] = &chanGroup{r, h}
	}
	return gs
}

func (g *chanGroup) Rank() int { return g.rank }
func (g *chanGroup) Size() int { return len(g.h.gather) }

func (g *chanGroup) Gather(buf []byte, root int) ([][]byte, error) {
	if g.rank != root {
		g.h.gather[g.rank] <- append([]byte(nil), buf...)
		return nil, nil
	}
	all := make([][]byte, g.Size())
	for r := range all {
		if r == root {
			all[r] = buf
		} else {
			all[r] = <-g.h.gather[r]
		}
	}
	return all, nil
}

func (g *chanGroup) Bcast(buf []byte, root int) error {
	if g.rank == root {
		for r := range g.h.bcast {
			if r != root {
				g.h.bcast[r] <- append([]byte(nil), buf...)
			}
		}
		return nil
	}
	b := <-g.h.bcast[g.rank]
	if len(b) != len(buf) {
		return fmt.Errorf("bcast of %d bytes into %d", len(b), len(buf))
	}
	copy(buf, b)
	return nil
}

// runRanks runs Run on n ranks at once, each with its own copy of the
// model; rank r gets ctxs[r] (when given) and inputs[r] (when given).
func runRanks(t *testing.T, n int, in, out string, o Options, ctxs []context.Context, inputs []string) ([]Stats, []error) {
	t.Helper()
	gs := newGroup(n)
	sts, errs := make([]Stats, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		m, tok := tinyModel(t)
		ctx, input := context.Background(), in
		if ctxs != nil {
			ctx = ctxs[r]
		}
		if inputs != nil {
			input = inputs[r]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ro := o
			ro.Group = gs[r]
			sts[r], errs[r] = Run(ctx, m, tok, input, out, ro)
		}()
	}
	wg.Wait()
	return sts, errs
}

// Three ranks write the bytes of one process; a run interrupted with three
// ranks is finished by one; a failing rank fails the run on every rank.
func TestRanks(t *testing.T) {
	m, tok := tinyModel(t)
	dir := t.TempDir()
	in, _ := writeInput(t, dir, 26)
	o := Options{Window: 3, NoSync: true}
	one := filepath.Join(dir, "one.jsonl")
	if _, err := Run(context.Background(), m, tok, in, one, o); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(one)

	out := filepath.Join(dir, "three.jsonl")
	sts, errs := runRanks(t, 3, in, out, o, nil, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
		t.Errorf("three ranks' output differs from one process's")
	}
	if sts[0].Embedded.Rows != 26 || sts[0].Ranks != 3 || sts[1].Embedded.Rows != 9 || sts[2].Embedded.Rows != 8 {
		t.Errorf("stats of ranks 0, 1, 2: %+v, %+v, %+v; want 26 rows on rank 0 (all), 9 and 8 on ranks 1 and 2", sts[0], sts[1], sts[2])
	}

	// Rank 0 is interrupted before its first part; ranks 1 and 2 do
	// theirs. One process then does rank 0's parts only.
	out = filepath.Join(dir, "resumed.jsonl")
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	_, errs = runRanks(t, 3, in, out, o, []context.Context{stopped, context.Background(), context.Background()}, nil)
	if !errors.Is(errs[0], context.Canceled) || !errors.Is(errs[1], context.Canceled) || !errors.Is(errs[1], ErrOtherRank) || !errors.Is(errs[2], ErrOtherRank) {
		t.Errorf("rank 0 interrupted: errors %v", errs)
	}
	st, err := Run(context.Background(), m, tok, in, out, o)
	if err != nil {
		t.Fatal(err)
	}
	if st.Resumed != 6 || st.Embedded.Rows != 9 {
		t.Errorf("one process after three ranks: stats %+v, want 6 parts resumed and 9 lines embedded", st)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
		t.Errorf("output resumed with another number of ranks differs")
	}

	// Rank 1 cannot read its input.
	bad := filepath.Join(dir, "bad.jsonl")
	_, errs = runRanks(t, 3, in, bad, o, nil, []string{in, filepath.Join(dir, "none.jsonl"), in})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank 1: batchembed: open") ||
		!errors.Is(errs[1], os.ErrNotExist) || !errors.Is(errs[2], ErrOtherRank) || !strings.Contains(errs[2].Error(), "rank 1") {
		t.Errorf("rank 1 failing: errors %v", errs)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a failed run wrote its output")
	}
}

func TestParseLine(t *testing.T) {
	for _, c := range []struct {
		line, text string
		pair       *string
		id         string
	}{
		{`"call me ishmael"`, "call me ishmael", nil, ""},
		{` {"text": "a", "id": 1.5e3 } `, "a", nil, "1.5e3"},
		{`{"text": "a", "id": "x y", "text_pair": "b", "label": 3}`, "a", ptr("b"), `"x y"`},
		{`{"text": "", "id": null}`, "", nil, ""},
		{`{"id": -2, "text": "\u00e9"}`, "é", nil, "-2"},
	} {
		in, err := ParseLine([]byte(c.line))
		if err != nil {
			t.Errorf("%s: %v", c.line, err)
			continue
		}
		if in.Text != c.text || string(in.ID) != c.id || (in.TextPair == nil) != (c.pair == nil) || (c.pair != nil && *in.TextPair != *c.pair) {
			t.Errorf("%s: got %+v id %s", c.line, in, in.ID)
		}
	}
}

func ptr(s string) *string { return &s }

func TestDefaultWindow(t *testing.T) {
	for _, c := range []struct{ lines, want int }{{0, 256}, {1000, 256}, {4097, 257}, {6400, 400}, {16384, 1024}, {1 << 24, 1024}} {
		if got := DefaultWindow(c.lines); got != c.want {
			t.Errorf("DefaultWindow(%d) = %d, want %d", c.lines, got, c.want)
		}
	}
	m, tok := tinyModel(t)
	dir := t.TempDir()
	in, _ := writeInput(t, dir, 520) // no end of line after the last
	st, err := Run(context.Background(), m, tok, in, filepath.Join(dir, "out.jsonl"), Options{NoSync: true})
	if err != nil || st.Parts != 3 || st.Lines != 520 {
		t.Errorf("520 lines, default window: stats %+v, error %v; want 3 parts", st, err)
	}
}

// FuzzParseLine: any bytes give an input or an error, never a panic; an
// input's id is valid JSON, and a line that parses parses the same again
// with white space around it.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{`"a"`, `{"text": "a", "id": 3}`, `{"text": "a", "text_pair": null, "id": "x"}`, `{"text": 1}`, `[]`, ``, `{"id": {}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		in, err := ParseLine(line)
		if err != nil {
			return
		}
		if in.ID != nil && !json.Valid(in.ID) {
			t.Fatalf("%q: id %q is not JSON", line, in.ID)
		}
		again, err := ParseLine(append(append([]byte(" \t"), line...), "\r"...))
		if err != nil || again.Text != in.Text || string(again.ID) != string(in.ID) {
			t.Fatalf("%q: with white space: %+v, %v; want %+v", line, again, err, in)
		}
	})
}
