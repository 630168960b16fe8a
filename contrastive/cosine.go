package contrastive

import "math"

// normEps is the least norm the cosine divides by (torch's F.normalize,
// which sentence-transformers' cos_sim and pairwise_cos_sim use).
const normEps = 1e-12

// unit holds the unit rows of an [N, stride] matrix read over its first d
// values: u [N, d] in float64 and each row's norm, clamped to normEps.
type unit struct {
	u    []float64
	norm []float64
	d    int
}

func newUnit(x []float32, N, stride, d int) unit {
	v := unit{u: make([]float64, N*d), norm: make([]float64, N), d: d}
	for i := range N {
		row := x[i*stride : i*stride+d]
		s := 0.0
		for _, a := range row {
			s += float64(a) * float64(a)
		}
		n := max(math.Sqrt(s), normEps)
		v.norm[i] = n
		for j, a := range row {
			v.u[i*d+j] = float64(a) / n
		}
	}
	return v
}

func (v unit) row(i int) []float64 { return v.u[i*v.d : (i+1)*v.d] }

// backward adds w · ∂/∂x of a loss into dx [N, stride] (first d values of
// each row) from du [N, d], the gradient with respect to the unit rows:
//
//	dx = w (du − u (u·du)) / ‖x‖        (‖x‖ ≥ 1e-12)
//	dx = w du / 1e-12                  (‖x‖ < 1e-12, where u = x/1e-12)
func (v unit) backward(dx []float32, du []float64, stride int, w float64) {
	d := v.d
	for i := range v.norm {
		u, g := v.row(i), du[i*d:(i+1)*d]
		n := v.norm[i]
		dot := 0.0
		if n > normEps {
			for j := range u {
				dot += u[j] * g[j]
			}
		}
		out := dx[i*stride : i*stride+d]
		for j := range out {
			out[j] += float32(w * (g[j] - u[j]*dot) / n)
		}
	}
}

// NormalizeForward writes the unit rows of x [N, D]: out [N, D] (=),
// out[i] = x[i] / max(‖x[i]‖₂, 1e-12), in float64.
func NormalizeForward(out, x []float32, N, D int) {
	v := newUnit(x, N, D, D)
	for i, a := range v.u {
		out[i] = float32(a)
	}
}

// NormalizeBackward adds the gradient of NormalizeForward's input into dx
// [N, D] from dout [N, D]: dx[i] += (dout[i] − u[i](u[i]·dout[i])) / ‖x[i]‖
// with u[i] the unit row (dout[i] / 1e-12 where ‖x[i]‖ < 1e-12).
func NormalizeBackward(dx, dout, x []float32, N, D int) {
	v := newUnit(x, N, D, D)
	du := make([]float64, N*D)
	for i, g := range dout[:N*D] {
		du[i] = float64(g)
	}
	v.backward(dx, du, D, 1)
}
