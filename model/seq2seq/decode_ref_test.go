package seq2seq

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
)

// logSoftmax returns log softmax(z) in float64 (kernels.LogSoftmax64).
func logSoftmax(z []float32) []float64 {
	out := make([]float64, len(z))
	kernels.LogSoftmax64(out, z)
	return out
}

// lengthPenalty is GNMT's ((5+n)/6)^α.
func lengthPenalty(n int, alpha float64) float64 {
	return math.Pow((5+float64(n))/6, alpha)
}

// Translate through package generate returns what the former decoder of
// this package returned (refTranslate, kept below as it was: its own greedy
// loop and fairseq-style beam search, log Σ exp through the cross-entropy
// kernel, per-hypothesis top-2k lists), for greedy decoding and beam
// widths 2 to 5, several length penalties and limits, on random models
// (near-uniform logits: many close candidates) and trained ones.
func TestTranslateEqualsFormerDecoder(t *testing.T) {
	type model struct {
		name string
		m    *Model
		src  [][]int32
	}
	var models []model
	for _, pos := range []string{Rotary, Sinusoidal} {
		m, src := trainedCopy(t, pos)
		models = append(models, model{"trained/" + pos, m, src})
		for seed := uint64(20); seed < 24; seed++ {
			cfg := tinyConfig(pos)
			cfg.VocabSize = 17 + int(seed)
			rm, _ := New(cfg)
			rm.Init(seed)
			r := testutil.Rand(seed)
			var src [][]int32
			for i := 0; i < 5; i++ {
				s := make([]int32, 1+r.IntN(6))
				for j := range s {
					s[j] = int32(3 + r.IntN(cfg.VocabSize-3))
				}
				src = append(src, s)
			}
			models = append(models, model{fmt.Sprintf("random/%s/%d", pos, seed), rm, src})
		}
	}
	compared, differ := 0, 0
	for _, md := range models {
		for _, o := range []DecodeOptions{
			{Beam: 1, MaxExtra: 5}, {Beam: 1, MaxExtra: 1},
			{Beam: 2, Alpha: 0.6, MaxExtra: 5}, {Beam: 4, Alpha: 0.6, MaxExtra: 6},
			{Beam: 3, Alpha: 0, MaxExtra: 3}, {Beam: 5, Alpha: 1, MaxExtra: 8}, {Beam: 4, Alpha: -0.5, MaxExtra: 2},
		} {
			got, err := md.m.Translate(context.Background(), md.src, o)
			if err != nil {
				t.Fatal(err)
			}
			want, err := refTranslate(md.m, md.src, o)
			if err != nil {
				t.Fatal(err)
			}
			for r := range want {
				compared++
				if !slices.Equal(got[r], want[r]) {
					differ++
					t.Errorf("%s %+v source %d: %v, the former decoder %v", md.name, o, r, got[r], want[r])
				}
			}
		}
	}
	t.Logf("%d outputs compared, %d differ", compared, differ)
}

// The seq2seq Decoder samples through generate too: with top-k 1 sampling
// is greedy, whatever the seed; with a full distribution two seeds differ
// somewhere and one seed repeats.
func TestDecoderSamples(t *testing.T) {
	m, src := trainedCopy(t, Rotary)
	greedy, err := m.Translate(context.Background(), src, DecodeOptions{Beam: 1, MaxExtra: 5})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := m.Encode(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]int, len(src))
	limits := make([]int, len(src))
	for i := range rows {
		rows[i], limits[i] = i, enc.Len[i]-1+5
	}
	sample := func(o generate.Options) [][]int32 {
		o.Strategy, o.MaxNewTokens, o.EOS = generate.Sample, slices.Max(limits), m.Config.EOSID
		o.Stop = func(r int, ids []int32) bool { return len(ids) >= limits[r] }
		g, err := generate.Generate(context.Background(), m.NewDecoder(enc, rows), m.bos(len(src)), o)
		if err != nil {
			t.Fatal(err)
		}
		out := make([][]int32, len(src))
		for i, seq := range g.Sequences {
			out[i] = m.output(seq, limits[i])
		}
		return out
	}
	if got := sample(generate.Options{Temperature: 1, TopK: 1, Seed: 5}); !slices.EqualFunc(got, greedy, slices.Equal) {
		t.Errorf("top-k 1: %v, greedy %v", got, greedy)
	}
	a, b := sample(generate.Options{Temperature: 2, Seed: 1}), sample(generate.Options{Temperature: 2, Seed: 2})
	if slices.EqualFunc(a, b, slices.Equal) {
		t.Errorf("seeds 1 and 2 drew the same %v", a)
	}
	if again := sample(generate.Options{Temperature: 2, Seed: 1}); !slices.EqualFunc(a, again, slices.Equal) {
		t.Errorf("seed 1 drew %v, then %v", a, again)
	}
}

// refTranslate is the former Model.Translate.
func refTranslate(m *Model, src [][]int32, o DecodeOptions) ([][]int32, error) {
	enc, err := m.Encode(context.Background(), src)
	if err != nil {
		return nil, err
	}
	if o.Beam <= 1 {
		return refGreedy(m, enc, o.MaxExtra)
	}
	out := make([][]int32, len(src))
	for r := range src {
		if out[r], err = refBeamSearch(m, enc, r, o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func refGreedy(m *Model, enc *Encoded, maxExtra int) ([][]int32, error) {
	R := enc.B
	rows := make([]int, R)
	limit := 0
	for i := range rows {
		rows[i] = i
		limit = max(limit, enc.Len[i]-1+maxExtra)
	}
	st, err := m.NewState(enc, rows, 32)
	if err != nil {
		return nil, err
	}
	out := make([][]int32, R)
	done := make([]bool, R)
	tok := make([]int32, R)
	for i := range tok {
		tok[i] = int32(m.Config.BOSID)
	}
	V := m.Config.VocabSize
	for step := 0; step < limit; step++ {
		logits, err := m.Step(st, tok)
		if err != nil {
			return nil, err
		}
		left := 0
		for i := 0; i < R; i++ {
			if done[i] {
				tok[i] = int32(m.Config.PadID)
				continue
			}
			z := logits[i*V : i*V+V]
			best := 0
			for j, v := range z {
				if v > z[best] {
					best = j
				}
			}
			tok[i] = int32(best)
			if best == m.Config.EOSID {
				done[i] = true
				continue
			}
			out[i] = append(out[i], int32(best))
			if len(out[i]) >= enc.Len[i]-1+maxExtra {
				done[i] = true
				continue
			}
			left++
		}
		if left == 0 {
			break
		}
	}
	return out, nil
}

type refCand struct {
	from int
	id   int32
	logp float64
}

func refTopTokens(z []float32, n, from int, base float64) []refCand {
	top := make([]int, 0, n+1)
	for j, v := range z {
		if len(top) == n && v <= z[top[n-1]] {
			continue
		}
		p := len(top)
		for p > 0 && v > z[top[p-1]] {
			p--
		}
		top = append(top, 0)
		copy(top[p+1:], top[p:])
		top[p] = j
		if len(top) > n {
			top = top[:n]
		}
	}
	out := make([]refCand, len(top))
	for i, j := range top {
		out[i] = refCand{from, int32(j), base + float64(z[j])}
	}
	return out
}

type refHyp struct {
	ids   []int32
	logp  float64
	score float64
}

func refBeamSearch(m *Model, enc *Encoded, r int, o DecodeOptions) ([]int32, error) {
	k, V, eos := o.Beam, m.Config.VocabSize, int32(m.Config.EOSID)
	limit := enc.Len[r] - 1 + o.MaxExtra
	st, err := m.NewState(enc, []int{r}, 32)
	if err != nil {
		return nil, err
	}
	alive := []refHyp{{}}
	tok := []int32{int32(m.Config.BOSID)}
	var fin []refHyp
	for {
		logits, err := m.Step(st, tok)
		if err != nil {
			return nil, err
		}
		ce, zero := make([]float32, len(alive)), make([]int32, len(alive))
		kernels.CrossEntropyForward(ce, logits, zero, len(alive), V)
		var cands []refCand
		for i, h := range alive {
			z := logits[i*V : i*V+V]
			lse := float64(ce[i]) + float64(z[0])
			cands = append(cands, refTopTokens(z, 2*k, i, h.logp-lse)...)
		}
		sort.SliceStable(cands, func(a, b int) bool { return cands[a].logp > cands[b].logp })
		cands = cands[:min(2*k, len(cands))]
		var next []refHyp
		var idx []int
		for ci, c := range cands {
			n := len(alive[c.from].ids) + 1
			if c.id == eos || n >= limit {
				if ci < k && len(fin) < k {
					ids := alive[c.from].ids
					if c.id != eos {
						ids = append(append([]int32(nil), ids...), c.id)
					}
					fin = append(fin, refHyp{ids: ids, logp: c.logp, score: c.logp / lengthPenalty(n, o.Alpha)})
				}
				continue
			}
			if len(next) < k {
				ids := append(append([]int32(nil), alive[c.from].ids...), c.id)
				next = append(next, refHyp{ids: ids, logp: c.logp})
				idx = append(idx, c.from)
			}
		}
		if len(fin) >= k || len(next) == 0 {
			if len(fin) == 0 {
				for _, h := range next {
					fin = append(fin, refHyp{ids: h.ids, logp: h.logp, score: h.logp / lengthPenalty(len(h.ids), o.Alpha)})
				}
			}
			break
		}
		st.Reorder(idx)
		alive, tok = next, make([]int32, len(next))
		for i, h := range next {
			tok[i] = h.ids[len(h.ids)-1]
		}
	}
	best := 0
	for i, h := range fin {
		if h.score > fin[best].score {
			best = i
		}
	}
	return fin[best].ids, nil
}
