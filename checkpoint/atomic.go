package checkpoint

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// writeAtomic writes path through fill: a temporary file in the same
// directory receives the bytes, is synced and closed, then renamed over path,
// and the directory is synced so the rename itself is durable. On any error
// before the rename the temporary file is removed and path keeps its old
// content.
func writeAtomic(path string, fill func(w io.Writer) error) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("checkpoint: writing %s: %w", path, err)
	}
	w := bufio.NewWriterSize(tmp, 1<<20)
	if err = fill(w); err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name()) // best effort: the write already failed
		return fmt.Errorf("checkpoint: writing %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("checkpoint: %s was written but syncing its directory failed: %w", path, err)
	}
	return nil
}

// syncDir fsyncs a directory so that a rename inside it reaches the disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
