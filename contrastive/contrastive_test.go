package contrastive

import (
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/sentence"
)

// The references below are written from the formulas directly, in float64,
// as sentence-transformers computes them (cos_sim, cross_entropy, the
// CoSENT matrix with its 1e12 mask and the prepended 0), with none of the
// package's code.

func cos64(x, y []float32) float64 {
	var xy, xx, yy float64
	for i := range x {
		xy += float64(x[i]) * float64(y[i])
		xx += float64(x[i]) * float64(x[i])
		yy += float64(y[i]) * float64(y[i])
	}
	return xy / (math.Max(math.Sqrt(xx), 1e-12) * math.Max(math.Sqrt(yy), 1e-12))
}

func refMNRL(a, c []float32, B, M, stride, d int, scale float64, symmetric bool) float64 {
	S := make([][]float64, B)
	for i := range S {
		S[i] = make([]float64, M)
		for j := range S[i] {
			S[i][j] = scale * cos64(a[i*stride:i*stride+d], c[j*stride:j*stride+d])
		}
	}
	ce := func(logits []float64, target int) float64 {
		z := 0.0
		for _, l := range logits {
			z += math.Exp(l)
		}
		return -math.Log(math.Exp(logits[target]) / z)
	}
	fwd := 0.0
	for i := range B {
		fwd += ce(S[i], i) / float64(B)
	}
	if !symmetric {
		return fwd
	}
	bwd := 0.0
	for j := range B {
		col := make([]float64, B)
		for i := range B {
			col[i] = S[i][j]
		}
		bwd += ce(col, j) / float64(B)
	}
	return (fwd + bwd) / 2
}

func refCoSENT(a, b []float32, labels []float64, B, stride, d int, scale float64) float64 {
	s := make([]float64, B)
	for i := range s {
		s[i] = scale * cos64(a[i*stride:i*stride+d], b[i*stride:i*stride+d])
	}
	terms := []float64{0}
	for i := range B {
		for j := range B {
			v := s[i] - s[j]
			if !(labels[i] < labels[j]) {
				v -= 1e12
			}
			terms = append(terms, v)
		}
	}
	m := math.Inf(-1)
	for _, v := range terms {
		m = math.Max(m, v)
	}
	z := 0.0
	for _, v := range terms {
		z += math.Exp(v - m)
	}
	return m + math.Log(z)
}

func near(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
		t.Errorf("%s: got %.12g, want %.12g", name, got, want)
	}
}

// Each loss against its float64 reference, and its gradient against
// finite differences of the forward function, at the full size and
// truncated (Matryoshka), with one row of zeros (the norm's clamp).
func TestMNRL(t *testing.T) {
	r := testutil.Rand(1)
	const B, stride = 3, 5
	for _, k := range []int{1, 2, 3} { // candidate blocks: positives, + 1 or 2 negatives
		for _, sym := range []bool{false, true} {
			for _, d := range []int{stride, 2} {
				name := fmt.Sprintf("blocks%d_sym%v_d%d", k, sym, d)
				M := B * k
				a, c := testutil.RandN(r, B*stride, 1), testutil.RandN(r, M*stride, 1)
				scale := 2.5
				near(t, name+" forward", MNRLForward(a, c, B, M, stride, d, scale, sym), refMNRL(a, c, B, M, stride, d, scale, sym), 1e-12)
				da, dc := make([]float32, B*stride), make([]float32, M*stride)
				loss := MNRLBackward(da, dc, a, c, B, M, stride, d, scale, sym, 1)
				near(t, name+" backward's loss", loss, refMNRL(a, c, B, M, stride, d, scale, sym), 1e-12)
				f := func() float64 { return refMNRL(a, c, B, M, stride, d, scale, sym) }
				testutil.GradCheck(t, name+" d/da", a, da, f, 1e-3, 1e-4)
				testutil.GradCheck(t, name+" d/dc", c, dc, f, 1e-3, 1e-4)
				for i := range stride {
					if i >= d && (da[i] != 0 || dc[i] != 0) {
						t.Fatalf("%s: gradient %v, %v past the truncation at %d", name, da[i], dc[i], i)
					}
				}
			}
		}
	}
}

func TestCoSENT(t *testing.T) {
	r := testutil.Rand(2)
	const B, stride = 4, 6
	for _, d := range []int{stride, 3} {
		a, b := testutil.RandN(r, B*stride, 1), testutil.RandN(r, B*stride, 1)
		labels := []float64{0.2, 1, 0.2, 0.7} // a tie, which adds no term
		name := fmt.Sprintf("d%d", d)
		near(t, name+" forward", CoSENTForward(a, b, labels, B, stride, d, 20), refCoSENT(a, b, labels, B, stride, d, 20), 1e-12)
		da, db := make([]float32, B*stride), make([]float32, B*stride)
		CoSENTBackward(da, db, a, b, labels, B, stride, d, 20, 1)
		f := func() float64 { return refCoSENT(a, b, labels, B, stride, d, 20) }
		testutil.GradCheck(t, name+" d/da", a, da, f, 1e-3, 1e-4)
		testutil.GradCheck(t, name+" d/db", b, db, f, 1e-3, 1e-4)
	}
	// All labels equal: no ordered pair, loss log 1 = 0, no gradient.
	a, b := testutil.RandN(r, B*stride, 1), testutil.RandN(r, B*stride, 1)
	da, db := make([]float32, B*stride), make([]float32, B*stride)
	if l := CoSENTBackward(da, db, a, b, []float64{1, 1, 1, 1}, B, stride, stride, 20, 1); l != 0 || testutil.Dot(da, da)+testutil.Dot(db, db) != 0 {
		t.Errorf("equal labels: loss %v, gradients not zero", l)
	}
}

// Objective: MNRL with hard negatives and CoSENT, each with Matryoshka
// dims, against the weighted sum of the references and finite differences.
func TestObjective(t *testing.T) {
	r := testutil.Rand(3)
	const B, dim = 3, 6
	for _, o := range []Objective{
		{Kind: KindMNRL, Scale: 20, Symmetric: true},
		{Kind: KindMNRL, Scale: 5, Dims: []int{6, 4, 2}},
		{Kind: KindCoSENT, Scale: 20, Dims: []int{6, 3}, Weights: []float64{1, 0.5}},
	} {
		if err := o.Validate(dim); err != nil {
			t.Fatal(err)
		}
		ncol := 3
		if o.Kind == KindCoSENT {
			ncol = 2
		}
		cols, dcols := make([][]float32, ncol), make([][]float32, ncol)
		for i := range cols {
			cols[i], dcols[i] = testutil.RandN(r, B*dim, 1), make([]float32, B*dim)
		}
		labels := []float64{0.1, 0.9, 0.5}
		ref := func() float64 {
			dims, ws := o.terms(dim)
			s := 0.0
			for k, d := range dims {
				if o.Kind == KindCoSENT {
					s += ws[k] * refCoSENT(cols[0], cols[1], labels, B, dim, d, o.Scale)
				} else {
					c := append(append([]float32(nil), cols[1]...), cols[2]...)
					s += ws[k] * refMNRL(cols[0], c, B, 2*B, dim, d, o.Scale, o.Symmetric)
				}
			}
			return s
		}
		name := fmt.Sprintf("%s%v", o.Kind, o.Dims)
		near(t, name, o.Forward(cols, labels, B, dim), ref(), 1e-12)
		near(t, name+" backward", o.Backward(dcols, cols, labels, B, dim), ref(), 1e-12)
		for i := range cols {
			testutil.GradCheck(t, fmt.Sprintf("%s column %d", name, i), cols[i], dcols[i], ref, 1e-3, 1e-4)
		}
	}
	for _, bad := range []Objective{{Kind: "triplet", Scale: 20}, {Kind: KindCoSENT, Scale: 20, Symmetric: true}, {Kind: KindMNRL, Scale: 0},
		{Kind: KindMNRL, Scale: 20, Dims: []int{7}}, {Kind: KindMNRL, Scale: 20, Dims: []int{4}, Weights: []float64{1, 1}}} {
		if err := bad.Validate(dim); err == nil {
			t.Errorf("%+v passed Validate", bad)
		}
	}
}

func TestMatryoshkaDims(t *testing.T) {
	for _, c := range []struct {
		s    string
		dim  int
		want string
	}{{"", 768, "[768 512 256 128 64]"}, {"", 256, "[256 128 64]"}, {"", 8, "[8]"}, {"64, 768,256", 768, "[768 256 64]"}} {
		got, err := MatryoshkaDims(c.s, c.dim)
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("MatryoshkaDims(%q, %d) = %v, %v; want %s", c.s, c.dim, got, err, c.want)
		}
	}
	for _, s := range []string{"0", "769", "12x", "64,,32"} {
		if _, err := MatryoshkaDims(s, 768); err == nil {
			t.Errorf("MatryoshkaDims(%q, 768) passed", s)
		}
	}
}

// The pooling equals package sentence's (sentence-transformers' formulas,
// checked there against its vectors), and the backward of pooling and
// normalization matches finite differences of a random projection.
func TestPoolAndNormalize(t *testing.T) {
	r := testutil.Rand(4)
	const B, T, H = 3, 4, 5
	h := testutil.RandN(r, B*T*H, 1)
	mask := []int32{1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0} // padding, a full row, and a row without tokens
	out := make([]float32, B*H)
	for _, mode := range []string{"mean", "cls"} {
		p, err := sentence.ParseModes(mode, H)
		if err != nil {
			t.Fatal(err)
		}
		fwd := func() {
			if mode == "mean" {
				MeanPoolForward(out, h, mask, B, T, H)
			} else {
				CLSPoolForward(out, h, B, T, H)
			}
		}
		fwd()
		for b := range B {
			testutil.AssertClose(t, fmt.Sprintf("%s row %d", mode, b), out[b*H:(b+1)*H], p.Pool(h[b*T*H:(b+1)*T*H], mask[b*T:(b+1)*T], T, 0), 0, 0)
		}
		w := testutil.RandN(r, B*H, 1)
		dh := testutil.RandN(r, B*T*H, 1) // garbage: backward writes every value
		if mode == "mean" {
			MeanPoolBackward(dh, w, mask, B, T, H)
		} else {
			CLSPoolBackward(dh, w, B, T, H)
		}
		testutil.GradCheck(t, mode, h, dh, func() float64 { fwd(); return testutil.Dot(out, w) }, 1e-3, 1e-4)
	}
	x := testutil.RandN(r, B*H, 1)
	copy(x[2*H:3*H], make([]float32, H)) // a zero row: the clamp at 1e-12
	w := testutil.RandN(r, B*H, 1)
	u := make([]float32, B*H)
	dx := make([]float32, B*H)
	NormalizeBackward(dx, w, x, B, H)
	testutil.GradCheck(t, "normalize", x[:2*H], dx[:2*H], func() float64 { NormalizeForward(u, x, B, H); return testutil.Dot(u, w) }, 1e-3, 1e-4)
	for j := 2 * H; j < 3*H; j++ {
		if want := float64(w[j]) / 1e-12; math.Abs(float64(dx[j])-want) > 1e-6*math.Abs(want) {
			t.Errorf("zero row: d/dx[%d] = %v, want dout/1e-12 = %v", j, dx[j], want)
		}
	}
	NormalizeForward(u, x, B, H)
	for i := range 2 {
		if n := testutil.Dot(u[i*H:(i+1)*H], u[i*H:(i+1)*H]); math.Abs(n-1) > 1e-6 {
			t.Errorf("row %d: |u|² = %v", i, n)
		}
	}
}
