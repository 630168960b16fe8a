package labelled

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/roformer-go/roformer/internal/lines"
)

// EachJSONLine calls row with each non-blank line of r (its 1-based
// number, the line without the surrounding space), through the toolkit's
// one line reader (internal/lines): a line longer than maxLineBytes
// (DefaultMaxLineBytes when <= 0) is refused as soon as the limit
// is passed, a line that is not valid UTF-8 is refused, and a UTF-8
// byte-order mark at the very start of r is dropped. Those errors are
// *InputError naming name and the line (the readers of the JSONL files of
// finetune and pretrain use it). The file streams: no more
// than one line is held at a time.
func EachJSONLine(r io.Reader, name string, maxLineBytes int, row func(line int, b []byte) error) error {
	err := lines.Each(r, name, maxLineBytes, func(line int, b []byte) error {
		if b = bytes.TrimSpace(b); len(b) == 0 {
			return nil
		}
		return row(line, b)
	})
	var le *lines.Error
	if errors.As(err, &le) {
		return &InputError{File: le.File, Line: le.Line, Err: le.Err}
	}
	if err != nil && !errors.As(err, new(*InputError)) {
		return fmt.Errorf("labelled: %s: %w", name, err)
	}
	return err
}
