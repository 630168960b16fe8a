//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernels of vec_amd64.s; tests turn it off to
// run the scalar twins.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func expSubSumAVX2(x *float32, n int, m float32) float32

//go:noescape
func expSumAVX2(x *float32, n int, m float32) float32

//go:noescape
func expSubScaleAVX2(x *float32, n int, m, a float32)

//go:noescape
func divMaxAVX2(x *float32, n int, s float32) float32

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func scaleAVX2(x *float32, n int, a float32)

//go:noescape
func dotAVX2(x, y *float32, n int) float32

//go:noescape
func softmaxBackAVX2(d, p *float32, n int, dot, s float32)

//go:noescape
func geluAVX2(out, in *float32, n int)

//go:noescape
func geluGradAVX2(out, grad, in *float32, n int)

// withLevel selects the kernels tests run: 0 the scalar twins, 1 AVX2, 2
// AVX2 with the AVX-512 exp and GELU. It reports whether the CPU has that
// level and returns a function that restores the previous choice.
func withLevel(level int) (restore func(), ok bool) {
	old2, old512 := useAVX2, useAVX512
	has2 := cpu.X86.HasAVX2 && cpu.X86.HasFMA
	has512 := has2 && cpu.X86.HasAVX512F
	useAVX2 = level >= 1 && has2
	useAVX512 = level >= 2 && has512
	ok = level == 0 || (level == 1 && has2) || (level == 2 && has512)
	return func() { useAVX2, useAVX512 = old2, old512 }, ok
}

//go:noescape
func sum64AVX2(x *float32, n int) float64

//go:noescape
func sqdev64AVX2(x *float32, n int, m float64) float64

//go:noescape
func lnApplyAVX2(out, x, w, b *float32, n int, m, rs float32)

//go:noescape
func lnBackSumsAVX2(d, w, x *float32, n int, m, rs float32) (s1, s2 float64)

//go:noescape
func lnBackApplyAVX2(di, d, w, x *float32, n int, m, rs, m1, m2 float32)

//go:noescape
func lnBackParamAVX2(dw, db, d, x *float32, n int, m, rs float32)

//go:noescape
func addVecAVX2(out, a, b *float32, n int)

//go:noescape
func mulVecAVX2(out, a, b *float32, n int)

//go:noescape
func adamWAVX2(p, grad, m, v *float32, n int, k *AdamWScalars)

//go:noescape
func rotatePairsAVX2(x, cos2, sin2 *float32, n int)

//go:noescape
func toBF16AVX2(dst *uint16, src *float32, n int)

// useAVX512 selects the sixteen-lane kernels of vec512_amd64.s for exp and
// GELU where the CPU has AVX-512F (with AVX2 and FMA for the rest).
var useAVX512 = useAVX2 && cpu.X86.HasAVX512F

//go:noescape
func expSubSum512(x *float32, n int, m float32) float32

//go:noescape
func expSum512(x *float32, n int, m float32) float32

//go:noescape
func expSubScale512(x *float32, n int, m, a float32)

//go:noescape
func gelu512(out, in *float32, n int)

//go:noescape
func geluGrad512(out, grad, in *float32, n int)
