package blas

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// benchBackends are the backends compared on the model's shapes: the
// libraries found, go-asm with each microkernel this processor runs
// (go-asm:avx2 forced on an AVX-512 processor) and gonum.
func benchBackends(b testing.TB) []Backend {
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

// modelShape is one product of a BERT-base layer (hidden 768,
// intermediate 3072, 12 heads of 64) as the model issues it on 2 threads:
// a linear layer's rows (M = 1,024 or 128 tokens) split in two halves,
// each a single-threaded product on its own goroutine, as
// kernels.MatmulForward does (inp·Wᵀ, W stored [out, in]); one head's
// attention over 128 tokens per goroutine (scores Q·Kᵀ 128×128×64,
// context P·V 128×64×128); and a weight gradient (doutᵀ·inp) split by
// rows as MatmulBackward does.
type modelShape struct {
	name           string
	transA, transB bool
	m, n, k        int
	split          bool // rows split across the goroutines; else one product each
}

const benchThreads = 2

func modelShapes() []modelShape {
	var shapes []modelShape
	for _, m := range []int{1024, 128} {
		for _, nk := range [][2]int{{768, 768}, {3072, 768}, {768, 3072}} {
			shapes = append(shapes, modelShape{fmt.Sprintf("M%d_K%d_N%d", m, nk[1], nk[0]), false, true, m, nk[0], nk[1], true})
		}
	}
	return append(shapes, modelShape{"scores_128x128x64", false, true, 128, 128, 64, false},
		modelShape{"context_128x64x128", false, false, 128, 64, 128, false},
		modelShape{"wgrad_768x768x1024", true, false, 768, 768, 1024, true})
}

// operands are a shape's matrices, one set per goroutine unless split.
type operands struct {
	ac, bc     int
	as, bs, cs [benchThreads][]float32
}

func newOperands(r *rand.Rand, s modelShape) *operands {
	ar, ac := s.m, s.k
	if s.transA {
		ar, ac = s.k, s.m
	}
	br, bc := s.k, s.n
	if s.transB {
		br, bc = s.n, s.k
	}
	o := &operands{ac: ac, bc: bc}
	for t := range benchThreads {
		o.as[t], o.bs[t], o.cs[t] = randSlice(r, ar*ac), randSlice(r, br*bc), make([]float32, s.m*s.n)
		if s.split {
			o.as[t], o.bs[t], o.cs[t] = o.as[0], o.bs[0], o.cs[0]
		}
	}
	return o
}

// run does the shape's products once on benchThreads goroutines and
// returns the floating-point operations done.
func (s modelShape) run(be Backend, o *operands) float64 {
	var wg sync.WaitGroup
	for t := range benchThreads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !s.split {
				be.Sgemm(s.transA, s.transB, s.m, s.n, s.k, 1, o.as[t], o.ac, o.bs[t], o.bc, 0, o.cs[t], s.n)
				return
			}
			lo, hi := t*s.m/benchThreads, (t+1)*s.m/benchThreads
			aoff := lo * o.ac
			if s.transA {
				aoff = lo
			}
			be.Sgemm(s.transA, s.transB, hi-lo, s.n, s.k, 1, o.as[t][aoff:], o.ac, o.bs[t], o.bc, 0, o.cs[t][lo*s.n:], s.n)
		}()
	}
	wg.Wait()
	flops := 2 * float64(s.m*s.n*s.k)
	if !s.split {
		flops *= benchThreads
	}
	return flops
}

// BenchmarkSgemmModel times each backend on each of the model's shapes
// (modelShape), one sub-benchmark each. Run it with -cpu 2 so that both
// goroutines run at once; BenchmarkSgemmTable compares them side by side.
func BenchmarkSgemmModel(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range modelShapes() {
		o := newOperands(r, s)
		for _, be := range benchBackends(b) {
			b.Run(s.name+"/"+shortName(be), func(b *testing.B) {
				flops := 0.0
				for i := 0; i < b.N; i++ {
					flops += s.run(be, o)
				}
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkSgemmTable measures every backend on every model shape in turns
// (round after round, so that a burst of load on a shared machine hits
// all alike), keeps each one's best round, and logs a table of GFLOP/s
// with go-asm's ratio to oneDNN and to gonum (gonum, slow, on fewer
// repetitions). Rounds are b.N:
//
//	go test ./blas -run '^$' -bench SgemmTable -benchtime 5x -cpu 2 -v
func BenchmarkSgemmTable(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := modelShapes()
	ops := make([]*operands, len(shapes))
	for i, s := range shapes {
		ops[i] = newOperands(r, s)
	}
	bes := benchBackends(b)
	best := make([][]float64, len(shapes))
	for i := range best {
		best[i] = make([]float64, len(bes))
	}
	for round := 0; round < b.N; round++ {
		for si, s := range shapes {
			for bi, be := range bes {
				reps := max(1, int(3e8/(2*float64(s.m*s.n*s.k))))
				if _, slow := be.(goBackend); slow {
					reps = max(1, reps/8)
				}
				s.run(be, ops[si]) // warm-up (oneDNN compiles its kernels)
				t0 := time.Now()
				flops := 0.0
				for range reps {
					flops += s.run(be, ops[si])
				}
				best[si][bi] = max(best[si][bi], flops/time.Since(t0).Seconds()/1e9)
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "GFLOP/s, %d goroutines, best of %d rounds\n%-20s", benchThreads, b.N, "shape")
	iDNN, iGo, iAsm := -1, -1, -1
	for bi, be := range bes {
		fmt.Fprintf(&sb, " %16s", shortName(be))
		switch be.(type) {
		case *oneDNN:
			iDNN = bi
		case goBackend:
			iGo = bi
		case *goAsm:
			if iAsm < 0 {
				iAsm = bi
			}
		}
	}
	sb.WriteString("   asm/onednn  asm/gonum\n")
	for si, s := range shapes {
		fmt.Fprintf(&sb, "%-20s", s.name)
		for bi := range bes {
			fmt.Fprintf(&sb, " %16.1f", best[si][bi])
		}
		if iAsm >= 0 && iDNN >= 0 {
			fmt.Fprintf(&sb, "   %10.2f", best[si][iAsm]/best[si][iDNN])
		}
		if iAsm >= 0 && iGo >= 0 {
			fmt.Fprintf(&sb, "  %9.1f", best[si][iAsm]/best[si][iGo])
		}
		sb.WriteString("\n")
	}
	b.Log("\n" + sb.String())
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
