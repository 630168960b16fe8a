//go:build !windows

package dlopen

import (
	"strings"
	"testing"
)

// TestFirst: the first name that loads wins; when none does, the error
// names each one.
func TestFirst(t *testing.T) {
	_, err := First([]string{"libdoes-not-exist-1.so", "libdoes-not-exist-2.so"}, Local)
	if err == nil || !strings.Contains(err.Error(), "libdoes-not-exist-1.so: ") || !strings.Contains(err.Error(), "; libdoes-not-exist-2.so: ") {
		t.Fatalf("err %v, want both names", err)
	}
	if _, err := First(nil, Local); err == nil {
		t.Fatal("no names: no error")
	}
	h, err := First([]string{"libdoes-not-exist.so", "libc.so.6"}, Local)
	if err != nil || h == 0 {
		t.Fatalf("libc.so.6: handle %d, %v", h, err)
	}
}
