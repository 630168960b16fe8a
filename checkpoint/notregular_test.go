//go:build unix

package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every reader of a checkpoint refuses a weight file or shard index that is
// not a regular file after symlinks are followed (a named pipe, a
// directory, a symlink to a named pipe, a symlink to /dev/zero), at once
// and naming the file and its type, rather than waiting in the open of the
// pipe or reading the device without end.
func TestReadNotRegular(t *testing.T) {
	kinds := []struct{ kind, want string }{
		{"fifo", "named pipe"},
		{"directory", "directory"},
		{"symlink to a fifo", "named pipe"},
		{"symlink to /dev/zero", "character device"},
	}
	// Each case makes the file named by bad in dir and reads the checkpoint.
	cases := []struct {
		name, bad string
		setup     func(t *testing.T, dir string)
		read      func(dir string) error
	}{
		{"ReadSafetensors", "model.safetensors", nil,
			func(dir string) error { _, err := ReadSafetensors(filepath.Join(dir, "model.safetensors")); return err }},
		{"ReadPyTorch", "pytorch_model.bin", nil,
			func(dir string) error { _, err := ReadPyTorch(filepath.Join(dir, "pytorch_model.bin")); return err }},
		{"ReadDir", "model.safetensors", nil,
			func(dir string) error { _, err := ReadDir(dir); return err }},
		{"DirFile", "pytorch_model.bin", nil,
			func(dir string) error { _, _, err := DirFile(dir); return err }},
		{"ReadSharded index", "model.safetensors.index.json", nil,
			func(dir string) error { _, err := ReadDir(dir); return err }},
		{"ReadSharded shard", "model-00002-of-00002.safetensors",
			func(t *testing.T, dir string) {
				shardedSafetensors(t, dir)
				if err := os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors")); err != nil {
					t.Fatal(err)
				}
			},
			func(dir string) error {
				_, err := ReadSharded(filepath.Join(dir, "model.safetensors.index.json"))
				return err
			}},
	}
	for _, c := range cases {
		for _, k := range kinds {
			t.Run(c.name+"/"+k.kind, func(t *testing.T) {
				dir := t.TempDir()
				if c.setup != nil {
					c.setup(t, dir)
				}
				path := filepath.Join(dir, c.bad)
				var err error
				switch k.kind {
				case "fifo":
					err = syscall.Mkfifo(path, 0o644)
				case "directory":
					err = os.Mkdir(path, 0o755)
				case "symlink to a fifo":
					if err = syscall.Mkfifo(filepath.Join(dir, "blob"), 0o644); err == nil {
						err = os.Symlink(filepath.Join(dir, "blob"), path)
					}
				case "symlink to /dev/zero":
					err = os.Symlink("/dev/zero", path)
				}
				if err != nil {
					t.Skipf("cannot make a %s here: %v", k.kind, err)
				}
				done := make(chan error, 1)
				go func() { done <- c.read(dir) }()
				select {
				case err = <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("still blocked after 10 s")
				}
				if want := path + ": not a regular file: " + k.want; err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v; want one containing %q", err, want)
				}
			})
		}
	}
}
