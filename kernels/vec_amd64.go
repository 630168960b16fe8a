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

// withAVX2 sets useAVX2 to on where the CPU allows it and returns a function
// that restores it (tests run both paths).
func withAVX2(on bool) (restore func()) {
	old := useAVX2
	useAVX2 = on && cpu.X86.HasAVX2 && cpu.X86.HasFMA
	return func() { useAVX2 = old }
}
