// Package boundedfile reads a small file of a model folder (config.json, a
// shard index, vocab.txt, tokenizer.json, bpe.json) within a size limit:
// the one bounded read behind the loaders, so that a file's size, not what
// it claims, bounds the memory it takes.
//
// It is also the one opening of every file of a model folder, the weights
// too (Open, Stat): a file that is not a regular file after symlinks are
// followed (a named pipe, whose open waits for a writer that may never
// come; a device such as /dev/zero, which never ends; a directory; a
// socket) is refused, naming it, before it is opened.
package boundedfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
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

// NotRegularError is a file that is not a regular file after symlinks are
// followed; Mode is its type as stat gave it.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: not a regular file: %s", e.Path, typeName(e.Mode))
}

// typeName names the type of a file that is not a regular one.
func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "directory"
	}
	return "irregular file (" + m.Type().String() + ")"
}

// Stat is os.Stat (symlinks followed: a Hugging Face cache's snapshot files
// are links into its blobs/ folder) refusing, with a *NotRegularError, a
// path that is not a regular file. A missing file's error wraps
// fs.ErrNotExist, as os.Stat's does.
func Stat(path string) (fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return st, nil
}

// Open opens the file at path for reading, with its stat, when it is a
// regular file after symlinks are followed; anything else is refused with
// a *NotRegularError before it is opened (Stat). The open itself cannot
// wait either: it is made non-blocking where the system has that flag (a
// named pipe opened so returns at once), and the opened file is checked
// again, so that a file swapped for a pipe or a device between the stat
// and the open is refused too. (On a regular file the flag changes
// nothing: its reads never wait for a writer.) The errors of stat and
// open are returned as they are, without a package prefix.
func Open(path string) (*os.File, fs.FileInfo, error) {
	if _, err := Stat(path); err != nil {
		return nil, nil, err
	}
	if testHookBeforeOpen != nil {
		testHookBeforeOpen(path)
	}
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = &NotRegularError{Path: path, Mode: st.Mode()}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// testHookBeforeOpen, set by a test, runs between Open's stat and its open
// (to swap the file for a named pipe there).
var testHookBeforeOpen func(path string)

// Read returns the content of the file at path. A file that is not a
// regular file is refused as Open says, and one whose size is over limit
// before anything is read; at most limit+1 bytes are read in any case (a
// file that grows), so the allocation is at most its size plus
// bytes.MinRead. A file over the limit is a *TooLargeError; the errors of
// opening and reading are returned as they are, without a package prefix
// (callers add theirs).
func Read(path string, limit int64) ([]byte, error) {
	f, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := st.Size()
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
