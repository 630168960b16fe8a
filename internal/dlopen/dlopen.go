//go:build !windows

// Package dlopen loads a shared library at run time without cgo, trying
// candidate names in order: the one loader of the libraries the project
// finds on the machine (oneDNN and OpenBLAS in blas, Open MPI in
// distributed).
package dlopen

import (
	"errors"
	"strings"

	"github.com/ebitengine/purego"
)

// Flags for First: RTLD_NOW resolves every symbol at load; Global makes
// the library's symbols visible to the libraries it loads in turn (Open
// MPI's components, oneDNN's OpenMP runtime), Local keeps them private.
const (
	Global = purego.RTLD_NOW | purego.RTLD_GLOBAL
	Local  = purego.RTLD_NOW | purego.RTLD_LOCAL
)

// First opens the first of names that loads, with flags, and returns its
// handle. When none does, the error lists each name with the loader's
// reason, "; "-separated, for the caller to wrap with what to install.
func First(names []string, flags int) (uintptr, error) {
	var errs []string
	for _, n := range names {
		h, err := purego.Dlopen(n, flags)
		if err == nil {
			return h, nil
		}
		errs = append(errs, n+": "+strings.TrimSpace(err.Error()))
	}
	if len(names) == 0 {
		errs = append(errs, "no library names")
	}
	return 0, errors.New(strings.Join(errs, "; "))
}
