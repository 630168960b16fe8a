// Package golden pins what the bits of a training run depend on besides
// the code, for the golden tests that hold the training loops to the exact
// numbers they gave before a refactoring (finetune, experiment and the
// bench's training mode).
package golden

import (
	"runtime"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/kernels"
)

// Pin makes the test run with the pure-Go matrix products and two kernel
// threads, restoring both when it ends, and skips it unless the
// element-wise kernels are those the golden numbers were recorded with
// (amd64, AVX-512): other vector paths and BLAS libraries round
// differently in the last bits.
func Pin(t testing.TB) {
	t.Helper()
	if runtime.GOARCH != "amd64" || kernels.VectorPath() != "avx512" {
		t.Skipf("golden numbers recorded on amd64/avx512; this is %s/%s", runtime.GOARCH, kernels.VectorPath())
	}
	prev, th := blas.Current(), kernels.Threads()
	blas.UseGo()
	kernels.SetThreads(2)
	t.Cleanup(func() { blas.Set(prev); kernels.SetThreads(th) })
}

// Check fails the test, showing both lists, when the lines got differ from
// the pinned ones.
func Check(t testing.TB, got, want []string) {
	t.Helper()
	if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
		t.Errorf("the run changed:\n got:\n%s\nwant:\n%s", g, w)
	}
}
