//go:build unix

package tokenizer

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the process has used. On
// a shared machine it measures the work itself, which wall time does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
