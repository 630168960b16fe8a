package generate_test

import (
	"context"
	"fmt"
	"math"

	"github.com/roformer-go/roformer/generate"
)

// bigram is a tiny Decoder: the logits of a row's next token depend only on
// its last token, log P(next | last) from a fixed table.
type bigram struct {
	probs [][]float64
	last  []int32 // each row's last token: the whole cache this model needs
}

func (m *bigram) VocabSize() int { return len(m.probs) }
func (m *bigram) PadID() int32   { return 0 }

func (m *bigram) logits() []float32 {
	var out []float32
	for _, t := range m.last {
		for _, p := range m.probs[t] {
			out = append(out, float32(math.Log(p)))
		}
	}
	return out
}

func (m *bigram) Prefill(_ context.Context, prompts [][]int32, _ generate.Room) ([]float32, error) {
	m.last = nil
	for _, p := range prompts {
		m.last = append(m.last, p[len(p)-1])
	}
	return m.logits(), nil
}

func (m *bigram) Step(_ context.Context, tokens []int32) ([]float32, error) {
	m.last = append(m.last[:0], tokens...)
	return m.logits(), nil
}

func (m *bigram) Reorder(rows []int) {
	last := make([]int32, len(rows))
	for i, j := range rows {
		last[i] = m.last[j]
	}
	m.last = last
}

// Greedy decoding takes 1 (P 0.5) then 0 (0.4): P 0.2; beam search with two
// beams finds 2 then 2: P 0.4·0.9 = 0.36. Id 0 is also the EOS here, so the
// greedy path ends there, and the beam's score is log 0.36 over its length
// (3: the prompt and two ids).
func Example() {
	m := &bigram{probs: [][]float64{{0.1, 0.5, 0.4}, {0.4, 0.3, 0.3}, {0.05, 0.05, 0.9}}}
	prompts := [][]int32{{0}}
	greedy, err := generate.Generate(context.Background(), m, prompts, generate.Options{MaxNewTokens: 2, EOS: 0})
	if err != nil {
		fmt.Println(err)
		return
	}
	beam, err := generate.Generate(context.Background(), m, prompts, generate.Options{MaxNewTokens: 2, EOS: 0,
		Strategy: generate.Beam, NumBeams: 2, LengthPenalty: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("greedy:", greedy.Sequences[0])
	fmt.Printf("beam:   %v score %.4f = log(0.36)/3 = %.4f\n", beam.Sequences[0], beam.BeamScores[0], math.Log(0.36)/3)
	// Output:
	// greedy: [0 1 0]
	// beam:   [0 2 2] score -0.3406 = log(0.36)/3 = -0.3406
}
