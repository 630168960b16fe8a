package server

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// A RoFormer-Sim folder served as it is (its causal-lm head from
// config.json): POST /embed, /v1/embed and /v1/embeddings give its pooler
// vectors, the UniLM (here bidirectional) encoding of the reference, within
// 1e-4 of the family fixture's pooler_output; POST /similarity scores with
// those vectors, not with the mean or the CLS state.
func TestSimPoolerRoutes(t *testing.T) {
	for r, row := range testutil.SimRows(t) {
		t.Run(fmt.Sprint("row", r), func(t *testing.T) {
			s, err := Load(row.Dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.model.Head != roformer.HeadCausalLM || s.model.EncoderMask() != roformer.MaskUniLM {
				t.Fatalf("head %s, mask %s", s.model.Head, s.model.EncoderMask())
			}
			if enc, err := s.tok.Encode(row.Text, tokenizer.EncodeOptions{}); err != nil || !slices.Equal(tokenizer.Int32s(enc.IDs), row.IDs) {
				t.Fatalf("%q does not encode to the fixture's %v (%v)", row.Text, row.IDs, err)
			}
			text, _ := json.Marshal(row.Text)
			unit := slices.Clone(row.Pooler)
			pipeline.Normalize(unit)

			var tei [][]float32
			if code, kind := teiCall(t, s, "/embed", `{"inputs": `+string(text)+`, "normalize": false}`, &tei); code != 200 || len(tei) != 1 {
				t.Fatalf("/embed: %d %s", code, kind)
			}
			testutil.AssertClose(t, "/embed", tei[0], row.Pooler, 1e-4, 0)
			if code, kind := teiCall(t, s, "/embed", `{"inputs": [`+string(text)+`]}`, &tei); code != 200 || len(tei) != 1 {
				t.Fatalf("/embed normalized: %d %s", code, kind)
			}
			testutil.AssertClose(t, "/embed normalized", tei[0], unit, 1e-4, 0)

			var v1 EmbedResponse
			if code, msg := call(t, s, "POST", "/v1/embed", `{"inputs": [`+string(text)+`]}`, &v1); code != 200 {
				t.Fatalf("/v1/embed: %d %s", code, msg)
			}
			testutil.AssertClose(t, "/v1/embed", v1.Embeddings[0], row.Pooler, 1e-4, 0)
			if code, msg := call(t, s, "POST", "/v1/embed", `{"inputs": [`+string(text)+`], "pooling": "pooler", "normalize": true}`, &v1); code != 200 {
				t.Fatalf("/v1/embed pooler: %d %s", code, msg)
			}
			testutil.AssertClose(t, "/v1/embed pooler normalized", v1.Embeddings[0], unit, 1e-4, 0)

			var oa struct {
				Data []struct {
					Embedding []float32 `json:"embedding"`
				} `json:"data"`
			}
			code, _, body := post(t, s, "/v1/embeddings", `{"input": `+string(text)+`, "model": "sim"}`)
			if code != 200 || json.Unmarshal(body, &oa) != nil || len(oa.Data) != 1 {
				t.Fatalf("/v1/embeddings: %d %s", code, body)
			}
			testutil.AssertClose(t, "/v1/embeddings", oa.Data[0].Embedding, unit, 1e-4, 0)

			// /similarity: the cosines of the pooler vectors.
			others := []string{row.Text, "w5 w6 w7", "w8 w9 w49 w28"}
			var pooled, cls [][]float32
			for _, o := range others {
				pooled = append(pooled, alone(t, s.model, s.tok, o, pipeline.PoolPooler))
				cls = append(cls, alone(t, s.model, s.tok, o, pipeline.PoolCLS))
			}
			sentences, _ := json.Marshal(others)
			var scores []float64
			if code, kind := teiCall(t, s, "/similarity", `{"inputs": {"source_sentence": `+string(text)+`, "sentences": `+string(sentences)+`}}`, &scores); code != 200 || len(scores) != len(others) {
				t.Fatalf("/similarity: %d %s %v", code, kind, scores)
			}
			for i := range others {
				want, other := cosine(row.Pooler, pooled[i]), cosine(cls[0], cls[i])
				if math.Abs(scores[i]-want) > 1e-4 {
					t.Errorf("/similarity %d: %g, the pooler vectors' cosine %g (the CLS states' %g)", i, scores[i], want, other)
				}
				if i > 0 && math.Abs(want-other) < 1e-3 {
					t.Errorf("/similarity %d: the pooler (%g) and CLS (%g) cosines are too close to tell apart", i, want, other)
				}
			}
		})
	}
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}
