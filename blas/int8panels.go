package blas

import (
	"fmt"
	"sync"
	"unsafe"
)

// Int8Panels is an int8 linear layer's codes W [OC, C] packed once for
// go-asm's int8 microkernels (AVX512_VNNI): 32-column panels, each the
// inner dimension in groups of four, [C/4][32][4] bytes, which a product
// streams from memory once whatever its rows. The sums are exact int32s
// (VPDPBUSD neither rounds nor saturates), so they equal any other exact
// product's (oneDNN's matmul, the plain loop) to the bit, and a row's do
// not depend on the rows beside it.
type Int8Panels struct {
	OC, C int
	kg    int    // groups of four of the inner dimension, ⌈C/4⌉
	b     []int8 // OC/32 panels of kg·128 bytes
}

// int8PanelRows is the rows of the largest kernel (a tile of A).
const int8PanelRows = 12

// Int8PanelsOK reports whether Int8Panels runs here: amd64 with AVX-512F
// and AVX512_VNNI but no AMX-INT8 (oneDNN's matmul takes the tiles there),
// built without the purego tag.
func Int8PanelsOK() bool { return len(int8Kernels) > 0 }

// NewInt8Panels packs codes [OC, C] (not kept). OC must be a multiple of
// 32 (Unit); it fails where Int8PanelsOK is false.
func NewInt8Panels(codes []int8, OC, C int) (*Int8Panels, error) {
	if !Int8PanelsOK() {
		return nil, fmt.Errorf("blas: int8 panels need amd64 with AVX-512 and AVX512_VNNI")
	}
	if OC <= 0 || C <= 0 || OC%32 != 0 || len(codes) < OC*C {
		return nil, fmt.Errorf("blas: int8 panels of a %d×%d layer (outputs a multiple of 32) from %d codes", OC, C, len(codes))
	}
	kg := (C + 3) / 4
	p := &Int8Panels{OC: OC, C: C, kg: kg, b: make([]int8, OC*kg*4)}
	for q := 0; q < OC/32; q++ {
		panel := p.b[q*kg*128 : (q+1)*kg*128]
		for j := 0; j < 32; j++ {
			row := codes[(32*q+j)*C : (32*q+j+1)*C]
			for g := 0; g < kg; g++ {
				dst := panel[g*128+4*j : g*128+4*j+4]
				copy(dst, row[4*g:min(4*g+4, C)])
			}
		}
	}
	return p, nil
}

// Unit is a panel's width: blocks of columns start and end at its
// multiples.
func (p *Int8Panels) Unit() int { return 32 }

// Bytes returns the bytes the panels hold.
func (p *Int8Panels) Bytes() int64 { return int64(len(p.b)) }

// int8ABufs holds packed tiles of A between calls.
var int8ABufs = sync.Pool{New: func() any { return new([]uint8) }}

// Product computes the exact sums acc[i, o] = Σ_c a[i, c]·W[o, c] for the
// m rows of a [m, C] (unsigned, leading dimension lda) and the outputs o
// in [lo, hi), multiples of Unit; acc is row-major with leading dimension
// ldc (acc[0] is row 0, output 0) and overwritten there. It is PackA into
// a buffer of its own, then ProductPacked. It panics on blocks off the
// panels' edges and slices too short.
func (p *Int8Panels) Product(m, lo, hi int, a []uint8, lda int, acc []int32, ldc int) {
	if m <= 0 {
		return
	}
	bp := int8ABufs.Get().(*[]uint8)
	if cap(*bp) < p.LenA(m) {
		*bp = make([]uint8, p.LenA(m))
	}
	ap := p.PackA((*bp)[:p.LenA(m)], m, a, lda)
	p.ProductPacked(m, lo, hi, ap, acc, ldc)
	int8ABufs.Put(bp)
}

// LenA returns the bytes PackA needs for m rows.
func (p *Int8Panels) LenA(m int) int { return m * p.kg * 4 }

// PackA packs the m rows of a [m, C] (unsigned, leading dimension lda)
// into dst, LenA(m) bytes, for ProductPacked (tiles of up to 12 rows, each
// [⌈C/4⌉][rows][4]), and returns it: rows packed once serve every block
// of columns.
func (p *Int8Panels) PackA(dst []uint8, m int, a []uint8, lda int) []uint8 {
	kg, C := p.kg, p.C
	if m < 0 || len(dst) < p.LenA(m) || (m > 0 && (lda < C || len(a) < (m-1)*lda+C)) {
		panic(fmt.Sprintf("blas: Int8Panels.PackA of %d rows of %d (leading dimension %d, %d bytes) into %d bytes", m, C, lda, len(a), len(dst)))
	}
	dst = dst[:p.LenA(m)]
	full := C / 4
	var words [int8PanelRows][]uint32
	for i0 := 0; i0 < m; i0 += int8PanelRows {
		R := min(int8PanelRows, m-i0)
		t := dst[i0*kg*4 : (i0+R)*kg*4]
		aligned := true
		for r := 0; r < R; r++ {
			row := a[(i0+r)*lda : (i0+r)*lda+C]
			if uintptr(unsafe.Pointer(unsafe.SliceData(row)))%4 != 0 {
				aligned = false
				break
			}
			words[r] = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(row))), full)
		}
		if aligned && full > 0 {
			d := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(t))), full*R)
			for g := 0; g < full; g++ {
				dg := d[g*R : g*R+R]
				for r := range dg {
					dg[r] = words[r][g]
				}
			}
		} else {
			for r := 0; r < R; r++ {
				row := a[(i0+r)*lda : (i0+r)*lda+C]
				for g := 0; g < full; g++ {
					copy(t[(g*R+r)*4:(g*R+r)*4+4], row[4*g:4*g+4])
				}
			}
		}
		if full < kg { // the last group, padded with zeros
			for r := 0; r < R; r++ {
				d := t[(full*R+r)*4 : (full*R+r)*4+4]
				clear(d)
				copy(d, a[(i0+r)*lda+4*full:(i0+r)*lda+C])
			}
		}
	}
	return dst
}

// ProductPacked is Product on rows PackA packed (ap, m rows).
func (p *Int8Panels) ProductPacked(m, lo, hi int, ap []uint8, acc []int32, ldc int) {
	if lo < 0 || hi > p.OC || lo > hi || lo%32 != 0 || hi%32 != 0 {
		panic(fmt.Sprintf("blas: Int8Panels.Product of columns %d..%d of %d (multiples of 32)", lo, hi, p.OC))
	}
	if m <= 0 || lo == hi {
		return
	}
	if len(ap) < p.LenA(m) || ldc < hi || len(acc) < (m-1)*ldc+hi {
		panic(fmt.Sprintf("blas: Int8Panels.Product %d×%d×%d: packed rows of %d bytes (want %d), acc of %d (leading dimension %d)", m, hi-lo, p.C, len(ap), p.LenA(m), len(acc), ldc))
	}
	kg := p.kg
	for q := lo / 32; q < hi/32; q++ {
		panel := p.b[q*kg*128 : (q+1)*kg*128]
		for i0 := 0; i0 < m; i0 += int8PanelRows {
			R := min(int8PanelRows, m-i0)
			int8Kernels[R-1](kg, &ap[i0*kg*4], &panel[0], &acc[i0*ldc+32*q], ldc)
		}
	}
}
