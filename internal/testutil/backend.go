package testutil

import (
	"strings"
	"testing"

	"github.com/roformer-go/roformer/blas"
)

// UseBackend makes the matrix-product backend of kind (blas.KindGoAsm,
// blas.KindOneDNN, …) the one in use, for the layers and the heads, until
// t ends, then puts the previous one back; it skips t where no backend of
// that kind runs here.
func UseBackend(t testing.TB, kind string) blas.Backend {
	t.Helper()
	for _, be := range blas.Available() {
		if strings.HasPrefix(be.Name(), kind) {
			prev := blas.Set(be)
			t.Cleanup(func() { blas.Set(prev) })
			return be
		}
	}
	t.Skipf("no %s backend on this machine", kind)
	return nil
}
