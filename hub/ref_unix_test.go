//go:build unix

package hub

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A ref that is not a regular file (a named pipe) is refused at once,
// naming it, rather than waited on for ever.
func TestResolveRefNotRegular(t *testing.T) {
	c1 := strings.Repeat("a", 40)
	cache := fakeCache(t, "org/name", map[string]string{"main": c1}, c1)
	t.Setenv("HF_HUB_CACHE", cache)
	ref := filepath.Join(cache, "models--org--name", "refs", "main")
	if err := os.Remove(ref); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(ref, 0o644); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Resolve("org/name"); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Resolve with a FIFO ref: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Resolve blocked on a FIFO ref")
	}
}
