package pipeline

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

var embedWords = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "whale", "ship", "sea", "a", ".", "##s", "good", "bad"}

func embedModel(t *testing.T, pooler bool) (*roformer.Model, *tokenizer.Tokenizer) {
	t.Helper()
	m, tok := testmodel.Tiny{Words: embedWords, Seed: 5, MaxPositions: 32, Scale: 8}.Build(t)
	if pooler {
		m.EnablePooler()
		for i := range m.Encoder.Pooler.W.Data {
			m.Encoder.Pooler.W.Data[i] = float32(math.Sin(float64(i)))
		}
	}
	return m, tok
}

func TestPoolingResolve(t *testing.T) {
	plain, _ := embedModel(t, false)
	sim, _ := embedModel(t, true)
	for _, c := range []struct {
		name    string
		p       Pooling
		m       *roformer.Model
		want    Pooling
		wantErr string
	}{
		{"default, no pooler", PoolDefault, plain, PoolMean, ""},
		{"default, pooler", PoolDefault, sim, PoolPooler, ""},
		{"cls", PoolCLS, sim, PoolCLS, ""},
		{"mean with a pooler", PoolMean, sim, PoolMean, ""},
		{"pooler without one", PoolPooler, plain, "", "has no pooler"},
		{"max", PoolMax, plain, PoolMax, ""},
		{"modes joined", "cls+weightedmean", plain, "cls+weightedmean", ""},
		{"unknown", "median", plain, "", `want "pooler" or cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.p.Resolve(c.m)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// Each pooling against the forward pass of the text alone: the [CLS] row,
// the mean of the rows in float64, the pooler output.
func TestEmbedPoolings(t *testing.T) {
	m, tok := embedModel(t, true)
	texts := []string{"the whale", "a good ship .", "the sea", "bad"}
	for _, p := range []Pooling{PoolCLS, PoolMean, PoolPooler} {
		t.Run(string(p), func(t *testing.T) {
			inputs := make([]EmbedInput, len(texts))
			for i, s := range texts {
				inputs[i] = EmbedInput{Text: s}
			}
			got, st, err := Embed(context.Background(), m, tok, inputs, EmbedOptions{Pooling: p})
			if err != nil {
				t.Fatal(err)
			}
			if st.Rows != len(texts) || st.Batches != 1 {
				t.Errorf("stats %+v, want %d rows in 1 batch", st, len(texts))
			}
			H := m.Config.HiddenSize
			for i, s := range texts {
				enc, err := tok.Encode(s, tokenizer.EncodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				T := len(enc.IDs)
				out, err := m.Forward(context.Background(), &roformer.Batch{InputIDs: tokenizer.Int32s(enc.IDs), B: 1, T: T}, nil, roformer.Options{})
				if err != nil {
					t.Fatal(err)
				}
				want := make([]float32, H)
				switch p {
				case PoolCLS:
					copy(want, out.LastHiddenState.Data[:H])
				case PoolPooler:
					copy(want, out.PoolerOutput.Data)
				case PoolMean:
					for j := range H {
						sum := 0.0
						for t := range T {
							sum += float64(out.LastHiddenState.Data[t*H+j])
						}
						want[j] = float32(sum / float64(T))
					}
				}
				if d := maxDiff(got[i], want); d > 1e-5 {
					t.Errorf("%q: batched vector off by %g from the text alone", s, d)
				}
			}
		})
	}
}

func maxDiff(a, b []float32) float64 {
	d := math.Inf(1)
	if len(a) != len(b) {
		return d
	}
	d = 0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// The batches keep to both bounds, run the inputs sorted by length, and the
// vectors come back in the inputs' order whatever the batches were.
func TestEmbedBatches(t *testing.T) {
	m, tok := embedModel(t, false)
	words := strings.Fields("the whale ship sea a good bad")
	var inputs []EmbedInput
	for i := range 23 {
		n := 1 + (i*7)%9
		var b strings.Builder
		for k := range n {
			b.WriteString(words[(i+k)%len(words)] + " ")
		}
		inputs = append(inputs, EmbedInput{Text: b.String()})
	}
	pair := "the sea"
	inputs = append(inputs, EmbedInput{Text: "a whale", TextPair: &pair})
	alone, _, err := Embed(context.Background(), m, tok, inputs, EmbedOptions{MaxBatch: 1, Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		batch, tk int
	}{{"rows 4", 4, 1000}, {"tokens 30", 100, 30}, {"defaults", 0, 0}} {
		t.Run(c.name, func(t *testing.T) {
			got, st, err := Embed(context.Background(), m, tok, inputs, EmbedOptions{MaxBatch: c.batch, MaxBatchTokens: c.tk, Normalize: true})
			if err != nil {
				t.Fatal(err)
			}
			if st.Rows != len(inputs) {
				t.Errorf("%d rows, want %d", st.Rows, len(inputs))
			}
			o, _ := EmbedOptions{MaxBatch: c.batch, MaxBatchTokens: c.tk}.WithDefaults(m)
			minBatches := (len(inputs) + o.MaxBatch - 1) / o.MaxBatch
			if st.Batches < minBatches || st.PaddedTokens > st.Batches*o.MaxBatchTokens || st.PaddedTokens < st.Tokens {
				t.Errorf("stats %+v break max batch %d, max batch tokens %d", st, o.MaxBatch, o.MaxBatchTokens)
			}
			for i := range inputs {
				if d := maxDiff(got[i], alone[i]); d > 1e-6 {
					t.Errorf("input %d: off by %g from its vector alone", i, d)
				}
				norm := 0.0
				for _, x := range got[i] {
					norm += float64(x) * float64(x)
				}
				if math.Abs(norm-1) > 1e-6 {
					t.Errorf("input %d: squared norm %g after Normalize", i, norm)
				}
			}
		})
	}
}

func TestEmbedTooLong(t *testing.T) {
	m, tok := embedModel(t, false)
	long := strings.Repeat("whale ", 40) // 42 tokens, past MaxPositions 32
	_, _, err := Embed(context.Background(), m, tok, []EmbedInput{{Text: "the sea"}, {Text: long}}, EmbedOptions{})
	if err == nil || !strings.Contains(err.Error(), "input 1") || !strings.Contains(err.Error(), "has 42 tokens; the limit is 32") {
		t.Fatalf("error %v, want input 1's 42 tokens against 32", err)
	}
	got, _, err := Embed(context.Background(), m, tok, []EmbedInput{{Text: long}}, EmbedOptions{Truncate: true, MaxLength: 10})
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := Embed(context.Background(), m, tok, []EmbedInput{{Text: strings.Repeat("whale ", 8)}}, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(got[0], want[0]); d != 0 {
		t.Errorf("truncated to 10 tokens: off by %g from the text of its first 8 tokens", d)
	}
	if _, _, err := Embed(context.Background(), m, tok, nil, EmbedOptions{MaxLength: 2}); err == nil {
		t.Error("max length 2 was taken")
	}
}

// Truncate, the server's cut of one text, gives what the tokenizer's
// longest_first truncation gives, for every length.
func TestTruncateMatchesTokenizer(t *testing.T) {
	_, tok := embedModel(t, false)
	text := "the whales sea a good ship bad the sea ."
	enc, err := tok.Encode(text, tokenizer.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for n := 3; n <= len(enc.IDs); n++ {
		ids, types := Truncate(enc, n, false)
		want, err := tok.Encode(text, tokenizer.EncodeOptions{MaxLength: n, Truncation: tokenizer.TruncateLongestFirst})
		if err != nil {
			t.Fatal(err)
		}
		if !equal32(ids, want.IDs) || !equal32(types, want.TypeIDs) {
			t.Errorf("n=%d: got %v %v, want %v %v", n, ids, types, want.IDs, want.TypeIDs)
		}
		left, _ := Truncate(enc, n, true)
		if len(left) != n || left[0] != ids[0] || left[n-1] != ids[n-1] || (n > 2 && left[n-2] != int32(enc.IDs[len(enc.IDs)-2])) {
			t.Errorf("n=%d: left truncation %v of %v", n, left, enc.IDs)
		}
	}
}

func equal32(a []int32, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if int(a[i]) != b[i] {
			return false
		}
	}
	return true
}

func TestNormalize(t *testing.T) {
	v := []float32{3, 4}
	Normalize(v)
	if v[0] != 0.6 || v[1] != 0.8 {
		t.Errorf("Normalize(3, 4) = %v, want [0.6 0.8]", v)
	}
	z := []float32{0, 0}
	Normalize(z)
	if z[0] != 0 || z[1] != 0 {
		t.Errorf("Normalize(0, 0) = %v", z)
	}
}

func TestEmbedCancelled(t *testing.T) {
	m, tok := embedModel(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Embed(ctx, m, tok, []EmbedInput{{Text: "the sea"}}, EmbedOptions{}); err != context.Canceled {
		t.Errorf("error %v, want context.Canceled", err)
	}
}
