package generate

import (
	"math"
	"slices"
	"sort"
	"testing"
)

// OnStep sees OnToken's ids with their log-probabilities under the scores
// they were chosen from (Result.Scores: the penalised logits for greedy,
// the warped ones for sampling), computed here from those scores by hand,
// and the top ids in order; a finished row gets the pad id and 0.
func TestOnStepLogProbs(t *testing.T) {
	d := &hashed{V: 9, levels: 5, seed: 3}
	prompts := [][]int32{{2, 5}, {1, 4}}
	for _, o := range []Options{
		{Strategy: Greedy, RepetitionPenalty: 1.3},
		{Strategy: Greedy, EOS: 3},
		{Strategy: Sample, Temperature: 0.7, Seed: 4},
		{Strategy: Sample, Temperature: 1.5, TopK: 4, TopP: 0.8, Seed: 5},
	} {
		o.MaxNewTokens, o.OutputScores, o.TopLogProbs = 8, true, 3
		if o.EOS == 0 {
			o.EOS = -1
		}
		var ids [][]int32
		o.OnToken = func(_ int, next []int32) error { ids = append(ids, next); return nil }
		var steps [][]StepToken
		o.OnStep = func(step int, toks []StepToken) error {
			if step != len(steps) || step+1 != len(ids) {
				t.Errorf("%+v: OnStep step %d after %d steps and %d OnToken calls", o.Strategy, step, len(steps), len(ids))
			}
			steps = append(steps, toks)
			return nil
		}
		g := mustGenerate(t, d, prompts, o)
		finished, done := 0, make([]bool, len(prompts))
		for step, toks := range steps {
			for r, tk := range toks {
				if tk.ID != ids[step][r] {
					t.Fatalf("%s step %d row %d: OnStep id %d, OnToken %d", o.Strategy, step, r, tk.ID, ids[step][r])
				}
				if done[r] {
					finished++
					if tk.ID != d.PadID() || tk.LogProb != 0 || tk.Top != nil {
						t.Errorf("%s step %d row %d after the EOS: %+v, want the pad id, 0, no top", o.Strategy, step, r, tk)
					}
					continue
				}
				done[r] = o.EOS >= 0 && tk.ID == int32(o.EOS)
				z := g.Scores[r][step]
				mx := math.Inf(-1)
				for _, v := range z {
					mx = max(mx, float64(v))
				}
				sum := 0.0
				for _, v := range z {
					sum += math.Exp(float64(v) - mx)
				}
				want := func(v int32) float64 { return float64(z[v]) - mx - math.Log(sum) }
				if got := tk.LogProb; math.Abs(got-want(tk.ID)) > 1e-12 || math.IsInf(got, 0) {
					t.Errorf("%s step %d row %d: logprob %g, want %g (finite)", o.Strategy, step, r, got, want(tk.ID))
				}
				order := make([]int32, len(z))
				for v := range order {
					order[v] = int32(v)
				}
				sort.SliceStable(order, func(a, b int) bool { return z[order[a]] > z[order[b]] })
				if len(tk.Top) != o.TopLogProbs {
					t.Fatalf("%s: %d top ids, want %d", o.Strategy, len(tk.Top), o.TopLogProbs)
				}
				for i, tp := range tk.Top {
					if tp.ID != order[i] || math.Abs(tp.LogProb-want(tp.ID)) > 1e-12 {
						t.Errorf("%s step %d row %d: top %d is %+v, want id %d (%g)", o.Strategy, step, r, i, tp, order[i], want(order[i]))
					}
				}
				if o.Strategy == Greedy && tk.Top[0].LogProb != tk.LogProb {
					t.Errorf("greedy step %d row %d: chose %+v, not the best %+v", step, r, tk.TokenLogProb, tk.Top[0])
				}
			}
		}
		if o.EOS >= 0 && finished == 0 {
			t.Errorf("EOS %d: no row finished before the end, the pad case is untested: %v", o.EOS, g.Sequences)
		}
	}
}

// topLogProbs keeps the n best, best first, the lower id first among ties.
func TestTopLogProbs(t *testing.T) {
	lp := []float64{-2, -1, math.Inf(-1), -1, -3, -0.5}
	got := topLogProbs(lp, 4)
	want := []TokenLogProb{{5, -0.5}, {1, -1}, {3, -1}, {0, -2}}
	if !slices.Equal(got, want) {
		t.Errorf("top 4 %v, want %v", got, want)
	}
	if got := topLogProbs(lp, 9); len(got) != len(lp) || got[len(lp)-1].ID != 2 {
		t.Errorf("top 9 of 6: %v", got)
	}
	if got := topLogProbs(lp, 0); got != nil {
		t.Errorf("top 0: %v", got)
	}
}
