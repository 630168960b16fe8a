// Package boundedfile reads a small file of a model folder (config.json, a
// shard index, vocab.txt, tokenizer.json, bpe.json) within a size limit:
// the one bounded read behind the loaders, so that a file's size, not what
// it claims, bounds the memory it takes.
package boundedfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// TooLargeError is a file over its limit. Size is its size as stat gave it,
// or -1 when it grew past the limit while it was read.
type TooLargeError struct {
	Path        string
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("%s: file holds more than the %d-byte limit", e.Path, e.Limit)
	}
	return fmt.Sprintf("%s: file is %d bytes, more than the %d-byte limit", e.Path, e.Size, e.Limit)
}

// Read returns the content of the file at path. A file whose size is over
// limit is refused before anything is read, and at most limit+1 bytes are
// read in any case (a file that grows), so the allocation is at most its
// size plus bytes.MinRead. A file over the limit is a *TooLargeError; the
// errors of opening and reading are returned as they are, without a
// package prefix (callers add theirs).
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(0)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	if size > limit {
		return nil, &TooLargeError{Path: path, Size: size, Limit: limit}
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead)) // ReadFrom grows a buffer with less room than MinRead
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, &TooLargeError{Path: path, Size: -1, Limit: limit}
	}
	return buf.Bytes(), nil
}

// ReadConfig is Read for a model's config.json, both models' LoadConfig:
// a file over limit (their MaxConfigBytes) is refused with an error that
// says which limit it is.
func ReadConfig(path string, limit int64) ([]byte, error) {
	data, err := Read(path, limit)
	var big *TooLargeError
	if errors.As(err, &big) {
		return nil, fmt.Errorf("%s is larger than %d bytes, the limit for a config.json (MaxConfigBytes)", path, limit)
	}
	return data, err
}
