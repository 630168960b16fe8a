//go:build amd64 && !purego

package kernels

//go:noescape
func minMax512(x *float32, n int) (lo, hi float32)

//go:noescape
func quantU8512(q *uint8, x *float32, n int, inv, zh float32)

//go:noescape
func dequant512(o *float32, acc *int32, scale, wsum, bias, res *float32, n int, s, zs float32)
