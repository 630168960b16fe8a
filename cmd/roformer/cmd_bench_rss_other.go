//go:build !unix

package main

// peakRSS is not implemented on this system; bench reports 0.
func peakRSS() (int64, bool) { return 0, false }
