// Package lines is the one bounded line reader of the toolkit: every data
// file read a line at a time goes through it (labelled JSONL, CSV and TSV;
// contrastive pairs, SQuAD and multiple-choice rows; embed's and tokenize's
// input; BEIR's corpus, queries and qrels; vocab's corpus).
//
// A line is at most a limit of bytes (DefaultMaxBytes, 1 MiB, unless the
// caller gives another), its end of line ("\n" or "\r\n") not counted. A
// longer line is refused as soon as the limit is passed: the rest of it is
// never read, so a Reader holds at most the limit plus 2 bytes of a line
// and a 64 KiB buffer, whatever the file. A line that is not valid UTF-8 is
// refused: every format read through it is text. A UTF-8 byte-order mark
// at the very start is dropped. Every error of a line is an *Error naming
// the file and the 1-based line.
//
// CheckOutput refuses an output path that names an input file, for the
// verbs that read a file and write another.
package lines

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// DefaultMaxBytes is the longest line a reader takes when the caller gives
// no limit (a limit ≤ 0).
const DefaultMaxBytes = 1 << 20

// ErrNotUTF8 is wrapped by the error of a line that is not valid UTF-8.
var ErrNotUTF8 = errors.New("the line is not valid UTF-8")

// TooLongError is the error of a line longer than the limit Max.
type TooLongError struct{ Max int }

func (e *TooLongError) Error() string {
	return fmt.Sprintf("the line has more than %d bytes (the limit; raise it with --max-line-bytes)", e.Max)
}

// Error is a problem with line Line (1-based) of File: a *TooLongError,
// ErrNotUTF8 or the error of reading it.
type Error struct {
	File string
	Line int
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// Reader hands out the lines of a file one at a time.
type Reader struct {
	r       *bufio.Reader
	name    string
	max     int
	line    int   // lines handed out
	off     int64 // bytes of r consumed
	buf     []byte
	started bool
	err     error // the error that stopped the reader, returned again
}

// NewReader returns a Reader of r, whose errors name the file name; a
// line is at most maxBytes bytes (DefaultMaxBytes when maxBytes ≤ 0).
func NewReader(r io.Reader, name string, maxBytes int) *Reader {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), name: name, max: maxBytes}
}

// Next returns the next line without its end of line, or io.EOF after the
// last (a last line without an end of line counts). The slice is valid
// until the next call. After an error, every call returns it again.
func (l *Reader) Next() ([]byte, error) {
	if l.err != nil {
		return nil, l.err
	}
	if !l.started {
		l.started = true
		if b, err := l.r.Peek(3); err == nil && bytes.Equal(b, utf8BOM) {
			l.r.Discard(3)
			l.off += 3
		}
	}
	l.buf = l.buf[:0]
	l.line++
	for {
		frag, err := l.r.ReadSlice('\n')
		// The limit, and "\r\n" after it: a longer line is refused before
		// its bytes are kept.
		if len(l.buf)+len(frag)-2 > l.max { // l.max+2 would overflow for MaxInt
			return nil, l.fail(&TooLongError{Max: l.max})
		}
		l.off += int64(len(frag))
		if need := len(l.buf) + len(frag); need > cap(l.buf) {
			// Grow by doubling, but never past what a line may need.
			c := max(2*cap(l.buf), need)
			if c-2 > l.max {
				c = l.max + 2
			}
			nb := make([]byte, len(l.buf), c)
			copy(nb, l.buf)
			l.buf = nb
		}
		l.buf = append(l.buf, frag...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(l.buf) == 0:
			l.line--
			return nil, io.EOF
		case err != nil && err != io.EOF:
			return nil, l.fail(err)
		}
		b := bytes.TrimSuffix(l.buf, []byte("\n"))
		b = bytes.TrimSuffix(b, []byte("\r"))
		if len(b) > l.max {
			return nil, l.fail(&TooLongError{Max: l.max})
		}
		if !utf8.Valid(b) {
			return nil, l.fail(fmt.Errorf("%w (at byte %d)", ErrNotUTF8, firstInvalid(b)))
		}
		return b, nil
	}
}

// Line returns the number of the line Next returned last (1-based; 0
// before the first).
func (l *Reader) Line() int { return l.line }

// Offset returns the bytes of the file consumed so far: after Next, where
// the next line starts.
func (l *Reader) Offset() int64 { return l.off }

func (l *Reader) fail(err error) error {
	l.err = &Error{File: l.name, Line: l.line, Err: err}
	return l.err
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// firstInvalid returns the 1-based position of the first byte of b that
// does not start a valid UTF-8 sequence.
func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i + 1
		}
		i += n
	}
	return 0
}

// Each calls f with each line of r (its 1-based number and its bytes,
// valid during the call), through a Reader with the limit maxBytes, and
// returns the first error of reading or of f.
func Each(r io.Reader, name string, maxBytes int, f func(line int, b []byte) error) error {
	lr := NewReader(r, name, maxBytes)
	for {
		b, err := lr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(lr.Line(), b); err != nil {
			return err
		}
	}
}

// CheckOutput refuses an output path that names one of the input files:
// the same file as os.SameFile says, so through a symlink or a hard link
// too. A verb that wrote it would replace its input. An output that does
// not exist yet passes.
func CheckOutput(output string, inputs ...string) error {
	out, err := os.Stat(output)
	if err != nil {
		return nil // nothing there yet (or nothing we can see): nothing to lose
	}
	for _, in := range inputs {
		if st, err := os.Stat(in); err == nil && os.SameFile(out, st) {
			if output == in {
				return fmt.Errorf("the output %s is the input: writing it would replace the input; name another output", output)
			}
			return fmt.Errorf("the output %s is the input %s (the same file): writing it would replace the input; name another output", output, in)
		}
	}
	return nil
}
