package roformer

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/tensor"
)

// rowsBatch is a batch of 4 rows of 5 tokens, the last two padded, and
// rows lo … hi−1 of it.
func rowsBatch(lo, hi int) *Batch {
	ids := []int32{2, 5, 7, 3, 8, 9, 1, 4, 6, 2, 3, 3, 8, 0, 0, 7, 1, 2, 0, 0}
	mask := []int32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}
	types := []int32{0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0}
	const T = 5
	return &Batch{InputIDs: ids[lo*T : hi*T], AttentionMask: mask[lo*T : hi*T], TokenTypeIDs: types[lo*T : hi*T], B: hi - lo, T: T}
}

// rowSplits are the sub-batches a 4-row batch is encoded in.
var rowSplits = [][2]int{{0, 1}, {1, 3}, {3, 4}}

// dropoutRowCases are the encoder paths with dropout: the saved-probability
// attention, the fused one (fusedTrainMinT 0), relative positions, and an
// embedding projection (E ≠ H).
func dropoutRowCases() []struct {
	name string
	minT int
	mod  func(*Config)
} {
	drop := func(c *Config) { c.HiddenDropoutProb, c.AttentionProbsDropoutProb = 0.2, 0.2 }
	return []struct {
		name string
		minT int
		mod  func(*Config)
	}{
		{"saved", math.MaxInt, drop},
		{"fused", 0, drop},
		{"relative", math.MaxInt, func(c *Config) { drop(c); switchConfig(PosRelative, AttnSoftmax)(c) }},
		{"project", 0, func(c *Config) { drop(c); c.EmbeddingSize = 4 }},
	}
}

func gradsOf(m *Model) [][]float32 {
	var g [][]float32
	for _, p := range m.Params() {
		g = append(g, append([]float32(nil), p.Grad...))
	}
	return g
}

// TrainEncode with StepOptions.RowOffset on rows lo… of a batch gives those
// rows of the whole batch's hidden state with dropout (the same masks at
// every site), and BackwardHidden over the sub-batches adds up to the
// whole batch's gradient; without the offset the rows draw other masks.
func TestDropoutRowOffset(t *testing.T) {
	defer func(v int) { fusedTrainMinT = v }(fusedTrainMinT)
	ctx := context.Background()
	for i, c := range dropoutRowCases() {
		t.Run(c.name, func(t *testing.T) {
			fusedTrainMinT = c.minT
			m := randomModel(t, tinyConfig(c.mod), HeadBase, uint64(500+i))
			H := m.Config.HiddenSize
			whole := rowsBatch(0, 4)
			n := whole.B * whole.T * H
			w := testutil.RandN(testutil.Rand(501), n, 1)
			opts := StepOptions{Dropout: true, Seed: 77}
			m.ZeroGrad()
			s := m.NewState(whole.B, whole.T, true)
			x, err := m.TrainEncode(ctx, s, whole, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := append([]float32(nil), x...)
			if err := m.BackwardHidden(ctx, s, w); err != nil {
				t.Fatal(err)
			}
			wantG := gradsOf(m)
			m.ZeroGrad()
			row := whole.T * H
			for _, sp := range rowSplits {
				lo, hi := sp[0], sp[1]
				b := rowsBatch(lo, hi)
				s := m.NewState(b.B, b.T, true)
				o := opts
				o.RowOffset = lo
				x, err := m.TrainEncode(ctx, s, b, o)
				if err != nil {
					t.Fatal(err)
				}
				testutil.AssertClose(t, fmt.Sprintf("rows %d–%d", lo, hi-1), x, want[lo*row:hi*row], 1e-6, 1e-5)
				if err := m.BackwardHidden(ctx, s, w[lo*row:hi*row]); err != nil {
					t.Fatal(err)
				}
				if lo > 0 {
					y, err := m.TrainEncode(ctx, m.NewState(b.B, b.T, true), b, opts)
					if err != nil {
						t.Fatal(err)
					}
					if d, _ := tensor.MaxAbsDiff(y, want[lo*row:hi*row]); d < 1e-3 {
						t.Errorf("rows %d–%d without the offset: hidden states within %.3g of the whole batch's: is dropout on?", lo, hi-1, d)
					}
				}
			}
			for k, p := range m.Params() {
				// The key bias's gradient is 0 in exact arithmetic (softmax
				// does not see a shift of a query's scores), so its float32
				// value is rounding noise: hence the floor of the scale (an
				// absolute 1e-6).
				d, at := tensor.MaxAbsDiff(p.Grad, wantG[k])
				if scale := math.Max(tensor.MaxAbs(wantG[k]), 0.1); d/scale > 1e-5 {
					t.Errorf("%s: the sub-batches' gradient differs by %.3g at %d (%v, whole batch %v), %.3g of the largest", p.Name, d, at, p.Grad[at], wantG[k][at], d/scale)
				}
			}
			if _, err := m.TrainEncode(ctx, m.NewState(1, 5, true), rowsBatch(0, 1), StepOptions{Dropout: true, RowOffset: -1}); err == nil {
				t.Error("TrainEncode took RowOffset −1")
			}
		})
	}
}

// The heads' dropout takes the offset too: ForwardBackward of the sequence
// and token classification heads over sub-batches with RowOffset gives the
// whole batch's loss and gradient (each sub-batch weighted by its share of
// the labelled terms).
func TestDropoutRowOffsetHead(t *testing.T) {
	ctx := context.Background()
	for i, head := range []Head{HeadSequenceCls, HeadTokenCls} {
		t.Run(string(head), func(t *testing.T) {
			m := randomModel(t, tinyConfig(dropoutRowCases()[0].mod), head, uint64(600+i))
			labels := func(lo, hi int) *Labels {
				if head == HeadSequenceCls {
					return &Labels{IDs: []int32{2, 0, 1, 1}[lo:hi]}
				}
				ids := []int32{0, 1, 2, 1, 0, 2, 2, 1, 0, 0, 1, -100, 2, -100, -100, 0, 1, 2, -100, -100}
				return &Labels{IDs: ids[lo*5 : hi*5]}
			}
			opts := StepOptions{Dropout: true, Seed: 9}
			m.ZeroGrad()
			r, err := m.ForwardBackward(ctx, m.NewState(4, 5, true), rowsBatch(0, 4), labels(0, 4), opts)
			if err != nil {
				t.Fatal(err)
			}
			wantG := gradsOf(m)
			sum := make([][]float32, len(wantG))
			for k := range sum {
				sum[k] = make([]float32, len(wantG[k]))
			}
			loss := 0.0
			for _, sp := range rowSplits {
				lo, hi := sp[0], sp[1]
				m.ZeroGrad()
				o := opts
				o.RowOffset = lo
				rs, err := m.ForwardBackward(ctx, m.NewState(hi-lo, 5, true), rowsBatch(lo, hi), labels(lo, hi), o)
				if err != nil {
					t.Fatal(err)
				}
				share := float64(rs.N) / float64(r.N)
				loss += rs.Loss * share
				for k, g := range gradsOf(m) {
					for j, v := range g {
						sum[k][j] += float32(share) * v
					}
				}
			}
			if math.Abs(loss-r.Loss) > 1e-6*math.Abs(r.Loss) {
				t.Errorf("loss %.9g over the sub-batches, %.9g whole", loss, r.Loss)
			}
			for k, p := range m.Params() {
				d, at := tensor.MaxAbsDiff(sum[k], wantG[k])
				if scale := math.Max(tensor.MaxAbs(wantG[k]), 1e-6); d/scale > 1e-5 {
					t.Errorf("%s: the sub-batches' gradient differs by %.3g at %d (%v, whole batch %v), %.3g of the largest", p.Name, d, at, sum[k][at], wantG[k][at], d/scale)
				}
			}
		})
	}
}
