//go:build windows

package blas

import "errors"

// oneDNN is not loadable on Windows (purego has no Dlopen there).
type oneDNN struct {
	Backend
	version, isa string
}

// GemmU8S8S32 is never reached on Windows: openOneDNN always fails there.
func (d *oneDNN) GemmU8S8S32(transA, transB bool, m, n, k int, a []uint8, lda int, b []int8, ldb int, c []int32, ldc int) {
	panic("blas: oneDNN is not available on windows")
}

var loadOneDNN = func() (*oneDNN, error) { return openOneDNN("") }

func openOneDNN(path string) (*oneDNN, error) {
	return nil, errors.New("blas: run-time loading of oneDNN is not supported on windows; using the Go fallback")
}
