package kernels

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/roformer-go/roformer/blas"
)

// Int8Linear is a linear layer's weight quantized for inference: int8 per
// output channel (symmetric, scale = max|w|/127 per row of W), done once.
// Its Forward quantizes the activations per row at run time (asymmetric
// uint8: a scale and a zero point per row), multiplies in int8 with int32
// accumulation and rescales to float32. The products go through go-asm's
// int8 kernels on the codes packed once into panels (blas.Int8Panels:
// AVX512_VNNI without AMX, where the outputs are a multiple of 32; a short
// query streams the codes at the memory's rate), else through oneDNN's
// matmul primitive with the int8 weights reordered once into the blocked
// layout it asks for (blas.NewS8Matmul: AMX-INT8 tiles where the CPU has
// them, VNNI or AVX-512/AVX2 elsewhere, as oneDNN chooses), or through a
// blas.Int8Backend (dnnl_gemm_u8s8s32, which packs the weights on every
// call and never uses AMX) where oneDNN offers the primitive only as its
// slow reference code.
//
// The scales stay outside oneDNN: a per-row activation scale and zero
// point are not among the scales and zero points oneDNN 2.6's matmul
// takes (one per output column, one zero point for the whole input), so
// the int32 products are rescaled, biased and added to the residual in one
// vectorised pass of ours.
//
// Why per row and asymmetric for the activations: the rows of a
// transformer's activations differ in range by an order of magnitude, and
// the feed-forward output's input (after GELU) lies in [−0.17, ∞), which a
// symmetric scale would spend half its codes on. The zero point costs one
// multiply-add per output: Σ_c (q_c − z)·w_c = Σ q_c·w_c − z·Σ w_c.
type Int8Linear struct {
	OC, C int
	w     []int8    // [OC, C]; nil once packed
	scale []float32 // [OC] weight scale per output channel
	wsum  []float32 // [OC] scale[o]·Σ_c w[o, c], for the zero point
	zeros []float32 // [OC] stands in for a missing bias or residual
	qmax  int       // 127, or 63 where u8·s8 sums saturate without VNNI
	gemm  blas.Int8Backend
	// packed holds the weights for oneDNN's int8 matmul; nil where the
	// products go through gemm or panels.
	packed *blas.PackedMatmul
	// panels holds the weights for go-asm's int8 kernels (AVX512_VNNI),
	// which replace oneDNN's matmul where they run: nil elsewhere.
	panels *blas.Int8Panels
}

// Bytes returns the bytes of the layer's weights: the codes (oneDNN's
// copies, or the plain ones) and the per-channel vectors.
func (q *Int8Linear) Bytes() int64 {
	n := int64(len(q.w)) + 4*int64(len(q.scale)+len(q.wsum)+len(q.zeros))
	if q.packed != nil {
		n += q.packed.Bytes()
	}
	if q.panels != nil {
		n += q.panels.Bytes()
	}
	return n
}

// int8Free holds the int8 layers' work buffers between calls, shared by
// every layer (a worker needs one set at a time). Not a sync.Pool: a pool
// is emptied at every garbage collection, and the buffers (up to
// rows × vocabulary int32s for the LM head) would be allocated again after
// each, doubling the heap's peak.
var int8Free struct {
	sync.Mutex
	list []*int8Scratch
}

func getInt8Scratch() *int8Scratch {
	int8Free.Lock()
	defer int8Free.Unlock()
	if n := len(int8Free.list); n > 0 {
		sc := int8Free.list[n-1]
		int8Free.list = int8Free.list[:n-1]
		return sc
	}
	return &int8Scratch{}
}

func putInt8Scratch(sc *int8Scratch) {
	int8Free.Lock()
	int8Free.list = append(int8Free.list, sc)
	int8Free.Unlock()
}

type int8Scratch struct {
	a      []uint8
	packed []uint8 // a packed for Int8Panels
	acc    []int32
	s, zs  []float32 // per row: scale, zero point·scale
}

// NewInt8Linear quantizes w [OC, C] (PyTorch's nn.Linear layout) and
// stores the int8 weights for oneDNN's matmul (see Int8Linear). It fails
// when oneDNN is missing.
func NewInt8Linear(w []float32, OC, C int) (*Int8Linear, error) {
	g, err := blas.Int8()
	if err != nil {
		return nil, err
	}
	qmax := blas.Int8WeightMax()
	codes := int8Codes.get(OC * C)
	defer int8Codes.put(codes)
	scale := make([]float32, OC)
	QuantizeInt8(codes, scale, w[:OC*C], OC, C, qmax)
	return newInt8Layer(codes, scale, OC, C, qmax, g)
}

// NewInt8LinearQuantized is NewInt8Linear for weights already quantized
// (a quantized model folder's): codes [OC, C] int8 and scale [OC], the
// weight being codes[o, c]·scale[o]. It keeps neither slice (the codes
// are copied into oneDNN's layout, or into a slice of its own). Each scale
// must be finite and positive and each code within ±127; it fails,
// naming the row, when they are not, and when oneDNN is missing. Where this
// CPU's products need codes within ±63 (Int8WeightMax: no VNNI), each row
// is quantized again to that range from its values.
func NewInt8LinearQuantized(codes []int8, scale []float32, OC, C int) (*Int8Linear, error) {
	if OC <= 0 || C <= 0 || len(codes) != OC*C || len(scale) != OC {
		return nil, fmt.Errorf("kernels: int8 weight of %d codes and %d scales for a %d×%d layer (want %d and %d)", len(codes), len(scale), OC, C, OC*C, OC)
	}
	for o, sc := range scale {
		if !(sc > 0) || math.IsInf(float64(sc), 0) {
			return nil, fmt.Errorf("kernels: int8 weight: row %d's scale is %v (want a finite scale above 0)", o, sc)
		}
	}
	for i, c := range codes {
		if c == -128 {
			return nil, fmt.Errorf("kernels: int8 weight: code -128 at row %d, column %d (symmetric codes lie in [-127, 127])", i/C, i%C)
		}
	}
	g, err := blas.Int8()
	if err != nil {
		return nil, err
	}
	qmax := blas.Int8WeightMax()
	if qmax < 127 {
		own := int8Codes.get(OC * C)
		defer int8Codes.put(own)
		sc := make([]float32, OC)
		requantizeInt8(own, sc, codes, scale, OC, C, qmax)
		codes, scale = own, sc
	} else {
		scale = slices.Clone(scale)
	}
	return newInt8Layer(codes, scale, OC, C, qmax, g)
}

// QuantizeInt8 quantizes w [OC, C] symmetrically per row (output channel)
// into codes [OC, C] within ±qmax and scale [OC]: scale[o] = max_c
// |w[o, c]| / qmax (1 for a row of zeros), codes[o, c] = w[o, c]/scale[o]
// rounded half to even. It is the quantization NewInt8Linear does, for a
// writer of quantized folders that must give the same codes.
func QuantizeInt8(codes []int8, scale []float32, w []float32, OC, C, qmax int) {
	for o := 0; o < OC; o++ {
		row := w[o*C : o*C+C]
		amax := float32(0)
		for _, v := range row {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		s := amax / float32(qmax)
		if s == 0 {
			s = 1
		}
		inv := 1 / s
		qr := codes[o*C : o*C+C]
		for c, v := range row {
			x := int32(math.RoundToEven(float64(v * inv)))
			qr[c] = int8(min(max(x, -int32(qmax)), int32(qmax)))
		}
		scale[o] = s
	}
}

// requantizeInt8 quantizes the weights codes·scale again within ±qmax.
func requantizeInt8(out []int8, outScale []float32, codes []int8, scale []float32, OC, C, qmax int) {
	row := make([]float32, C)
	for o := 0; o < OC; o++ {
		for c := range row {
			row[c] = float32(codes[o*C+c]) * scale[o]
		}
		QuantizeInt8(out[o*C:o*C+C], outScale[o:o+1], row, 1, C, qmax)
	}
}

// int8Codes lends the quantizer its [OC, C] buffer: the codes are copied
// into oneDNN's layout, so a model's layers are quantized one after
// another through one buffer instead of leaving a model's worth of codes
// for the collector.
var int8Codes codePool

type codePool struct {
	mu  sync.Mutex
	buf []int8
}

func (p *codePool) get(n int) []int8 {
	p.mu.Lock()
	b := p.buf
	p.buf = nil
	p.mu.Unlock()
	if cap(b) < n {
		return make([]int8, n)
	}
	return b[:n]
}

func (p *codePool) put(b []int8) {
	p.mu.Lock()
	if cap(b) > cap(p.buf) {
		p.buf = b
	}
	p.mu.Unlock()
}

// newInt8Layer makes the layer of codes [OC, C] (not kept) and scale [OC]
// (kept) and packs it.
func newInt8Layer(codes []int8, scale []float32, OC, C, qmax int, g blas.Int8Backend) (*Int8Linear, error) {
	q := newInt8LinearFrom(codes, scale, OC, C, qmax, g)
	if err := q.pack(); err != nil {
		return nil, err
	}
	if q.w != nil { // not packed: the layer keeps codes of its own
		q.w = slices.Clone(q.w)
	}
	return q, nil
}

// pack moves q's weights into go-asm's int8 panels where they run (and
// the outputs are a multiple of 32), else into oneDNN's int8 matmul,
// unless oneDNN would run it with its reference code (then q keeps its
// GEMM backend). Both sum exactly, so the choice changes no bit.
func (q *Int8Linear) pack() error {
	if blas.Int8PanelsOK() && q.OC%32 == 0 && q.qmax <= 127 {
		p, err := blas.NewInt8Panels(q.w, q.OC, q.C)
		if err != nil {
			return err
		}
		q.panels, q.w = p, nil
		return nil
	}
	l, err := blas.NewS8Matmul(q.w, q.OC, q.C)
	if err != nil {
		return err
	}
	if impl := l.Impl(int8PackRows); strings.HasPrefix(impl, "ref") {
		return nil
	}
	q.packed, q.w = l, nil
	return nil
}

// int8PackRows is the row count whose implementation pack asks oneDNN for:
// the rows of a worker's share of a 128-token sequence or more.
const int8PackRows = 64

// newInt8Linear quantizes w into a layer with backend g, unpacked (tests
// run it through g).
func newInt8Linear(w []float32, OC, C, qmax int, g blas.Int8Backend) *Int8Linear {
	codes := make([]int8, OC*C)
	scale := make([]float32, OC)
	QuantizeInt8(codes, scale, w[:OC*C], OC, C, qmax)
	return newInt8LinearFrom(codes, scale, OC, C, qmax, g)
}

// newInt8LinearFrom makes the unpacked layer that owns codes and scale.
func newInt8LinearFrom(codes []int8, scale []float32, OC, C, qmax int, g blas.Int8Backend) *Int8Linear {
	q := &Int8Linear{OC: OC, C: C, w: codes, scale: scale, wsum: make([]float32, OC), zeros: make([]float32, OC), qmax: qmax, gemm: g}
	for o := 0; o < OC; o++ {
		var sum int32
		for _, x := range codes[o*C : o*C+C] {
			sum += int32(x)
		}
		q.wsum[o] = scale[o] * float32(sum)
	}
	return q
}

// Dequantized returns the weight as the products see it, [OC, C] float32
// (tests compare the layer with the float product of these weights), or
// nil once the weights are packed for oneDNN's matmul (NewInt8Linear),
// whose layout is oneDNN's own.
func (q *Int8Linear) Dequantized() []float32 {
	if q.w == nil {
		return nil
	}
	out := make([]float32, q.OC*q.C)
	for o := 0; o < q.OC; o++ {
		for c := 0; c < q.C; c++ {
			out[o*q.C+c] = float32(q.w[o*q.C+c]) * q.scale[o]
		}
	}
	return out
}

// Forward computes out = res + inp·Wᵀ + bias with int8 products.
//
//	out  [BT, OC]  may alias res; not inp
//	inp  [BT, C]
//	bias [OC] or nil
//	res  [BT, OC] or nil
func (q *Int8Linear) Forward(out, inp, bias, res []float32, BT int) {
	C, OC := q.C, q.OC
	if q.panels != nil && splitColumns(BT, OC) {
		// Few rows on the panels: the rows quantized and packed once, each
		// worker takes a block of output columns and reads only its share
		// of the codes.
		sc := getInt8Scratch()
		defer putInt8Scratch(sc)
		a, acc := sc.quantize(inp, 0, BT, C, OC)
		if cap(sc.packed) < q.panels.LenA(BT) {
			sc.packed = make([]uint8, q.panels.LenA(BT))
		}
		ap := q.panels.PackA(sc.packed, BT, a, C)
		u := q.panels.Unit()
		parallelFor(OC/u, max(colChunk/u, 1), func(plo, phi int) {
			q.panels.ProductPacked(BT, plo*u, phi*u, ap, acc, OC)
			q.dequant(out, acc, bias, res, sc, 0, BT, plo*u, phi*u)
		})
		return
	}
	parallelFor(BT, 16, func(lo, hi int) {
		n := hi - lo
		sc := getInt8Scratch()
		a, acc := sc.quantize(inp, lo, hi, C, OC)
		switch {
		case q.panels != nil:
			q.panels.Product(n, 0, OC, a, C, acc, OC)
		case q.packed != nil:
			q.packed.ForwardU8(acc, a, n)
		default:
			q.gemm.GemmU8S8S32(false, true, n, OC, C, a, C, q.w, C, acc, OC)
		}
		q.dequant(out, acc, bias, res, sc, lo, hi, 0, OC)
		putInt8Scratch(sc)
	})
}

// quantize quantizes rows lo..hi of inp [·, C] into sc (codes, scales and
// zero points; row 0 is row lo) and returns the codes and the int32 sums'
// buffer for OC outputs.
func (sc *int8Scratch) quantize(inp []float32, lo, hi, C, OC int) ([]uint8, []int32) {
	n := hi - lo
	if cap(sc.a) < n*C {
		sc.a = make([]uint8, n*C)
	}
	if cap(sc.acc) < n*OC {
		sc.acc = make([]int32, n*OC)
	}
	if cap(sc.s) < n {
		sc.s, sc.zs = make([]float32, n), make([]float32, n)
	}
	a := sc.a[:n*C]
	for r := 0; r < n; r++ {
		sc.s[r], sc.zs[r] = quantizeRowU8(a[r*C:r*C+C], inp[(lo+r)*C:(lo+r)*C+C])
	}
	return a, sc.acc[:n*OC]
}

// dequant writes rows lo..hi, columns clo..chi of out from acc (whose row
// 0 is row lo, sc's quantization of it): res + bias + the rescaled sums.
func (q *Int8Linear) dequant(out []float32, acc []int32, bias, res []float32, sc *int8Scratch, lo, hi, clo, chi int) {
	OC := q.OC
	var b []float32
	if bias != nil {
		b = bias[clo:chi]
	}
	for r := lo; r < hi; r++ {
		var rs []float32
		if res != nil {
			rs = res[r*OC+clo : r*OC+chi]
		}
		i := r - lo
		dequantRow(out[r*OC+clo:r*OC+chi], acc[i*OC+clo:i*OC+chi], q.scale[clo:chi], q.wsum[clo:chi], b, rs, sc.s[i], sc.zs[i], q.zeros[clo:chi])
	}
}

// quantizeRowU8 quantizes x to uint8 with q = round(x/s) + z, the range
// [min(x, 0), max(x, 0)] mapped onto [0, 255] (0 is exact), and returns s
// and z·s.
func quantizeRowU8(q []uint8, x []float32) (s, zs float32) {
	lo, hi := float32(0), float32(0)
	n := 0
	if useAVX512 {
		n = len(x) &^ 15
		if n > 0 {
			l, h := minMax512(&x[0], n)
			lo, hi = min(lo, l), max(hi, h)
		}
	}
	for _, v := range x[n:] {
		lo = min(lo, v)
		hi = max(hi, v)
	}
	if hi == lo {
		for i := range q {
			q[i] = 0
		}
		return 1, 0
	}
	s = (hi - lo) / 255
	inv := 1 / s
	z := float32(math.RoundToEven(float64(-lo * inv)))
	// Round half away from zero via +0.5 and truncation of a non-negative
	// value: v·inv + z lies in [−0.5, 255.5] up to rounding.
	zh := z + 0.5
	if n > 0 {
		quantU8512(&q[0], &x[0], n, inv, zh)
	}
	for i := n; i < len(x); i++ {
		v := x[i]
		f := v*inv + zh
		if f < 0 {
			f = 0
		} else if f > 255 {
			f = 255
		}
		q[i] = uint8(f)
	}
	return s, z * s
}

// dequantRow writes o = res + bias + s·(scale⊙acc) − zs·wsum: the int32
// products rescaled, the zero point's share removed.
func dequantRow(o []float32, acc []int32, scale, wsum, bias, res []float32, s, zs float32, zeros []float32) {
	n := len(o)
	acc, scale, wsum = acc[:n], scale[:n], wsum[:n]
	if k := n &^ 15; useAVX512 && k > 0 {
		b, r := bias, res
		if b == nil {
			b = zeros
		}
		if r == nil {
			r = zeros
		}
		dequant512(&o[0], &acc[0], &scale[0], &wsum[0], &b[0], &r[0], k, s, zs)
		o, acc, scale, wsum = o[k:], acc[k:], scale[k:], wsum[k:]
		if bias != nil {
			bias = bias[k:]
		}
		if res != nil {
			res = res[k:]
		}
		n -= k
	}
	switch {
	case bias != nil && res != nil:
		bias, res = bias[:n], res[:n]
		for j := range o {
			o[j] = res[j] + bias[j] + s*(scale[j]*float32(acc[j])) - zs*wsum[j]
		}
	case bias != nil:
		bias = bias[:n]
		for j := range o {
			o[j] = bias[j] + s*(scale[j]*float32(acc[j])) - zs*wsum[j]
		}
	case res != nil:
		res = res[:n]
		for j := range o {
			o[j] = res[j] + s*(scale[j]*float32(acc[j])) - zs*wsum[j]
		}
	default:
		for j := range o {
			o[j] = s*(scale[j]*float32(acc[j])) - zs*wsum[j]
		}
	}
}

// String describes the layer and where its products run.
func (q *Int8Linear) String() string {
	via := q.gemm.Name()
	switch {
	case q.panels != nil:
		via = "go-asm int8 panels (avx512_vnni)"
	case q.packed != nil:
		via = "matmul " + q.packed.Impl(int8PackRows)
	}
	return fmt.Sprintf("int8 linear [%d, %d] (weights ±%d, per channel; activations u8 per row; %s)", q.OC, q.C, q.qmax, via)
}
