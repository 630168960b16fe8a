//go:build windows

package blas

import "errors"

// openOpenBLAS is not available on Windows (purego has no Dlopen there):
// the pure-Go fallback is used.
func openOpenBLAS(path string) (Backend, error) {
	return nil, errors.New("blas: run-time loading of OpenBLAS is not supported on windows; using the Go fallback")
}
