//go:build !amd64 || purego

package kernels

// useAVX2 is false off amd64 (or with the purego tag): the scalar twins in
// vec.go run, and the functions below are never called.
const useAVX2 = false

func expSubSumAVX2(x *float32, n int, m float32) float32   { panic("kernels: no AVX2") }
func expSumAVX2(x *float32, n int, m float32) float32      { panic("kernels: no AVX2") }
func expSubScaleAVX2(x *float32, n int, m, a float32)      { panic("kernels: no AVX2") }
func divMaxAVX2(x *float32, n int, s float32) float32      { panic("kernels: no AVX2") }
func maxAVX2(x *float32, n int) float32                    { panic("kernels: no AVX2") }
func scaleAVX2(x *float32, n int, a float32)               { panic("kernels: no AVX2") }
func dotAVX2(x, y *float32, n int) float32                 { panic("kernels: no AVX2") }
func softmaxBackAVX2(d, p *float32, n int, dot, s float32) { panic("kernels: no AVX2") }
func geluAVX2(out, in *float32, n int)                     { panic("kernels: no AVX2") }
func geluGradAVX2(out, grad, in *float32, n int)           { panic("kernels: no AVX2") }

// useAVX512 is false here too.
const useAVX512 = false

// withLevel reports that only level 0 (the scalar twins) exists here.
func withLevel(level int) (restore func(), ok bool) { return func() {}, level == 0 }

func expSubSum512(x *float32, n int, m float32) float32 { panic("kernels: no AVX-512") }
func expSum512(x *float32, n int, m float32) float32    { panic("kernels: no AVX-512") }
func expSubScale512(x *float32, n int, m, a float32)    { panic("kernels: no AVX-512") }
func gelu512(out, in *float32, n int)                   { panic("kernels: no AVX-512") }
func geluGrad512(out, grad, in *float32, n int)         { panic("kernels: no AVX-512") }

func sum64AVX2(x *float32, n int) float64                     { panic("kernels: no AVX2") }
func sqdev64AVX2(x *float32, n int, m float64) float64        { panic("kernels: no AVX2") }
func lnApplyAVX2(out, x, w, b *float32, n int, m, rs float32) { panic("kernels: no AVX2") }
func lnBackSumsAVX2(d, w, x *float32, n int, m, rs float32) (s1, s2 float64) {
	panic("kernels: no AVX2")
}
func lnBackApplyAVX2(di, d, w, x *float32, n int, m, rs, m1, m2 float32) { panic("kernels: no AVX2") }
func lnBackParamAVX2(dw, db, d, x *float32, n int, m, rs float32)        { panic("kernels: no AVX2") }

func addVecAVX2(out, a, b *float32, n int)                     { panic("kernels: no AVX2") }
func mulVecAVX2(out, a, b *float32, n int)                     { panic("kernels: no AVX2") }
func adamWAVX2(p, grad, m, v *float32, n int, k *AdamWScalars) { panic("kernels: no AVX2") }

func rotatePairsAVX2(x, cos2, sin2 *float32, n int) { panic("kernels: no AVX2") }
func toBF16AVX2(dst *uint16, src *float32, n int)   { panic("kernels: no AVX2") }

const hasAVX512DQ = false

func dropMulAVX512(dst, src *float32, n int, seed, off, thr uint64, keep float32) {
	panic("kernels: no AVX-512")
}

func dropMulAVX2(dst, src *float32, n int, seed, off, thr uint64, keep float32) {
	panic("kernels: no AVX2")
}
