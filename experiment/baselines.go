package experiment

import (
	"math"
	"math/rand/v2"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tensor"
)

// VaswaniWordInit redraws the word embedding table of m from N(0, 1/E),
// E the embedding width, as Vaswani et al. (2017) draw the table that they
// multiply by √E (scale_embedding) before adding their sinusoids: the
// scaled entries then have standard deviation 1, the size of a sinusoid's
// entries, so that neither term outweighs the other. HF's initialisation,
// N(0, initializer_range²) with initializer_range 0.02, gives scaled
// entries of sd 0.02·√E: 0.16 at E = 64, 0.23 at E = 128.
//
// The draw uses its own stream of seed, so the other parameters keep the
// values Init gave them; the padding row stays 0. It returns m.
func VaswaniWordInit(m *roformer.Model, seed uint64) *roformer.Model {
	w := m.Encoder.Embeddings.Word
	E := m.Config.EmbeddingSize
	if w == nil || E < 1 {
		return m
	}
	r := rand.New(rand.NewPCG(seed, 0x76617377616e69)) // "vaswani"
	std := 1 / math.Sqrt(float64(E))
	for i := range w.Data {
		w.Data[i] = float32(r.NormFloat64() * std)
	}
	if pad := m.Config.PadID(); pad >= 0 && (pad+1)*E <= len(w.Data) {
		clear(w.Data[pad*E : pad*E+E])
	}
	return m
}

// positionStepper trains a learned position table at its own rate: the
// table is taken out of the run's stepper and updated by a second AdamW at
// the scheduled rate times scale, its gradient clipped on its own at the
// run's threshold.
type positionStepper struct {
	table *tensor.Param
	opt   *optim.AdamW
	scale float64
	clip  float64
}

// newRunStepper returns the run's stepper for m and, when m has a learned
// position table and positionLR is positive and not 1, the table's own
// stepper (nil otherwise; the table then trains with the rest).
func newRunStepper(m *roformer.Model, s Schedule, positionLR float64) (*stepper, *positionStepper, error) {
	table := m.Encoder.Embeddings.Position
	if table == nil || positionLR <= 0 || positionLR == 1 {
		st, err := newStepper(m, s)
		return st, nil, err
	}
	var rest []*tensor.Param
	for _, p := range m.Params() {
		if p != table {
			rest = append(rest, p)
		}
	}
	st, err := newParamStepper(rest, s)
	if err != nil {
		return nil, nil, err
	}
	opt, err := optim.NewAdamW([]*tensor.Param{table}, optim.DefaultAdamWConfig(s.WeightDecay))
	if err != nil {
		return nil, nil, err
	}
	return st, &positionStepper{table: table, opt: opt, scale: positionLR, clip: s.Clip}, nil
}

// step is stepper.step with the table's own update after the others'.
func (ps *positionStepper) step(st *stepper, step int, fb func() (float64, error)) (float64, error) {
	if ps == nil {
		return st.step(step, fb)
	}
	ps.table.ZeroGrad()
	loss, err := st.step(step, fb)
	if err != nil {
		return loss, err
	}
	optim.ClipGradNorm([]*tensor.Param{ps.table}, ps.clip)
	ps.opt.Step(st.Sched.LR(step) * ps.scale)
	return loss, nil
}
