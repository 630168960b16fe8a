package generate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// rotating is a cheap fake Decoder for benchmarks: a row's logits are a
// fixed random row rotated by its last token.
type rotating struct {
	history
	base []float32
}

func (d *rotating) VocabSize() int { return len(d.base) }
func (d *rotating) PadID() int32   { return 0 }

func (d *rotating) logits() []float32 {
	V := len(d.base)
	out := make([]float32, 0, len(d.rows)*V)
	for _, r := range d.rows {
		s := int(r[len(r)-1]) * 7 % V
		out = append(out, d.base[s:]...)
		out = append(out, d.base[:s]...)
	}
	return out
}

func (d *rotating) Prefill(_ context.Context, prompts [][]int32, _ Room) ([]float32, error) {
	d.prefill(prompts)
	return d.logits(), nil
}

func (d *rotating) Step(ctx context.Context, tokens []int32) ([]float32, error) {
	if err := d.step(ctx, tokens); err != nil {
		return nil, err
	}
	return d.logits(), nil
}

// BenchmarkBeamSearch times beam search's own work (the model is a cheap
// fake): the partial top-2K selection against the former full sort of the
// K·V candidates of every step, per beam width and vocabulary.
func BenchmarkBeamSearch(b *testing.B) {
	for _, c := range []struct{ K, V, N int }{{4, 2005, 32}, {8, 2005, 32}, {8, 21128, 8}} {
		r := rand.New(rand.NewPCG(1, 1))
		base := make([]float32, c.V)
		for i := range base {
			base[i] = float32(r.NormFloat64())
		}
		o := Options{Strategy: Beam, NumBeams: c.K, MaxNewTokens: c.N, EOS: -1, LengthPenalty: 1}
		prompts := [][]int32{{1, 2, 3}}
		for _, impl := range []string{"partial", "fullsort"} {
			b.Run(fmt.Sprintf("K%d_V%d_N%d/%s", c.K, c.V, c.N, impl), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					d := &rotating{base: base}
					var err error
					if impl == "partial" {
						_, err = Generate(context.Background(), d, prompts, o)
					} else {
						_, err = refBeamSearch(d, prompts, o)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(c.N)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}
