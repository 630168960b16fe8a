package lines

import (
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// read returns the lines of s through a Reader with the limit max, and
// the error that ended them (nil at io.EOF).
func read(s string, max int) ([]string, error) {
	var out []string
	err := Each(strings.NewReader(s), "f.txt", max, func(line int, b []byte) error {
		if line != len(out)+1 {
			return errors.New("lines out of order")
		}
		out = append(out, string(b))
		return nil
	})
	return out, err
}

func TestReader(t *testing.T) {
	for _, c := range []struct {
		name, in string
		max      int
		want     []string
		err      string // in the error; "" for none
	}{
		{"plain", "a\nbb\n", 0, []string{"a", "bb"}, ""},
		{"no final end of line", "a\nbb", 0, []string{"a", "bb"}, ""},
		{"crlf", "a\r\nbb\r\n", 0, []string{"a", "bb"}, ""},
		{"blank lines kept", "\n\na\n", 0, []string{"", "", "a"}, ""},
		{"empty", "", 0, nil, ""},
		{"bom dropped", "\uFEFFa\nb\n", 0, []string{"a", "b"}, ""},
		{"bom only at the start", "a\n\uFEFFb\n", 0, []string{"a", "\uFEFFb"}, ""},
		{"exactly the limit", "abcd\nabcd", 4, []string{"abcd", "abcd"}, ""},
		{"exactly the limit, crlf", "abcd\r\nab\r\n", 4, []string{"abcd", "ab"}, ""},
		{"a byte over", "ab\nabcde\n", 4, []string{"ab"}, "f.txt:2: the line has more than 4 bytes (the limit; raise it with --max-line-bytes)"},
		{"a byte over, crlf", "abcde\r\n", 4, nil, "f.txt:1: the line has more than 4 bytes"},
		{"a byte over at the end", "abcde", 4, nil, "f.txt:1: the line has more than 4 bytes"},
		{"over a buffer", strings.Repeat("x", 200<<10) + "\n", 100 << 10, nil, "f.txt:1: the line has more than 102400 bytes"},
		{"within a large limit", "a\n" + strings.Repeat("x", 200<<10) + "\nb", 300 << 10, []string{"a", strings.Repeat("x", 200<<10), "b"}, ""},
		{"the largest limit", "a\nbb", math.MaxInt, []string{"a", "bb"}, ""},
		{"invalid utf-8", "ok\nok\nok\nab\xffcd\n", 0, []string{"ok", "ok", "ok"}, "f.txt:4: the line is not valid UTF-8 (at byte 3)"},
		{"a cut rune", "\xe4\xb8\n", 0, nil, "f.txt:1: the line is not valid UTF-8 (at byte 1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := read(c.in, c.max)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
				t.Errorf("lines %q, want %q", got, c.want)
			}
		})
	}
}

// The errors say what they are to errors.Is and errors.As.
func TestErrors(t *testing.T) {
	_, err := read("abcdef\n", 3)
	var le *Error
	var tl *TooLongError
	if !errors.As(err, &le) || le.File != "f.txt" || le.Line != 1 || !errors.As(err, &tl) || tl.Max != 3 {
		t.Errorf("%#v: want an *Error of line 1 wrapping a *TooLongError of 3", err)
	}
	if _, err := read("a\n\xff\n", 0); !errors.Is(err, ErrNotUTF8) || !errors.As(err, &le) || le.Line != 2 {
		t.Errorf("%v: want line 2 wrapping ErrNotUTF8", err)
	}
	lr := NewReader(strings.NewReader("abcdef\nok\n"), "f", 3)
	_, first := lr.Next()
	if _, again := lr.Next(); again != first {
		t.Errorf("after an error, Next gave %v, want the error again (%v)", again, first)
	}
}

// Offset is where the next line starts, the byte-order mark and the ends
// of line counted.
func TestOffset(t *testing.T) {
	in := "\uFEFFa\r\nbb\nccc"
	lr := NewReader(strings.NewReader(in), "f", 0)
	var starts []int64
	for {
		start := lr.Offset()
		if _, err := lr.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, start)
	}
	if want := []int64{0, 6, 9}; len(starts) != 3 || starts[1] != want[1] || starts[2] != want[2] || lr.Offset() != int64(len(in)) {
		t.Errorf("line starts %v, end %d; want %v, %d", starts, lr.Offset(), want, len(in))
	}
}

// endless is a line that never ends.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.n += int64(len(p))
	return len(p), nil
}

// A line over the limit is refused once the limit is passed, whatever
// follows: the reader reads the limit and a buffer of it, and allocates
// about as much (a reader that kept the line would never return here).
func TestTooLongStops(t *testing.T) {
	const max = 1 << 20
	src := &endless{}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := NewReader(src, "endless", max).Next()
	runtime.ReadMemStats(&after)
	var tl *TooLongError
	if !errors.As(err, &tl) {
		t.Fatalf("error %v, want a *TooLongError", err)
	}
	if src.n > max+2*64<<10 {
		t.Errorf("read %d bytes of the line, want at most the limit %d and a buffer", src.n, max)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 4*max {
		t.Errorf("allocated %d bytes for a limit of %d", a, max)
	}
}

func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	other := filepath.Join(dir, "other.jsonl")
	for _, p := range []string{in, other} {
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link.jsonl")
	hard := filepath.Join(dir, "hard.jsonl")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, out string
		refused   bool
	}{
		{"the same path", in, true},
		{"the same path, spelt otherwise", filepath.Join(dir, ".", "in.jsonl"), true},
		{"a symlink to it", link, true},
		{"a hard link to it", hard, true},
		{"another file", other, false},
		{"a new file", filepath.Join(dir, "new.jsonl"), false},
	} {
		err := CheckOutput(c.out, other+".missing", in)
		if (err != nil) != c.refused {
			t.Errorf("%s: %v; want refused %v", c.name, err, c.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "replace the input") {
			t.Errorf("%s: %v does not say why", c.name, err)
		}
	}
}
