//go:build unix

package boundedfile

import (
	"os"
	"syscall"
)

// openFlags open a file for reading without waiting: a named pipe's open
// would otherwise block until a writer opens it.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
