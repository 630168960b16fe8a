package server_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/server"
	"github.com/roformer-go/roformer/tokenizer"
)

// A server over a model built in memory; server.Load does the same from a
// model folder, and `roformer serve --model DIR` puts it on a port.
func Example() {
	vocab, _ := tokenizer.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "whale", "sea"})
	tok, _ := tokenizer.New(vocab, tokenizer.DefaultConfig(tokenizer.Bert))
	cfg := roformer.DefaultConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.EmbeddingSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 8, 16, 16, 1, 2, 32
	m, _ := roformer.New(cfg, roformer.HeadMaskedLM)
	m.Init(1)
	s, err := server.New(m, tok, server.Options{Name: "tiny"})
	if err != nil {
		fmt.Println(err)
		return
	}

	req := httptest.NewRequest("POST", "/v1/embed", strings.NewReader(`{"inputs": ["the whale", "the sea"], "pooling": "mean"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var emb server.EmbedResponse
	_ = json.Unmarshal(rec.Body.Bytes(), &emb)
	fmt.Println(rec.Code, len(emb.Embeddings), "vectors of", emb.Dim)

	req = httptest.NewRequest("POST", "/v1/fill-mask", strings.NewReader(`{"inputs": "the [MASK]", "top_k": 2}`))
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var fm server.FillMaskResponse
	_ = json.Unmarshal(rec.Body.Bytes(), &fm)
	fmt.Println(rec.Code, len(fm.Results[0][0]), "candidates for the mask")

	req = httptest.NewRequest("POST", "/v1/fill-mask", strings.NewReader(`{"inputs": "the sea"}`))
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output:
	// 200 2 vectors of 16
	// 200 2 candidates for the mask
	// 400 {"error":"input 0 has no [MASK] token"}
}
