package pretrain

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/tensor"
)

// fakeModel is a tiny MLM in plain Go with exact gradients: for row r and
// position t with token x,
//
//	c     = mean over attended positions s of E[x_s]       (context)
//	h     = g ⊙ (E[x] + c)                                  (g: "LayerNorm" gain)
//	logit = W h + b                                         (W: [V, C], b: [V])
//	loss  = mean over labelled positions of −log softmax(logit)[label]
//
// It saves its parameters to model.bin (magic, then the float32 bits in
// order) and config.json.
type fakeModel struct {
	V, C   int
	E, W   *tensor.Param
	b, g   *tensor.Param
	calls  int               // ForwardBackward calls so far
	nanAt  int               // call number (1-based) that returns NaN; 0: never
	onCall func(call int)    // hook run at the start of each call
	saveFn func(n int) error // hook run at each SaveModel (n: 1-based count)
	saves  int               // SaveModel calls so far
	sleep  func()            // optional delay per call (subprocess test)
}

func newFake(V, C int, seed uint64) *fakeModel {
	m := &fakeModel{V: V, C: C,
		E: tensor.NewParam("embeddings.word_embeddings.weight", V, C),
		W: tensor.NewParam("cls.predictions.decoder.weight", V, C),
		b: tensor.NewParam("cls.predictions.bias", V),
		g: tensor.NewParam("encoder.LayerNorm.weight", C),
	}
	x := seed*2654435761 + 1
	rnd := func() float32 {
		x = x*6364136223846793005 + 1442695040888963407
		return (float32(x>>40)/float32(1<<24) - 0.5) * 0.2
	}
	for i := range m.E.Data {
		m.E.Data[i] = rnd()
	}
	for i := range m.W.Data {
		m.W.Data[i] = rnd()
	}
	for i := range m.g.Data {
		m.g.Data[i] = 1
	}
	return m
}

func (m *fakeModel) Params() []*tensor.Param { return []*tensor.Param{m.E, m.W, m.b, m.g} }

// forward computes the loss sum over labelled tokens of b, the number of
// them and the correct predictions; with grad it also adds the gradient of
// lossSum·scale into the parameters.
func (m *fakeModel) forward(b *data.Batch, grad bool, scale float64) (lossSum float64, n, correct int) {
	V, C, T := m.V, m.C, b.T
	ctx := make([]float32, C)
	dctx := make([]float32, C)
	h := make([]float32, C)
	dh := make([]float32, C)
	logit := make([]float64, V)
	for r := 0; r < b.B; r++ {
		row := b.InputIDs[r*T : (r+1)*T]
		att := b.AttentionMask[r*T : (r+1)*T]
		lab := b.Labels[r*T : (r+1)*T]
		clear(ctx)
		cnt := 0
		for t, x := range row {
			if att[t] == 1 {
				e := m.E.Data[int(x)*C : int(x)*C+C]
				for j := range ctx {
					ctx[j] += e[j]
				}
				cnt++
			}
		}
		inv := 1 / float32(max(cnt, 1))
		for j := range ctx {
			ctx[j] *= inv
		}
		clear(dctx)
		for t, x := range row {
			if lab[t] == data.IgnoreIndex {
				continue
			}
			e := m.E.Data[int(x)*C : int(x)*C+C]
			for j := range h {
				h[j] = m.g.Data[j] * (e[j] + ctx[j])
			}
			mx := math.Inf(-1)
			best := 0
			for v := 0; v < V; v++ {
				w := m.W.Data[v*C : v*C+C]
				s := float64(m.b.Data[v])
				for j := range h {
					s += float64(w[j]) * float64(h[j])
				}
				logit[v] = s
				if s > mx {
					mx, best = s, v
				}
			}
			var z float64
			for v := range logit {
				z += math.Exp(logit[v] - mx)
			}
			y := int(lab[t])
			lossSum += -(logit[y] - mx - math.Log(z))
			n++
			if best == y {
				correct++
			}
			if !grad {
				continue
			}
			// logit = W h + b  →  dlogit = (softmax − onehot)·scale
			clear(dh)
			for v := 0; v < V; v++ {
				d := math.Exp(logit[v]-mx) / z
				if v == y {
					d--
				}
				dl := float32(d * scale)
				w := m.W.Data[v*C : v*C+C]
				dw := m.W.Grad[v*C : v*C+C]
				m.b.Grad[v] += dl
				for j := range h {
					dw[j] += dl * h[j]
					dh[j] += dl * w[j]
				}
			}
			// h = g ⊙ (e + c)
			de := m.E.Grad[int(x)*C : int(x)*C+C]
			for j := range h {
				m.g.Grad[j] += dh[j] * (e[j] + ctx[j])
				de[j] += dh[j] * m.g.Data[j]
				dctx[j] += dh[j] * m.g.Data[j]
			}
		}
		if !grad {
			continue
		}
		// c = mean of E[x_s] over attended s
		for t, x := range row {
			if att[t] == 1 {
				de := m.E.Grad[int(x)*C : int(x)*C+C]
				for j := range de {
					de[j] += dctx[j] * inv
				}
			}
		}
	}
	return lossSum, n, correct
}

func (m *fakeModel) ForwardBackward(ctx context.Context, b *data.Batch) (float64, error) {
	m.calls++
	if m.onCall != nil {
		m.onCall(m.calls)
	}
	if m.sleep != nil {
		m.sleep()
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := b.Labelled()
	if n == 0 {
		return 0, nil
	}
	sum, _, _ := m.forward(b, true, 1/float64(n))
	if m.calls == m.nanAt {
		return math.NaN(), nil
	}
	return sum / float64(n), nil
}

func (m *fakeModel) Evaluate(ctx context.Context, b *data.Batch) (float64, int, int, error) {
	s, n, c := m.forward(b, false, 0)
	return s, n, c, nil
}

const fakeMagic = "FAKEMDL1"

func (m *fakeModel) SaveModel(dir string) error {
	m.saves++
	var buf []byte
	buf = append(buf, fakeMagic...)
	for _, p := range m.Params() {
		for _, x := range p.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		}
	}
	if m.saveFn != nil {
		if err := m.saveFn(m.saves); err != nil {
			// Leave a partial file behind, as a full disk would.
			os.WriteFile(filepath.Join(dir, "model.bin"), buf[:len(buf)/2], 0o644)
			return err
		}
	}
	cfg, _ := json.Marshal(map[string]int{"vocab_size": m.V, "hidden_size": m.C})
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "model.bin"), buf, 0o644)
}

func (m *fakeModel) LoadModel(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "model.bin"))
	if err != nil {
		return err
	}
	want := len(fakeMagic)
	for _, p := range m.Params() {
		want += 4 * len(p.Data)
	}
	if len(b) != want || string(b[:len(fakeMagic)]) != fakeMagic {
		return fmt.Errorf("fake: model.bin has %d bytes, want %d", len(b), want)
	}
	off := len(fakeMagic)
	for _, p := range m.Params() {
		for i := range p.Data {
			p.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
			off += 4
		}
	}
	return nil
}
