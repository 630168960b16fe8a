package blas

import (
	"errors"
	"os"
)

// librariesHidden returns an error for lib when ROFORMER_BLAS_NOLIBS=1: the package
// then loads neither oneDNN nor OpenBLAS, as on a machine without them
// (the probe chooses go-asm, or gonum), so that CI and a measurement of
// the fresh-machine set-up need not uninstall anything.
func librariesHidden(lib string) error {
	if os.Getenv("ROFORMER_BLAS_NOLIBS") == "1" {
		return errors.New("blas: " + lib + " hidden by ROFORMER_BLAS_NOLIBS=1")
	}
	return nil
}
