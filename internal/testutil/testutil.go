// Package testutil holds the helpers shared by the tests: locating the shared
// fixtures, comparing tensors, and the finite-difference gradient check.
package testutil

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot walks up from the working directory to the folder holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testutil: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Shared returns the path of ../shared beside the repository, or skips the
// test with a reason when it is absent.
func Shared(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{RepoRoot(t), "..", "shared"}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared fixtures not available (%s): %v", p, err)
	}
	return p
}

// Rand returns a seeded generator, so that every test is reproducible.
func Rand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// RandN returns n normal samples scaled by std.
func RandN(r *rand.Rand, n int, std float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64() * std)
	}
	return s
}

// AssertClose fails when max|got−want| > atol + rtol·|want| for any element,
// naming the case, the index and both values.
func AssertClose(t testing.TB, name string, got, want []float32, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d elements, want %d", name, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			t.Fatalf("%s: element %d is %v, want %v", name, i, got[i], want[i])
		}
		if lim := atol + rtol*math.Abs(float64(want[i])); d > lim && d-lim > worst {
			worst, at = d-lim, i
		}
	}
	if at >= 0 {
		t.Fatalf("%s: element %d: got %v, want %v (|diff| %.3g over tolerance atol %g rtol %g)",
			name, at, got[at], want[at], math.Abs(float64(got[at])-float64(want[at])), atol, rtol)
	}
}

// GradCheck compares an analytic gradient with central finite differences of
// loss, evaluated in float64 from the float32 kernels:
//
//	g_i ≈ (loss(x + h·e_i) − loss(x − h·e_i)) / 2h
//
// It perturbs x in place (restoring it) and checks every element:
// |g_i − fd_i| ≤ tol·max(1, max_j |fd_j|). loss must recompute everything
// from x. Use tiny shapes (B=2, T=3, C=4).
func GradCheck(t testing.TB, name string, x, analytic []float32, loss func() float64, h, tol float64) {
	t.Helper()
	if len(x) != len(analytic) {
		t.Fatalf("%s: %d inputs but %d gradient entries", name, len(x), len(analytic))
	}
	fd := make([]float64, len(x))
	scale := 1.0
	for i := range x {
		orig := x[i]
		x[i] = float32(float64(orig) + h)
		hp := float64(x[i]) - float64(orig)
		lp := loss()
		x[i] = float32(float64(orig) - h)
		hm := float64(orig) - float64(x[i])
		lm := loss()
		x[i] = orig
		fd[i] = (lp - lm) / (hp + hm)
		scale = math.Max(scale, math.Abs(fd[i]))
	}
	for i := range x {
		if d := math.Abs(float64(analytic[i]) - fd[i]); d > tol*scale {
			t.Errorf("%s: d/dx[%d]: analytic %.6g, finite difference %.6g (|diff| %.3g > %.3g)", name, i, analytic[i], fd[i], d, tol*scale)
		}
	}
}

// Dot returns Σ a_i·w_i in float64: a fixed random projection turns a tensor
// output into a scalar loss for gradient checks.
func Dot(a, w []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(w[i])
	}
	return s
}

// ReadJSON decodes the JSON file at path into v, failing the test on error.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
