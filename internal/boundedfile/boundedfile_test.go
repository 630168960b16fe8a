package boundedfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(`{"a":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path, 7)
	if err != nil || string(got) != `{"a":1}` {
		t.Fatalf("Read at the limit = %q, %v; want the file", got, err)
	}
	_, err = Read(path, 6)
	var big *TooLargeError
	if !errors.As(err, &big) || big.Size != 7 || big.Limit != 6 || !strings.Contains(err.Error(), "7 bytes, more than the 6-byte limit") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Read over the limit: err = %v; want one naming the path and the limit", err)
	}
	if _, err := Read(filepath.Join(dir, "missing.json"), 7); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read of a missing file: err = %v; want fs.ErrNotExist", err)
	}
}
