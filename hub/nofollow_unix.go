//go:build unix

package hub

import (
	"errors"
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// openNoFollow opens (creating it when absent) the file name of the repo
// folder root for reading and writing, refusing a symbolic link in its
// place: the folder is opened through root (which no link can leave), and
// the file relative to it with O_NOFOLLOW, so that no link planted there,
// even between a check and the open, is followed.
func openNoFollow(root *os.Root, name string) (*os.File, error) {
	dir, err := root.Open(path.Dir(name))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	fd, err := unix.Openat(int(dir.Fd()), path.Base(name), unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o644)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link, which the cache never makes there: refusing to follow it", name)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	// O_NONBLOCK kept a planted FIFO from blocking the open; a regular file
	// ignores it, but clear it all the same.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}
