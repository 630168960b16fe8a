//go:build !unix

package boundedfile

import "os"

// openFlags open a file for reading. Without O_NONBLOCK, the stat before
// the open is what refuses a file that is not a regular one.
const openFlags = os.O_RDONLY
