package generate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func logs(p ...float64) []float32 {
	out := make([]float32, len(p))
	for i, x := range p {
		out[i] = float32(math.Log(x))
	}
	return out
}

func mustGenerate(t *testing.T, d Decoder, prompts [][]int32, o Options) *Result {
	t.Helper()
	g, err := Generate(context.Background(), d, prompts, o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Greedy decoding follows the chain's best transition by hand (a tie goes
// to the lower id); an EOS ends a row, which then gets the pad id, and
// decoding stops once every row has ended; Stop ends a row as an EOS does.
func TestGreedyByHand(t *testing.T) {
	table := [][]float32{
		{0, 2, 1, 0}, // 0 → 1
		{0, 0, 3, 1}, // 1 → 2
		{5, 0, 0, 5}, // 2 → 0 (tie with 3)
		{1, 1, 1, 1}, // 3 → 0
	}
	for _, c := range []struct {
		name  string
		o     Options
		want  [][]int32
		steps int
	}{
		{"no eos", Options{MaxNewTokens: 4, EOS: -1}, [][]int32{{0, 1, 2, 0, 1}, {2, 0, 1, 2, 0}}, 3},
		{"eos 2", Options{MaxNewTokens: 4, EOS: 2}, [][]int32{{0, 1, 2, 3}, {2, 0, 1, 2}}, 2},
		{"stop at 1 or 3 ids", Options{MaxNewTokens: 4, EOS: -1, Stop: func(r int, ids []int32) bool { return len(ids) == 1+2*r }},
			[][]int32{{0, 1, 3, 3}, {2, 0, 1, 2}}, 2},
	} {
		d := &chain{table: table, pad: 3}
		g := mustGenerate(t, d, [][]int32{{0}, {2}}, c.o)
		if !slices.EqualFunc(g.Sequences, c.want, slices.Equal) || d.steps != c.steps {
			t.Errorf("%s: %v after %d steps, want %v after %d", c.name, g.Sequences, d.steps, c.want, c.steps)
		}
		if g.Scores != nil {
			t.Errorf("%s: scores without OutputScores", c.name)
		}
	}
	// OutputScores keeps each step's (penalised) logits.
	g := mustGenerate(t, &chain{table: table}, [][]int32{{0}}, Options{MaxNewTokens: 2, EOS: -1, OutputScores: true, RepetitionPenalty: 2})
	want := [][]float32{{0, 2, 1, 0}, {0, 0, 3, 1}} // 0 → 1; the penalty halves z_0 = 0 and z_1 = 0
	if !slices.EqualFunc(g.Scores[0], want, slices.Equal) {
		t.Errorf("scores %v, want %v", g.Scores[0], want)
	}
}

// Sampling draws the first id whose cumulative probability passes the PCG
// stream's u, from the softmax left by the warpers: here top-p 0.55 removes
// id 0 (0.1 ≤ 0.45) and keeps ids 1 and 2 with 5/9 and 4/9.
func TestSampleByHand(t *testing.T) {
	p := logs(0.1, 0.5, 0.4)
	d := &chain{table: [][]float32{p, p, p}}
	const seed, n = 11, 40
	g := mustGenerate(t, d, [][]int32{{0}}, Options{MaxNewTokens: n, EOS: -1, Strategy: Sample, Temperature: 1, TopP: 0.55, Seed: seed})
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	counts := [3]int{}
	for i, id := range g.Sequences[0][1:] {
		want := int32(2)
		if rng.Float64() < 5.0/9 {
			want = 1
		}
		if id != want {
			t.Fatalf("draw %d: %d, want %d", i, id, want)
		}
		counts[id]++
	}
	if counts[0] != 0 || counts[1] == 0 || counts[2] == 0 {
		t.Errorf("counts %v: top-p must remove id 0 and keep both others", counts)
	}
	// top_k 1 and a temperature near 0 are greedy.
	for _, o := range []Options{{TopK: 1, Temperature: 0.7}, {Temperature: 1e-4}} {
		o.MaxNewTokens, o.EOS, o.Strategy, o.Seed = 5, -1, Sample, 3
		if g := mustGenerate(t, d, [][]int32{{0}}, o); !slices.Equal(g.Sequences[0], []int32{0, 1, 1, 1, 1, 1}) {
			t.Errorf("top_k %d temperature %g: %v, want greedy", o.TopK, o.Temperature, g.Sequences[0])
		}
	}
}

// Beam search with two beams finds the better path that greedy misses:
// 0 → 1 → 0 has probability 0.5·0.4 = 0.2, 0 → 2 → 2 has 0.4·0.9 = 0.36.
// With EOS 0 the first is finished at step 2 (score log 0.2 / 2, HF's length
// counting the prompt, not the EOS) and loses to log 0.36 / 3.
func TestBeamByHand(t *testing.T) {
	table := [][]float32{logs(0.1, 0.5, 0.4), logs(0.4, 0.3, 0.3), logs(0.05, 0.05, 0.9)}
	for _, c := range []struct {
		o     Options
		want  []int32
		score float64
	}{
		{Options{EOS: -1, LengthPenalty: 0}, []int32{0, 2, 2}, math.Log(0.36)},
		{Options{EOS: 0, LengthPenalty: 1}, []int32{0, 2, 2}, math.Log(0.36) / 3},
		{Options{EOS: 0, LengthPenalty: -3}, []int32{0, 1, 0}, math.Log(0.2) * 8},                             // 2^3: short wins
		{Options{EOS: 0, LengthPenalty: 1, Length: LengthGNMT}, []int32{0, 2, 2}, math.Log(0.36) / (7.0 / 6)}, // n = 2 either way
	} {
		c.o.MaxNewTokens, c.o.Strategy, c.o.NumBeams = 2, Beam, 2
		g := mustGenerate(t, &chain{table: table}, [][]int32{{0}}, c.o)
		if !slices.Equal(g.Sequences[0], c.want) || math.Abs(g.BeamScores[0]-c.score) > 1e-6 {
			t.Errorf("%+v: %v (%.7f), want %v (%.7f)", c.o, g.Sequences[0], g.BeamScores[0], c.want, c.score)
		}
	}
	greedy := mustGenerate(t, &chain{table: table}, [][]int32{{0}}, Options{MaxNewTokens: 2, EOS: -1})
	if !slices.Equal(greedy.Sequences[0], []int32{0, 1, 0}) {
		t.Errorf("greedy %v", greedy.Sequences[0])
	}
}

// Streaming sees every step's ids in order; ErrStop ends early with the ids
// so far, another error is returned.
func TestStreaming(t *testing.T) {
	d := &hashed{V: 7, levels: 9, seed: 1}
	prompts := [][]int32{{2, 5}, {1, 4}}
	for _, strategy := range []string{Greedy, Sample} {
		var seen [][]int32
		o := Options{MaxNewTokens: 6, EOS: -1, Strategy: strategy, Temperature: 1, Seed: 7, OnToken: func(step int, ids []int32) error {
			if step != len(seen) {
				t.Errorf("step %d after %d", step, len(seen))
			}
			seen = append(seen, ids)
			return nil
		}}
		g := mustGenerate(t, d, prompts, o)
		for r := range prompts {
			var got []int32
			for _, ids := range seen {
				got = append(got, ids[r])
			}
			if !slices.Equal(got, g.Sequences[r][2:]) {
				t.Errorf("%s row %d: streamed %v, returned %v", strategy, r, got, g.Sequences[r])
			}
		}
		n := 0
		o.OnToken = func(int, []int32) error {
			if n++; n == 2 {
				return ErrStop
			}
			return nil
		}
		short := mustGenerate(t, d, prompts, o)
		for r := range prompts {
			if !slices.Equal(short.Sequences[r], g.Sequences[r][:4]) {
				t.Errorf("%s row %d: stopped with %v, want %v", strategy, r, short.Sequences[r], g.Sequences[r][:4])
			}
		}
		boom := errors.New("client went away")
		o.OnToken = func(int, []int32) error { return boom }
		if _, err := Generate(context.Background(), d, prompts, o); !errors.Is(err, boom) {
			t.Errorf("%s: callback error not returned: %v", strategy, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Generate(ctx, d, prompts, Options{MaxNewTokens: 3, EOS: -1}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// The selection of the 2K best candidates equals the first 2K of a stable
// sort by descending score, ties (frequent here) included.
func TestTopCandidatesEqualsFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var top topCandidates
	for trial := 0; trial < 2000; trial++ {
		n, levels := 1+r.IntN(40), 1+r.IntN(6)
		all := make([]candidate, 1+r.IntN(200))
		for i := range all {
			all[i] = candidate{float64(r.IntN(levels)) - 1e9*float64(r.IntN(2)*r.IntN(2)), i}
		}
		top.reset(n)
		for _, c := range all {
			top.offer(c)
		}
		want := slices.Clone(all)
		slices.SortStableFunc(want, func(a, b candidate) int {
			switch {
			case a.score > b.score:
				return -1
			case a.score < b.score:
				return 1
			}
			return 0
		})
		want = want[:min(n, len(want))]
		if got := top.sorted(); !slices.Equal(got, want) {
			t.Fatalf("trial %d (n %d of %d): %v, want %v", trial, n, len(all), got, want)
		}
	}
}

// Beam search with the partial selection gives the same sequences and
// scores as the full sort of every beam × vocabulary candidate that it
// replaced (refBeamSearch, the former implementation), on logits with
// many ties, for every stopping rule, both length norms, with an EOS and a
// repetition penalty, several prompts at once.
func TestBeamEqualsFullSort(t *testing.T) {
	for seed := uint64(0); seed < 60; seed++ {
		r := rand.New(rand.NewPCG(seed, 9))
		o := Options{Strategy: Beam, NumBeams: 1 + r.IntN(5), MaxNewTokens: 1 + r.IntN(7), EOS: r.IntN(3) - 1,
			LengthPenalty: []float64{0, 1, 0.6, -1, 2}[r.IntN(5)], Length: LengthNorm(r.IntN(2)),
			EarlyStopping: EarlyStopping(r.IntN(3)), RepetitionPenalty: []float64{1, 1.3}[r.IntN(2)]}
		V := 2*o.NumBeams + r.IntN(8)
		prompts := [][]int32{{1, 2}, {int32(r.IntN(V)), 1}, {0, 0}}
		name := fmt.Sprintf("seed %d V %d %+v", seed, V, o)
		levels := 1 + r.IntN(5)
		got := mustGenerate(t, &hashed{V: V, levels: levels, seed: seed}, prompts, o)
		want, err := refBeamSearch(&hashed{V: V, levels: levels, seed: seed}, prompts, o)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got.Sequences, want.Sequences, slices.Equal) || !slices.Equal(got.BeamScores, want.BeamScores) {
			t.Errorf("%s: %v %v, full sort %v %v", name, got.Sequences, got.BeamScores, want.Sequences, want.BeamScores)
		}
	}
}

// The warpers against hand computations: temperature divides, top-k keeps
// the k best (ties included), top-p keeps the smallest best set reaching p.
func TestWarp(t *testing.T) {
	ninf := float32(math.Inf(-1))
	base := logs(0.5, 0.25, 0.15, 0.1)
	for _, c := range []struct {
		o    Options
		kept []bool
	}{
		{Options{Temperature: 1, TopP: 1, TopK: 2}, []bool{true, true, false, false}},
		{Options{Temperature: 1, TopP: 1, TopK: 3}, []bool{true, true, true, false}},
		{Options{Temperature: 1, TopP: 0.45}, []bool{true, false, false, false}},
		{Options{Temperature: 1, TopP: 0.6}, []bool{true, true, false, false}},
		{Options{Temperature: 1, TopP: 0.8}, []bool{true, true, true, false}},
		{Options{Temperature: 1, TopP: 0.95}, []bool{true, true, true, true}},
		{Options{Temperature: 1, TopP: 0.01}, []bool{true, false, false, false}},
	} {
		row := slices.Clone(base)
		warp(row, &c.o)
		for i, k := range c.kept {
			if k != (row[i] != ninf) {
				t.Errorf("%+v: row %v, want kept %v", c.o, row, c.kept)
				break
			}
		}
	}
	row := slices.Clone(base)
	warp(row, &Options{Temperature: 2, TopP: 1})
	for i := range row {
		if math.Abs(float64(row[i]-base[i]/2)) > 1e-7 {
			t.Errorf("temperature 2: %v, want %v / 2", row, base)
		}
	}
	// HF's repetition penalty: positive scores divided, negative multiplied, each id once.
	z := []float32{2, -2, 4, 1}
	repetitionPenalty(z, make([]bool, 4), 2, []int32{0, 1, 1, 9}, []int32{0})
	if !slices.Equal(z, []float32{1, -4, 4, 1}) {
		t.Errorf("penalised %v", z)
	}
}

// HF's BeamHypotheses bookkeeping: the worst score follows the K kept.
func TestHypotheses(t *testing.T) {
	h := &hypotheses{numBeams: 2, alpha: 1, worst: 1e9, maxLength: 10}
	h.add([]int32{1}, -4, 4, true) // −1
	h.add([]int32{2}, -6, 3, true) // −2
	// done when the best running beam (sum −5 at length 5: −1) cannot beat −2
	if h.worst != -2 || h.isDone(-5, 5) || !h.isDone(-100, 5) {
		t.Errorf("worst %g", h.worst)
	}
	h.add([]int32{3}, -3, 6, true) // −0.5: evicts −2
	if h.worst != -1 || len(h.beams) != 2 {
		t.Errorf("worst %g, %d beams", h.worst, len(h.beams))
	}
	h.add([]int32{4}, -30, 6, true) // −5: not kept
	if len(h.beams) != 2 {
		t.Errorf("%d beams", len(h.beams))
	}
	h.early = EarlyStopOnBeams
	if !h.isDone(0, 1) {
		t.Error("early_stopping=True with num_beams hypotheses is not done")
	}
	h.early = EarlyStopNever // −1 ≥ −9/10 is false; the heuristic at length 5 says −1 ≥ −1.8
	if h.isDone(-9, 5) {
		t.Error("never: done although a beam could still reach −0.9")
	}
	h.early = EarlyStopHeuristic
	if !h.isDone(-9, 5) {
		t.Error("heuristic: not done")
	}
	g := &hypotheses{alpha: 0.6, norm: LengthGNMT}
	if got, want := g.penalty(7), math.Pow(2, 0.6); got != want {
		t.Errorf("GNMT lp(7) = %v, want 2^0.6 = %v", got, want)
	}
}

// Bad options and sizes are clear errors, before the decoder allocates.
func TestOptionErrors(t *testing.T) {
	d := &chain{table: [][]float32{{0, 1}, {1, 0}}}
	ok := [][]int32{{1}}
	for _, c := range []struct {
		prompts [][]int32
		o       Options
		want    string
	}{
		{nil, Options{MaxNewTokens: 2}, "no prompt"},
		{[][]int32{{1}, {}}, Options{MaxNewTokens: 2}, "prompt 1 is empty"},
		{ok, Options{MaxNewTokens: 2, Strategy: Sample, Temperature: 1, TopP: 1.5}, "top_p 1.5 is outside (0, 1]"},
		{ok, Options{MaxNewTokens: 2, Strategy: Sample}, "temperature 0 must be a positive"},
		{ok, Options{MaxNewTokens: 2, Strategy: Sample, Temperature: 1, TopK: -1}, "top_k -1"},
		{ok, Options{MaxNewTokens: 2, Strategy: Beam}, "num_beams 0 must be at least 1"},
		{ok, Options{MaxNewTokens: 2, NumBeams: 3}, "needs the beam strategy"},
		{ok, Options{MaxNewTokens: 2, Strategy: "nucleus"}, `strategy "nucleus" is not greedy, sample or beam`},
		{ok, Options{MaxNewTokens: 2, RepetitionPenalty: -1}, "repetition_penalty -1"},
		{ok, Options{MaxNewTokens: 0}, "max new tokens 0"},
		{ok, Options{MaxNewTokens: 2, EOS: 2}, "eos id 2 is outside the vocabulary [0, 2)"},
		{ok, Options{MaxNewTokens: 2, Strategy: Beam, NumBeams: 2, OnToken: func(int, []int32) error { return nil }}, "streaming"},
		{ok, Options{MaxNewTokens: 2, Strategy: Beam, NumBeams: 2, Stop: func(int, []int32) bool { return true }}, "Stop"},
		{ok, Options{MaxNewTokens: 2, Strategy: Beam, NumBeams: 2, OnStep: func(int, []StepToken) error { return nil }}, "OnStep"},
		{ok, Options{MaxNewTokens: 2, TopLogProbs: 3}, "top log-probabilities 3 is outside [0, 2]"},
		{ok, Options{MaxNewTokens: 2, Strategy: Beam, NumBeams: 1, LengthPenalty: math.NaN()}, "length_penalty NaN"},
		{ok, Options{MaxNewTokens: 2, Strategy: Beam, NumBeams: 1 << 62}, "overflows int64"},
	} {
		_, err := Generate(context.Background(), d, c.prompts, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.want)
		}
	}
}
