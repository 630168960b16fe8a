package blas

import (
	"math/rand/v2"
	"testing"
)

// Int8 panels give the exact int32 sums (the plain loop's, to the bit) at
// every row count 1–64, inner dimensions with and without a last partial
// group of four, extreme codes (255 × −127), blocks of columns, rows of A
// not aligned to four bytes, and leave the columns outside a block alone.
func TestInt8PanelsExact(t *testing.T) {
	if !Int8PanelsOK() {
		t.Skip("no int8 panels here (AVX512_VNNI)")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, s := range [][2]int{{32, 4}, {64, 7}, {96, 66}, {64, 768}, {32, 3072}} {
		OC, C := s[0], s[1]
		for _, extreme := range []bool{false, true} {
			codes := make([]int8, OC*C)
			for i := range codes {
				codes[i] = int8(rng.IntN(255) - 127)
				if extreme {
					codes[i] = -127
				}
			}
			p, err := NewInt8Panels(codes, OC, C)
			if err != nil {
				t.Fatal(err)
			}
			for m := 1; m <= 64; m++ {
				if C >= 768 && m%5 != 1 {
					continue
				}
				lda, ldc := C+1, OC+3
				a := make([]uint8, (m-1)*lda+C+1)[1:] // rows start off four-byte boundaries
				for i := range a {
					a[i] = uint8(rng.IntN(256))
					if extreme {
						a[i] = 255
					}
				}
				acc := make([]int32, (m-1)*ldc+OC)
				for i := range acc {
					acc[i] = -5
				}
				p.Product(m, 32, OC, a, lda, acc, ldc)
				p.Product(m, 0, 32, a, lda, acc, ldc)
				for i := 0; i < m; i++ {
					for o := 0; o < ldc && i*ldc+o < len(acc); o++ {
						var want int32 = -5
						if o < OC {
							want = 0
							for c := 0; c < C; c++ {
								want += int32(a[i*lda+c]) * int32(codes[o*C+c])
							}
						}
						if acc[i*ldc+o] != want {
							t.Fatalf("%d×%d, m %d: acc[%d][%d] = %d, want %d", OC, C, m, i, o, acc[i*ldc+o], want)
						}
					}
				}
			}
		}
	}
	if _, err := NewInt8Panels(make([]int8, 40), 20, 2); err == nil {
		t.Error("20 outputs (not a multiple of 32) accepted")
	}
}
