//go:build !unix

package main

import "os"

// peakRSS is not implemented on this system; bench reports 0.
func peakRSS() (int64, bool) { return 0, false }

// childMaxRSS is the peak resident size of an exited child: not known here.
func childMaxRSS(*os.ProcessState) int64 { return 0 }

// currentRSS is not known here.
func currentRSS() (int64, bool) { return 0, false }
