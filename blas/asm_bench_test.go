package blas

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
)

// benchBackends are the backends compared on the model's shapes: the
// libraries found, go-asm with each microkernel this processor runs
// (go-asm:avx2 forced on an AVX-512 processor) and gonum.
func benchBackends(b *testing.B) []Backend {
	var bs []Backend
	for _, be := range Available() {
		if _, ok := be.(*goAsm); !ok {
			bs = append(bs, be)
		}
	}
	if CPU().AVX512F && !strings.EqualFold(os.Getenv("OPENBLAS_CORETYPE"), "SkylakeX") {
		if o, err := openOpenBLAS("", "SkylakeX"); err == nil {
			bs = append(bs, o)
		}
	}
	for _, k := range asmKernels() {
		l1, l2 := cacheSizes()
		bs = append(bs, newGoAsm(k, l1, l2, asmPackOK))
	}
	return bs
}

func shortName(be Backend) string {
	if g, ok := be.(*goAsm); ok {
		return KindGoAsm + ":" + g.k.isa
	}
	if o, ok := be.(*openBLAS); ok && o.kernels != "" {
		return KindOpenBLAS + ":" + o.kernels
	}
	return strings.Fields(be.Name())[0]
}

// BenchmarkSgemmModel times the products of a BERT-base layer (hidden 768,
// intermediate 3072, 12 heads of 64) as the model issues them on 2
// threads: a linear layer's rows (M = 1,024 or 128 tokens) split in two
// halves, each a single-threaded product on its own goroutine, as
// kernels.MatmulForward does (inp·Wᵀ, W stored [out, in]); and one head's
// attention over 128 tokens per goroutine (scores Q·Kᵀ 128×128×64, context
// P·V 128×64×128). Run it with -cpu 2 (or more) so both goroutines run.
func BenchmarkSgemmModel(b *testing.B) {
	type shape struct {
		name           string
		transA, transB bool
		m, n, k        int
		split          bool // rows split across the goroutines; else one product each
	}
	var shapes []shape
	for _, m := range []int{1024, 128} {
		for _, nk := range [][2]int{{768, 768}, {3072, 768}, {768, 3072}} {
			shapes = append(shapes, shape{fmt.Sprintf("M%d_K%d_N%d", m, nk[1], nk[0]), false, true, m, nk[0], nk[1], true})
		}
	}
	shapes = append(shapes, shape{"scores_128x128x64", false, true, 128, 128, 64, false},
		shape{"context_128x64x128", false, false, 128, 64, 128, false},
		shape{"wgrad_768x768x1024", true, false, 768, 768, 1024, true})
	const threads = 2
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range shapes {
		ar, ac := s.m, s.k
		if s.transA {
			ar, ac = s.k, s.m
		}
		br, bc := s.k, s.n
		if s.transB {
			br, bc = s.n, s.k
		}
		var as, bs, cs [threads][]float32
		for t := range threads {
			as[t], bs[t], cs[t] = randSlice(r, ar*ac), randSlice(r, br*bc), make([]float32, s.m*s.n)
			if s.split {
				as[t], bs[t], cs[t] = as[0], bs[0], cs[0]
			}
		}
		for _, be := range benchBackends(b) {
			b.Run(s.name+"/"+shortName(be), func(b *testing.B) {
				var wg sync.WaitGroup
				for i := 0; i < b.N; i++ {
					for t := range threads {
						wg.Add(1)
						go func() {
							defer wg.Done()
							if !s.split {
								be.Sgemm(s.transA, s.transB, s.m, s.n, s.k, 1, as[t], ac, bs[t], bc, 0, cs[t], s.n)
								return
							}
							lo, hi := t*s.m/threads, (t+1)*s.m/threads
							if s.transA {
								be.Sgemm(true, s.transB, hi-lo, s.n, s.k, 1, as[t][lo:], ac, bs[t], bc, 0, cs[t][lo*s.n:], s.n)
							} else {
								be.Sgemm(false, s.transB, hi-lo, s.n, s.k, 1, as[t][lo*ac:], ac, bs[t], bc, 0, cs[t][lo*s.n:], s.n)
							}
						}()
					}
					wg.Wait()
				}
				flops := 2 * float64(s.m*s.n*s.k)
				if !s.split {
					flops *= threads
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkGoAsmKC sweeps the kc block of the fastest kernel on the linear
// layer's shape (one thread, M = 512, K = N = 768, inp·Wᵀ).
func BenchmarkGoAsmKC(b *testing.B) {
	best := goAsmBest()
	if best == nil {
		b.Skip("no assembly microkernel")
	}
	m, n, k := 512, 768, 768
	r := rand.New(rand.NewPCG(3, 4))
	a, w, c := randSlice(r, m*k), randSlice(r, n*k), make([]float32, m*n)
	for _, kc := range []int{96, 128, 192, 256, 384, 768} {
		g := *best
		g.kc = kc
		b.Run(fmt.Sprintf("kc%d", kc), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				g.Sgemm(false, true, m, n, k, 1, a, k, w, k, 0, c, n)
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
