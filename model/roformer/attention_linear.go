package roformer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/roformer-go/roformer/tensor"
)

// keyProjection is the state-dict name of a performer layer's random
// directions ω [M, HS] (a buffer, not a parameter), after performer-pytorch's
// FastAttention.projection_matrix.
const keyProjection = "attention.self.feature_map.projection_matrix"

func projectionKey(layer int) string {
	return fmt.Sprintf("roformer.encoder.layer.%d.%s", layer, keyProjection)
}

// FeatureDraw returns the index of the current draw of the performer's
// random features (0 after New and Init).
func (m *Model) FeatureDraw() uint64 { return m.featureDraw }

// RedrawFeaturesAt applies the redraw schedule of the performer's random
// features before training step step (0-based): draw = step /
// feature_redraw_interval (always 0 when the interval is 0). When the draw
// changes, every layer's ω is redrawn as a pure function of (Init seed,
// layer, draw), so a resumed run draws the same features. It reports
// whether it redrew; for other attention kinds it does nothing.
func (m *Model) RedrawFeaturesAt(step int) bool {
	if m.Config.Attention() != AttnPerformer || m.Config.FeatureRedrawInterval <= 0 || step < 0 {
		return false
	}
	d := uint64(step / m.Config.FeatureRedrawInterval)
	if d == m.featureDraw {
		return false
	}
	m.drawFeatures(d)
	return true
}

// drawFeatures sets every layer's ω to draw d.
func (m *Model) drawFeatures(d uint64) {
	m.featureDraw = d
	M, HS := m.Config.NumFeatures(), m.Config.HeadSize()
	if m.omega == nil {
		m.omega = make([][]float32, m.Config.NumHiddenLayers)
	}
	for l := range m.omega {
		if m.omega[l] == nil {
			m.omega[l] = make([]float32, M*HS)
		}
		r := rand.New(rand.NewPCG(m.featureSeed^0x706572666f726d65, uint64(l)<<32^d))
		orthogonalGaussian(m.omega[l], M, HS, r)
	}
}

// orthogonalGaussian fills omega [M, HS] with orthogonal random features
// (Choromanski et al. 2021, §4.2 "ORF"): blocks of HS rows that are
// orthonormal (Gram–Schmidt on a Gaussian matrix, in float64), each row then
// scaled by the norm of an independent N(0, I_HS) vector, so that every row
// is marginally N(0, I_HS) while rows of a block are exactly orthogonal.
func orthogonalGaussian(omega []float32, M, HS int, r *rand.Rand) {
	block := make([]float64, HS*HS)
	for start := 0; start < M; start += HS {
		for i := range block {
			block[i] = r.NormFloat64()
		}
		for i := 0; i < HS; i++ {
			row := block[i*HS : i*HS+HS]
			for j := 0; j < i; j++ {
				prev := block[j*HS : j*HS+HS]
				dot := 0.0
				for c := range row {
					dot += row[c] * prev[c]
				}
				for c := range row {
					row[c] -= dot * prev[c]
				}
			}
			n := 0.0
			for _, x := range row {
				n += x * x
			}
			n = math.Sqrt(n)
			for c := range row {
				row[c] /= n
			}
		}
		for i := 0; i < HS && start+i < M; i++ {
			chi := 0.0
			for c := 0; c < HS; c++ {
				g := r.NormFloat64()
				chi += g * g
			}
			chi = math.Sqrt(chi)
			dst := omega[(start+i)*HS : (start+i+1)*HS]
			for c := range dst {
				dst[c] = float32(block[i*HS+c] * chi)
			}
		}
	}
}

// addBuffers adds the performer's random directions to a state dict.
func (m *Model) addBuffers(out map[string]*tensor.Tensor) {
	if m.Config.Attention() != AttnPerformer {
		return
	}
	for l, w := range m.omega {
		out[projectionKey(l)] = &tensor.Tensor{Shape: []int{m.Config.NumFeatures(), m.Config.HeadSize()}, Data: w}
	}
}

// bindBuffers copies the performer's random directions from a checkpoint
// (marking them used) and says what it did in the report.
func (m *Model) bindBuffers(src map[string]*tensor.Tensor, used map[string]bool, rep *BindReport) error {
	found := 0
	for key := range src {
		if strings.HasSuffix(key, keyProjection) {
			used[key] = true
		}
	}
	if m.Config.Attention() != AttnPerformer {
		return nil
	}
	M, HS := m.Config.NumFeatures(), m.Config.HeadSize()
	for l := range m.omega {
		key := projectionKey(l)
		t, ok := src[key]
		if !ok {
			t, ok = src[strings.TrimPrefix(key, "roformer.")]
		}
		if !ok {
			continue
		}
		if !tensor.SameShape(t.Shape, []int{M, HS}) {
			return fmt.Errorf("roformer: %s has shape %v, the model needs [%d %d]", key, t.Shape, M, HS)
		}
		copy(m.omega[l], t.Data)
		found++
	}
	switch found {
	case len(m.omega):
		rep.Notes = append(rep.Notes, "performer random features loaded from the checkpoint")
	case 0:
		rep.Notes = append(rep.Notes, fmt.Sprintf("the checkpoint holds no performer random features: draw %d of seed %d is used", m.featureDraw, m.featureSeed))
	default:
		return fmt.Errorf("roformer: the checkpoint holds performer random features for %d of %d layers", found, len(m.omega))
	}
	return nil
}
