package kernels

import (
	"fmt"

	"github.com/roformer-go/roformer/blas"
)

// PanelLinear is a linear layer's weight packed once into go-asm's panels
// (blas.WeightPanels), for float32 inference on go-asm: the layers'
// products then stream the packed weight instead of packing it on every
// call. Its outputs are MatmulForward's on the plain weight to the bit,
// whatever the rows: the same split, the same values, blocks and kernels.
type PanelLinear struct {
	OC, C int
	w     *blas.WeightPanels
}

// NewPanelLinear packs w [OC, C] (not kept). It fails unless the layers'
// backend is go-asm.
func NewPanelLinear(w []float32, OC, C int) (*PanelLinear, error) {
	p, err := blas.NewWeightPanels(w, OC, C)
	if err != nil {
		return nil, err
	}
	return &PanelLinear{OC: OC, C: C, w: p}, nil
}

// Bytes returns the bytes of the packed weight.
func (q *PanelLinear) Bytes() int64 { return q.w.Bytes() }

// Forward computes out = res + inp·Wᵀ + bias, split over the workers as
// MatmulForward splits it (columns for few rows, rows otherwise).
//
//	out  [BT, OC]  may alias res; not inp
//	inp  [BT, C]
//	bias [OC] or nil
//	res  [BT, OC] or nil
func (q *PanelLinear) Forward(out, inp, bias, res []float32, BT int) {
	C, OC := q.C, q.OC
	if splitColumns(BT, OC) {
		u := q.w.Unit()
		parallelFor((OC+u-1)/u, max(colChunk/u, 1), func(plo, phi int) {
			lo, hi := plo*u, min(phi*u, OC)
			beta := startCols(out, bias, res, lo, hi, BT, OC)
			q.w.Sgemm(BT, lo, hi, inp[:BT*C], C, beta, out[:BT*OC], OC)
		})
		return
	}
	parallelFor(BT, 16, func(lo, hi int) {
		o := out[lo*OC : hi*OC]
		beta := startRows(o, bias, res, lo, hi, OC)
		q.w.Sgemm(hi-lo, 0, OC, inp[lo*C:hi*C], C, beta, o, OC)
	})
}

// String describes the layer: "fp32 linear [OC, C] (go-asm panels)".
func (q *PanelLinear) String() string {
	return fmt.Sprintf("fp32 linear [%d, %d] (go-asm panels)", q.OC, q.C)
}
