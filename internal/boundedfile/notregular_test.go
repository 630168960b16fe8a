//go:build unix

package boundedfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notRegularKinds are the files that are not regular files, each with the
// type its error names: a named pipe (whose open blocks until a writer
// comes), a directory, a symlink to a named pipe, and a symlink to
// /dev/zero (a device that never ends).
var notRegularKinds = []struct{ kind, want string }{
	{"fifo", "named pipe"},
	{"directory", "directory"},
	{"symlink to a fifo", "named pipe"},
	{"symlink to /dev/zero", "character device"},
}

// notRegular makes path a file of kind, one of notRegularKinds.
func notRegular(t *testing.T, path, kind string) {
	t.Helper()
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o644)
	case "directory":
		err = os.Mkdir(path, 0o755)
	case "symlink to a fifo":
		if err = syscall.Mkfifo(path+".blob", 0o644); err == nil {
			err = os.Symlink(path+".blob", path)
		}
	case "symlink to /dev/zero":
		if _, err = os.Stat("/dev/zero"); err == nil {
			err = os.Symlink("/dev/zero", path)
		}
	}
	if err != nil {
		t.Skipf("cannot make a %s here: %v", kind, err)
	}
}

// within runs f and fails the test when it has not returned after 10 s
// (the open of a named pipe without a writer never returns).
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still blocked after 10 s", what)
		return nil
	}
}

// Every file that is not a regular one after symlinks are followed is
// refused by Stat, Open and Read at once, with an error naming the path
// and its type; a symlink to a regular file (the Hugging Face cache's
// snapshot files) is read.
func TestNotRegular(t *testing.T) {
	for _, k := range notRegularKinds {
		t.Run(k.kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "model.safetensors")
			notRegular(t, path, k.kind)
			calls := map[string]func() error{
				"Stat": func() error { _, err := Stat(path); return err },
				"Open": func() error {
					f, _, err := Open(path)
					if err == nil {
						f.Close()
					}
					return err
				},
				"Read":       func() error { _, err := Read(path, 1<<20); return err },
				"ReadConfig": func() error { _, err := ReadConfig(path, 1<<20); return err },
			}
			for name, call := range calls {
				err := within(t, name, call)
				var nr *NotRegularError
				if !errors.As(err, &nr) || err.Error() != path+": not a regular file: "+k.want {
					t.Errorf("%s: err = %v; want %q", name, err, path+": not a regular file: "+k.want)
				}
			}
		})
	}
	t.Run("symlink to a regular file", func(t *testing.T) {
		dir := t.TempDir()
		blob := filepath.Join(dir, "blob")
		if err := os.WriteFile(blob, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "config.json")
		if err := os.Symlink(blob, link); err != nil {
			t.Fatal(err)
		}
		if got, err := Read(link, 2); err != nil || string(got) != "{}" {
			t.Fatalf("Read through a symlink = %q, %v; want the blob", got, err)
		}
	})
}

// A regular file swapped for a named pipe between Open's stat and its
// open is refused, not waited on: the open does not block and the opened
// file is checked again.
func TestOpenSwappedForFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vocab.txt")
	if err := os.WriteFile(path, []byte("[PAD]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testHookBeforeOpen = func(p string) {
		if err := os.Remove(p); err != nil {
			t.Error(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Error(err)
		}
	}
	defer func() { testHookBeforeOpen = nil }()
	err := within(t, "Read", func() error { _, err := Read(path, 1<<20); return err })
	var nr *NotRegularError
	if !errors.As(err, &nr) || !strings.Contains(err.Error(), "not a regular file: named pipe") {
		t.Fatalf("Read of a file swapped for a named pipe: err = %v; want a NotRegularError", err)
	}
}
