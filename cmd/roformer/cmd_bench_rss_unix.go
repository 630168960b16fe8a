//go:build unix

package main

import (
	"os"
	"runtime"
	"syscall"
)

// peakRSS returns the process's peak resident set size in bytes
// (getrusage(RUSAGE_SELF).ru_maxrss: KiB on Linux and the BSDs, bytes on macOS).
func peakRSS() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss), true
	}
	return int64(ru.Maxrss) * 1024, true
}

// childMaxRSS is the peak resident size in bytes of a child that has
// exited (its rusage; 0 where the system does not say).
func childMaxRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) << 10
}
