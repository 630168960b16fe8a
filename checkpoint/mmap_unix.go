//go:build unix

package checkpoint

import (
	"os"

	"golang.org/x/sys/unix"
)

// canMap reports whether this system maps files (MapDir falls back to
// reading where it does not).
const canMap = true

// mapFile maps the size-byte file f copy-on-write: its pages are read from
// the file when first touched and stay shared with the page cache until
// written, when they become the process's own (MAP_PRIVATE).
func mapFile(f *os.File, size int64) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
}

// dropPages tells the kernel that b (page-aligned, within a private file
// mapping, never written) is not needed now: its pages leave the process's
// resident set and are read from the file again if touched.
func dropPages(b []byte) error { return unix.Madvise(b, unix.MADV_DONTNEED) }
