package finetune

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/roformer-go/roformer/data/labelled"
)

// eachJSONLine calls row with each non-blank line of r (its 1-based
// number, the line without the surrounding space), refusing a line
// longer than maxLineBytes (labelled.DefaultMaxLineBytes when <= 0) with
// a *labelled.InputError naming name and the line. A UTF-8 byte-order
// mark at the very start of r (Windows Notepad writes one) is dropped, as
// data/labelled drops it, and counts in no line's length. The file
// streams: no more than one line is held at a time.
func eachJSONLine(r io.Reader, name string, maxLineBytes int, row func(line int, b []byte) error) error {
	if maxLineBytes <= 0 {
		maxLineBytes = labelled.DefaultMaxLineBytes
	}
	r, err := dropBOM(r)
	if err != nil {
		return fmt.Errorf("finetune: %s: %w", name, err)
	}
	// A Scanner's token limit is the larger of its maximum and its first
	// buffer's capacity, and it refuses a token that fills the maximum:
	// a buffer no larger than the limit and one byte of room hold lines of
	// exactly maxLineBytes, no longer.
	limit := maxLineBytes
	if limit < math.MaxInt {
		limit++
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, limit)), limit)
	line := 0
	tooLong := func() error {
		return &labelled.InputError{File: name, Line: line, Err: fmt.Errorf("the line has more than %d bytes", maxLineBytes)}
	}
	for sc.Scan() {
		line++
		if len(sc.Bytes()) > maxLineBytes {
			return tooLong()
		}
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if err := row(line, b); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		line++
		if errors.Is(err, bufio.ErrTooLong) {
			return tooLong()
		}
		return fmt.Errorf("finetune: %s: %w", name, err)
	}
	return nil
}

// utf8BOM is the UTF-8 encoding of U+FEFF, the byte-order mark.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// dropBOM returns r without a UTF-8 byte-order mark at its start: it reads
// up to 3 bytes and, when they are not the mark, puts them back in front.
func dropBOM(r io.Reader) (io.Reader, error) {
	var head [3]byte
	n, err := io.ReadFull(r, head[:])
	switch {
	case err == nil && bytes.Equal(head[:], utf8BOM):
		return r, nil
	case err != nil && err != io.EOF && err != io.ErrUnexpectedEOF:
		return nil, err
	}
	return io.MultiReader(bytes.NewReader(head[:n]), r), nil
}
