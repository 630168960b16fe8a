package train

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// writeFileAtomic writes b to path through a temporary file in the same
// folder: create, write, fsync, close, rename, fsync the folder. On error
// the temporary file is removed and path is untouched.
func writeFileAtomic(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("train: writing %s: %w", path, err)
	}
	if err = f.Chmod(0o644); err != nil { // CreateTemp makes 0600; run files are ordinary files
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("train: writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("train: writing %s: %w", path, err)
		}
	}()
	if failWrite != nil {
		if err := failWrite(path); err != nil {
			return err
		}
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := syncFile(f); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// copyFileAtomic copies src to dst, streaming, through a temporary file
// that is synced and renamed like writeFileAtomic's.
func copyFileAtomic(dst, src string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer in.Close()
	dir := filepath.Dir(dst)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(dst)+"-*")
	if err != nil {
		return fmt.Errorf("train: writing %s: %w", dst, err)
	}
	if err = f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("train: writing %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("train: writing %s: %w", dst, err)
		}
	}()
	if failWrite != nil {
		if err := failWrite(dst); err != nil {
			return err
		}
	}
	if _, err := io.Copy(f, in); err != nil {
		return err
	}
	if err := syncFile(f); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a folder so that renames inside it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := syncFile(d); err != nil {
		return fmt.Errorf("train: syncing folder %s: %w", dir, err)
	}
	return nil
}

// syncAndHash fsyncs the file at path and returns its SHA-256 in hex.
func syncAndHash(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	defer f.Close()
	if err := syncFile(f); err != nil {
		return "", fmt.Errorf("train: syncing %s: %w", path, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("train: reading %s: %w", path, err)
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
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
