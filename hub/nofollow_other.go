//go:build !unix

package hub

import (
	"fmt"
	"os"
)

// openNoFollow opens (creating it when absent) the file name of the repo
// folder root for reading and writing, refusing a symbolic link in its
// place. Without O_NOFOLLOW the check is an Lstat before the open, which a
// link made in between escapes; root still keeps the open within the repo
// folder.
func openNoFollow(root *os.Root, name string) (*os.File, error) {
	if fi, err := root.Lstat(name); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s is a symbolic link, which the cache never makes there: refusing to follow it", name)
	}
	return root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
}
