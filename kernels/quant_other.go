//go:build !amd64 || purego

package kernels

func minMax512(x *float32, n int) (lo, hi float32) { panic("kernels: no AVX-512 here") }

func quantU8512(q *uint8, x *float32, n int, inv, zh float32) { panic("kernels: no AVX-512 here") }

func dequant512(o *float32, acc *int32, scale, wsum, bias, res *float32, n int, s, zs float32) {
	panic("kernels: no AVX-512 here")
}
