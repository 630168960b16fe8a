// Package atomicfile writes files and folders so that a reader, or a
// program started after a crash or a power loss, finds either the old
// content or the new one, never a part of it.
//
// A file is written into a temporary file in the same folder, which is
// synced to the disk, closed and renamed over the path; then the folder is
// synced so that the rename itself is on the disk. A folder is assembled in
// a temporary folder beside its path (a Stage); publishing it syncs every
// file and folder in it, renames it into place and syncs the parent.
//
// Every temporary name starts with TempPrefix, so that a program can
// recognise, and remove, what a killed process left behind.
//
// Errors name the path being written and the step that failed. An error
// returned by a caller's fill function is returned as it is.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// TempPrefix starts the name of every temporary file and folder this
// package makes: TempPrefix+base+"-*" for a file written to base, and
// TempPrefix+base+".partial-*" for a Stage of base.
const TempPrefix = ".tmp-"

// bufSize is the size of the buffer in front of a file that Write writes.
const bufSize = 64 << 10

// Options adjust how files are written. The zero value writes files with
// mode 0o644 and syncs everything.
type Options struct {
	// Perm is the mode of a written file; zero means 0o644. It is set with
	// chmod, so the umask does not reduce it.
	Perm fs.FileMode

	// NoSync skips every fsync. The writes stay atomic for other processes
	// but may be lost, or appear out of order, after a power loss. It is
	// meant for tests, where syncing costs time and guards against nothing
	// they can observe.
	NoSync bool
}

// WriteFile writes data to path atomically with the zero Options: see
// Options.WriteFile.
func WriteFile(path string, data []byte) error { return Options{}.WriteFile(path, data) }

// Write writes what fill writes to path atomically with the zero Options:
// see Options.Write.
func Write(path string, fill func(w io.Writer) error) error { return Options{}.Write(path, fill) }

// NewStage makes a Stage for target with the zero Options: see
// Options.NewStage.
func NewStage(target string) (*Stage, error) { return Options{}.NewStage(target) }

// WriteFile writes data to path atomically, as Write does.
func (o Options) WriteFile(path string, data []byte) error {
	return o.Write(path, func(w io.Writer) error {
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	})
}

// Write writes path with what fill writes to w, a buffer in front of a new
// temporary file in the folder of path. When fill returns nil, the buffer
// is flushed, and the file, with mode o.Perm, is synced, closed and renamed
// over path; then the folder is synced.
//
// When fill or any step before the rename fails (or fill panics), the
// temporary file is removed and path keeps its old content, or stays
// absent. An error of fill is returned as it is; the others name path.
// When only the final sync of the folder fails, path holds the new content
// but the rename may not survive a power loss, and the error says so.
func (o Options) Write(path string, fill func(w io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPrefix+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close() // a second Close only reports that the file was closed
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(o.perm()); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, bufSize)
	if err := fill(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := o.sync(f); err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	renamed = true
	if err := o.syncDir(dir); err != nil {
		return fmt.Errorf("%s was written but syncing its folder failed: %w", path, err)
	}
	return nil
}

// A Stage is a temporary folder beside a target path, to be filled and
// then published in one rename, so that the target is either absent (or
// as it was) or complete.
type Stage struct {
	// Dir is the temporary folder to fill.
	Dir string

	target    string
	o         Options
	published bool
}

// NewStage makes an empty temporary folder with mode 0o755 beside target,
// whose parent folder must exist. Nothing is done to target until Publish.
func (o Options) NewStage(target string) (*Stage, error) {
	target = filepath.Clean(target)
	dir, err := os.MkdirTemp(filepath.Dir(target), TempPrefix+filepath.Base(target)+".partial-")
	if err != nil {
		return nil, fmt.Errorf("staging %s: %w", target, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // MkdirTemp makes 0700; the result is an ordinary folder
		os.Remove(dir)
		return nil, fmt.Errorf("staging %s: %w", target, err)
	}
	return &Stage{Dir: dir, target: target, o: o}, nil
}

// Publish syncs every file and folder under s.Dir, renames s.Dir to the
// target and syncs the target's parent folder.
//
// An empty folder at the target is replaced. Any other target (a file, a
// link, a folder with something in it) is left as it is, and Publish
// returns an error that matches fs.ErrExist. When Publish fails before the
// rename, the target is unchanged and the stage stays for Discard. When
// only the final sync of the parent fails, the target is complete but the
// rename may not survive a power loss, and the error says so.
func (s *Stage) Publish() error {
	if s.published {
		return fmt.Errorf("publishing %s: published already", s.target)
	}
	if err := s.o.syncTree(s.Dir); err != nil {
		return fmt.Errorf("publishing %s: %w", s.target, err)
	}
	if err := removeEmptyDir(s.target); err != nil {
		return fmt.Errorf("publishing %s: %w", s.target, err)
	}
	if err := os.Rename(s.Dir, s.target); err != nil {
		return fmt.Errorf("publishing %s: %w", s.target, err)
	}
	s.published = true
	if err := s.o.syncDir(filepath.Dir(s.target)); err != nil {
		return fmt.Errorf("%s was published but syncing its folder failed: %w", s.target, err)
	}
	return nil
}

// Discard removes the stage and everything in it, unless it was
// published. It may be called more than once, and after Publish, so that
// it can be deferred right after NewStage.
func (s *Stage) Discard() error {
	if s.published {
		return nil
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		return fmt.Errorf("discarding the stage of %s: %w", s.target, err)
	}
	return nil
}

// removeEmptyDir removes path if it is an empty folder, does nothing if it
// does not exist, and otherwise returns an error matching fs.ErrExist.
func removeEmptyDir(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		err := os.Remove(path)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if ents, rerr := os.ReadDir(path); rerr != nil || len(ents) == 0 {
			return err // not because it holds something
		}
	}
	return fmt.Errorf("%w and is not an empty folder", fs.ErrExist)
}

func (o Options) perm() fs.FileMode {
	if o.Perm == 0 {
		return 0o644
	}
	return o.Perm
}

// sync fsyncs f unless o.NoSync.
func (o Options) sync(f *os.File) error {
	if o.NoSync {
		return nil
	}
	return f.Sync()
}

// syncDir fsyncs the folder dir, so that renames in it reach the disk.
func (o Options) syncDir(dir string) error {
	if o.NoSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// syncTree fsyncs every regular file and folder under root, root included.
func (o Options) syncTree(root string) error {
	if o.NoSync {
		return nil
	}
	return filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && !e.Type().IsRegular() {
			return nil // a link or a device: its entry is synced with its folder
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("syncing %s: %w", path, err)
		}
		return nil
	})
}
