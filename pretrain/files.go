package pretrain

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/roformer-go/roformer/internal/atomicfile"
)

// failWrite, when set by a test, is called before each atomic file write
// with the destination path; a non-nil result fails the write as a full
// disk would.
var failWrite func(path string) error

// noSync, set by tests, skips fsync calls (they guard against power loss,
// which tests cannot observe, and are slow on a busy disk).
var noSync bool

// syncFile fsyncs f unless noSync.
func syncFile(f *os.File) error {
	if noSync {
		return nil
	}
	return f.Sync()
}

// fileOptions are the atomicfile options of this package's writes.
func fileOptions() atomicfile.Options { return atomicfile.Options{NoSync: noSync} }

// writeFileAtomic writes b to path with atomicfile: on error path is
// untouched and no temporary file remains.
func writeFileAtomic(path string, b []byte) error {
	return writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// copyFileAtomic copies src to dst, streaming, like writeFileAtomic.
func copyFileAtomic(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	defer in.Close()
	return writeAtomic(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// writeAtomic writes path through fill with atomicfile.Write, after
// failWrite.
func writeAtomic(path string, fill func(io.Writer) error) error {
	if failWrite != nil {
		if err := failWrite(path); err != nil {
			return fmt.Errorf("pretrain: writing %s: %w", path, err)
		}
	}
	if err := fileOptions().Write(path, fill); err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	return nil
}

// hashFile returns the SHA-256 of the file at path in hex.
func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}
