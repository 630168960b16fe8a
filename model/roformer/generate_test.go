package roformer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/generate"
	"github.com/roformer-go/roformer/kernels"
)

func genModel(t *testing.T, mod func(*Config), seed uint64) *Model {
	t.Helper()
	cfg := tinyConfig(mod)
	cfg.MaxPositionEmbeddings = 32
	return randomModel(t, cfg, HeadCausalLM, seed)
}

// genOptions are a test's generation options: the model's decoder's and
// the search's.
type genOptions struct {
	DecoderOptions
	generate.Options
}

// generateWith decodes prompts with m's Decoder and generate.Generate, as
// the callers do.
func generateWith(ctx context.Context, m *Model, prompts [][]int32, o genOptions) (*generate.Result, error) {
	d, err := m.NewDecoder(o.DecoderOptions)
	if err != nil {
		return nil, err
	}
	return generate.Generate(ctx, d, prompts, o.Options)
}

func mustGenerate(t *testing.T, m *Model, prompts [][]int32, o genOptions) *generate.Result {
	t.Helper()
	g, err := generateWith(context.Background(), m, prompts, o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Sampling with a seed is reproducible; top_k = 1 leaves one id, so it
// equals greedy; a temperature near 0 does too.
func TestGenerateSampling(t *testing.T) {
	m := genModel(t, nil, 3)
	prompts := [][]int32{{2, 5, 7}, {9, 1, 4}}
	for _, mode := range []string{DecodeCausal, DecodeUniLM} {
		t.Run(mode, func(t *testing.T) {
			o := genOptions{DecoderOptions: DecoderOptions{Mode: mode}, Options: generate.Options{MaxNewTokens: 8, EOS: -1, Strategy: generate.Sample, Temperature: 1.3, TopK: 6, TopP: 0.9, Seed: 42}}
			a, b := mustGenerate(t, m, prompts, o), mustGenerate(t, m, prompts, o)
			if !slices.EqualFunc(a.Sequences, b.Sequences, slices.Equal) {
				t.Errorf("same seed, different samples: %v and %v", a.Sequences, b.Sequences)
			}
			differ := false
			for seed := uint64(1); seed < 6 && !differ; seed++ {
				o.Seed = seed
				c := mustGenerate(t, m, prompts, o)
				differ = !slices.EqualFunc(a.Sequences, c.Sequences, slices.Equal)
			}
			if !differ {
				t.Error("five other seeds all drew the seed-42 sample: the seed is not used")
			}
			greedy := mustGenerate(t, m, prompts, genOptions{DecoderOptions: DecoderOptions{Mode: mode}, Options: generate.Options{MaxNewTokens: 8, EOS: -1}})
			for _, w := range []genOptions{
				{Options: generate.Options{Temperature: 0.7, TopK: 1, Seed: 9}},
				{Options: generate.Options{Temperature: 1e-4, Seed: 9}},
			} {
				w.Mode, w.MaxNewTokens, w.EOS, w.Strategy = mode, 8, -1, generate.Sample
				s := mustGenerate(t, m, prompts, w)
				if !slices.EqualFunc(s.Sequences, greedy.Sequences, slices.Equal) {
					t.Errorf("top_k %d temperature %g: %v, greedy %v", w.TopK, w.Temperature, s.Sequences, greedy.Sequences)
				}
			}
		})
	}
}

// HF's repetition penalty by hand: the first step's logits of the ids in
// the prompt are divided by the penalty when positive, multiplied when
// negative, each id once; greedy then takes the argmax of those.
func TestRepetitionPenalty(t *testing.T) {
	m := genModel(t, nil, 5)
	prompt := []int32{3, 3, 6, 1, 0, 2, 5, 7, 9}
	const pen = 1.7
	g := mustGenerate(t, m, [][]int32{prompt}, genOptions{Options: generate.Options{MaxNewTokens: 3, EOS: -1, RepetitionPenalty: pen, OutputScores: true}})
	out, err := m.Forward(context.Background(), &Batch{InputIDs: prompt, B: 1, T: len(prompt)}, nil, Options{Causal: true})
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.VocabSize
	want := slices.Clone(out.Logits.Data[(len(prompt)-1)*V:])
	negative, positive := false, false
	for _, id := range []int32{3, 6, 1, 0, 2, 5, 7, 9} {
		if want[id] < 0 {
			want[id] *= pen
			negative = true
		} else {
			want[id] /= pen
			positive = true
		}
	}
	for i := range want {
		if d := math.Abs(float64(g.Scores[0][0][i] - want[i])); d > 1e-4 {
			t.Fatalf("penalised logits %v, want %v", g.Scores[0][0], want)
		}
	}
	if g.Sequences[0][len(prompt)] != int32(kernels.Argmax(want)) {
		t.Errorf("chose %d, the penalised argmax is %d", g.Sequences[0][len(prompt)], kernels.Argmax(want))
	}
	if !positive || !negative {
		t.Errorf("the hand check covers a positive logit: %v, a negative one: %v", positive, negative)
	}
	// Later steps penalise the generated ids too.
	seq := g.Sequences[0]
	out, err = m.Forward(context.Background(), &Batch{InputIDs: seq[:len(seq)-1], B: 1, T: len(seq) - 1}, nil, Options{Causal: true})
	if err != nil {
		t.Fatal(err)
	}
	last := slices.Clone(out.Logits.Data[(len(seq)-2)*V:])
	penalised := map[int32]bool{}
	for _, id := range seq[:len(seq)-1] {
		if penalised[id] {
			continue
		}
		penalised[id] = true
		if last[id] < 0 {
			last[id] *= pen
		} else {
			last[id] /= pen
		}
	}
	if seq[len(seq)-1] != int32(kernels.Argmax(last)) {
		t.Errorf("last id %d, the penalised argmax is %d", seq[len(seq)-1], kernels.Argmax(last))
	}
}

// Beam search with one beam is greedy (with an EOS too, up to the EOS).
func TestBeamOneEqualsGreedy(t *testing.T) {
	m := genModel(t, nil, 8)
	prompts := [][]int32{{2, 5, 7}, {9, 1, 4}}
	for _, mode := range []string{DecodeCausal, DecodeUniLM} {
		for _, eos := range []int{-1, 4} {
			greedy := mustGenerate(t, m, prompts, genOptions{DecoderOptions: DecoderOptions{Mode: mode}, Options: generate.Options{MaxNewTokens: 7, EOS: eos}})
			beam := mustGenerate(t, m, prompts, genOptions{DecoderOptions: DecoderOptions{Mode: mode}, Options: generate.Options{MaxNewTokens: 7, EOS: eos, Strategy: generate.Beam, NumBeams: 1, LengthPenalty: 1}})
			for r := range prompts {
				want := greedy.Sequences[r]
				if i := slices.Index(want[len(prompts[r]):], int32(eos)); eos >= 0 && i >= 0 {
					want = want[:len(prompts[r])+i+1]
				}
				if !slices.Equal(beam.Sequences[r], want) {
					t.Errorf("%s eos %d row %d: beam %v, greedy %v", mode, eos, r, beam.Sequences[r], want)
				}
			}
		}
	}
}

// With as many beams as there are sequences, beam search is exhaustive:
// its answer is the best of all sequences of up to N new ids (ended by
// the EOS or by the length limit) under HF's score, sum of log-probs /
// (prompt + ids before the EOS)^length_penalty, computed here by a full
// forward pass for every prefix.
func TestBeamSearchExhaustive(t *testing.T) {
	const V, eos = 5, 2
	m := genModel(t, func(c *Config) { c.VocabSize = V; pad := 0; c.PadTokenID = &pad }, 13)
	prompt := []int32{1, 3, 4}
	logProbs := map[string][]float64{}
	lp := func(seq []int32) []float64 {
		key := fmt.Sprint(seq)
		if p, ok := logProbs[key]; ok {
			return p
		}
		out, err := m.Forward(context.Background(), &Batch{InputIDs: seq, B: 1, T: len(seq)}, nil, Options{Causal: true})
		if err != nil {
			t.Fatal(err)
		}
		p := make([]float64, V)
		kernels.LogSoftmax64(p, out.Logits.Data[(len(seq)-1)*V:len(seq)*V])
		logProbs[key] = p
		return p
	}
	for _, N := range []int{2, 3} {
		for _, lpen := range []float64{1, 0, 2.5, -1} {
			for _, withEOS := range []bool{true, false} {
				e := -1
				if withEOS {
					e = eos
				}
				best, bestScore := []int32(nil), math.Inf(-1)
				var walk func(seq []int32, sum float64)
				walk = func(seq []int32, sum float64) {
					n := len(seq) - len(prompt)
					if n == N {
						if s := sum / math.Pow(float64(len(seq)), lpen); s > bestScore {
							best, bestScore = slices.Clone(seq), s
						}
						return
					}
					for id, l := range lp(seq) {
						if id == e {
							if s := (sum + l) / math.Pow(float64(len(seq)), lpen); s > bestScore {
								best, bestScore = append(slices.Clone(seq), int32(id)), s
							}
							continue
						}
						walk(append(slices.Clone(seq), int32(id)), sum+l)
					}
				}
				walk(slices.Clone(prompt), 0)
				K := int(math.Pow(V, float64(N)))
				g := mustGenerate(t, m, [][]int32{prompt}, genOptions{Options: generate.Options{MaxNewTokens: N, EOS: e, Strategy: generate.Beam, NumBeams: K, LengthPenalty: lpen, EarlyStopping: generate.EarlyStopNever}})
				if !slices.Equal(g.Sequences[0], best) && math.Abs(g.BeamScores[0]-bestScore) > 1e-5 {
					t.Errorf("N %d penalty %g eos %v: beam %v (%.6f), exhaustive best %v (%.6f)", N, lpen, withEOS, g.Sequences[0], g.BeamScores[0], best, bestScore)
				} else if math.Abs(g.BeamScores[0]-bestScore) > 1e-4 {
					t.Errorf("N %d penalty %g eos %v: score %.6f, exhaustive %.6f", N, lpen, withEOS, g.BeamScores[0], bestScore)
				}
				// A few beams give a sequence no better than the best.
				few := mustGenerate(t, m, [][]int32{prompt}, genOptions{Options: generate.Options{MaxNewTokens: N, EOS: e, Strategy: generate.Beam, NumBeams: 2, LengthPenalty: lpen}})
				if few.BeamScores[0] > bestScore+1e-5 {
					t.Errorf("2 beams scored %.6f, above the exhaustive best %.6f", few.BeamScores[0], bestScore)
				}
			}
		}
	}
}

// A padded batch decodes every row as it would alone: greedy and beam, in
// both modes, with rotary and with learned absolute positions.
func TestGeneratePaddedBatch(t *testing.T) {
	prompts := [][]int32{{2, 5, 7, 1, 8}, {9}, {4, 6, 3}}
	for _, pe := range []PositionEncoding{PosRotary, PosLearned} {
		m := genModel(t, func(c *Config) { c.PositionEmbeddingType = pe }, 21)
		for _, mode := range []string{DecodeCausal, DecodeUniLM} {
			for _, o := range []genOptions{
				{Options: generate.Options{MaxNewTokens: 6, EOS: -1, OutputScores: true}},
				{Options: generate.Options{MaxNewTokens: 6, EOS: 3, RepetitionPenalty: 1.3, OutputScores: true}},
				{Options: generate.Options{MaxNewTokens: 4, EOS: 3, Strategy: generate.Beam, NumBeams: 3, LengthPenalty: 1}},
			} {
				o.Mode = mode
				name := fmt.Sprintf("%s/%s/%s/eos%d", pe, mode, o.Strategy, o.EOS)
				if _, err := generateWith(context.Background(), m, prompts, o); err == nil || !strings.Contains(err.Error(), "equal lengths") {
					t.Errorf("%s: ragged prompts without Pad: %v", name, err)
				}
				o.Pad = true
				batch := mustGenerate(t, m, prompts, o)
				for r, p := range prompts {
					alone := mustGenerate(t, m, [][]int32{p}, o)
					if !slices.Equal(batch.Sequences[r], alone.Sequences[0]) {
						t.Errorf("%s row %d: batch %v, alone %v", name, r, batch.Sequences[r], alone.Sequences[0])
					}
					if o.Strategy == generate.Beam {
						if math.Abs(batch.BeamScores[r]-alone.BeamScores[0]) > 1e-5 {
							t.Errorf("%s row %d: beam score %g, alone %g", name, r, batch.BeamScores[r], alone.BeamScores[0])
						}
						continue
					}
					for s := range alone.Scores[0] {
						for i, x := range alone.Scores[0][s] {
							if math.Abs(float64(batch.Scores[r][s][i]-x)) > 1e-4 {
								t.Fatalf("%s row %d step %d: logits differ from the row alone", name, r, s)
							}
						}
					}
				}
			}
		}
	}
}

// Streaming sees every step's ids in order; generate.ErrStop ends early
// with the ids so far, another error is returned.
func TestGenerateStreaming(t *testing.T) {
	m := genModel(t, nil, 4)
	prompts := [][]int32{{2, 5, 7}, {9, 1, 4}}
	for _, strategy := range []string{generate.Greedy, generate.Sample} {
		var seen [][]int32
		steps := []int{}
		o := genOptions{Options: generate.Options{MaxNewTokens: 6, EOS: -1, Strategy: strategy, Temperature: 1, Seed: 7, OnToken: func(step int, ids []int32) error {
			steps = append(steps, step)
			seen = append(seen, ids)
			return nil
		}}}
		g := mustGenerate(t, m, prompts, o)
		if !slices.Equal(steps, []int{0, 1, 2, 3, 4, 5}) {
			t.Errorf("%s: steps %v", strategy, steps)
		}
		for r := range prompts {
			var got []int32
			for _, ids := range seen {
				got = append(got, ids[r])
			}
			if !slices.Equal(got, g.Sequences[r][len(prompts[r]):]) {
				t.Errorf("%s row %d: streamed %v, returned %v", strategy, r, got, g.Sequences[r])
			}
		}
		n := 0
		o.OnToken = func(int, []int32) error {
			n++
			if n == 2 {
				return generate.ErrStop
			}
			return nil
		}
		short := mustGenerate(t, m, prompts, o)
		for r := range prompts {
			if !slices.Equal(short.Sequences[r], g.Sequences[r][:len(prompts[r])+2]) {
				t.Errorf("%s row %d: stopped after 2 steps with %v, want %v", strategy, r, short.Sequences[r], g.Sequences[r][:len(prompts[r])+2])
			}
		}
		boom := errors.New("client went away")
		o.OnToken = func(int, []int32) error { return boom }
		if _, err := generateWith(context.Background(), m, prompts, o); !errors.Is(err, boom) {
			t.Errorf("%s: callback error not returned: %v", strategy, err)
		}
	}
}

// Bad options are clear errors.
func TestGenerateErrors(t *testing.T) {
	m := genModel(t, nil, 2)
	learned := genModel(t, func(c *Config) { c.PositionEmbeddingType = PosLearned }, 2)
	ok := [][]int32{{1, 2}}
	for _, c := range []struct {
		m       *Model
		prompts [][]int32
		o       genOptions
		want    string
	}{
		{m, nil, genOptions{Options: generate.Options{MaxNewTokens: 2}}, "no prompt"},
		{m, [][]int32{{1}, {}}, genOptions{DecoderOptions: DecoderOptions{Pad: true}, Options: generate.Options{MaxNewTokens: 2}}, "prompt 1 is empty"},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 2, Strategy: generate.Sample, Temperature: 1, TopP: 1.5}}, "top_p 1.5 is outside (0, 1]"},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 2, Strategy: generate.Sample, Temperature: 1, TopP: -0.2}}, "top_p -0.2 is outside (0, 1]"},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 2, Strategy: generate.Sample}}, "temperature 0 must be a positive"},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 2, Strategy: generate.Sample, Temperature: -1}}, "temperature -1 must be a positive"},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 2, Strategy: generate.Beam}}, "num_beams 0 must be at least 1"},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 2, NumBeams: 3}}, "needs the beam strategy"},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 2, Strategy: "nucleus"}}, `strategy "nucleus" is not greedy, sample or beam`},
		{m, ok, genOptions{DecoderOptions: DecoderOptions{Mode: "prefix"}, Options: generate.Options{MaxNewTokens: 2}}, `mode "prefix"`},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 2, RepetitionPenalty: -1}}, "repetition_penalty -1"},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 0}}, "max new tokens 0"},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 2, EOS: 99}}, "eos id 99"},
		{m, ok, genOptions{Options: generate.Options{MaxNewTokens: 2, Strategy: generate.Beam, NumBeams: 2, OnToken: func(int, []int32) error { return nil }}}, "beam search"},
		{learned, ok, genOptions{Options: generate.Options{MaxNewTokens: 31}}, "exceed the learned position table's 32"},
		{learned, [][]int32{{1}, {1, 2, 3}}, genOptions{DecoderOptions: DecoderOptions{Pad: true}, Options: generate.Options{MaxNewTokens: 30}}, "exceed the learned position table's 32"},
	} {
		_, err := generateWith(context.Background(), c.m, c.prompts, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.want)
		}
	}
	// A learned table is usable right up to its end.
	if _, err := generateWith(context.Background(), learned, ok, genOptions{Options: generate.Options{MaxNewTokens: 30, EOS: -1}}); err != nil {
		t.Error(err)
	}
}
