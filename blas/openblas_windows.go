//go:build windows

package blas

import "errors"

// openBLAS is not loadable on Windows (purego has no Dlopen there).
type openBLAS struct {
	Backend
	config, kernels, coreType string
}

// openOpenBLAS is not available on Windows: the pure-Go fallback is used.
func openOpenBLAS(path, coreType string) (*openBLAS, error) {
	return nil, errors.New("blas: run-time loading of OpenBLAS is not supported on windows; using the Go fallback")
}

func loadedLibraryFile(part string) (string, error) { return "", errors.New("not on windows") }
