package batchembed_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/batchembed"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// Run on a small model made in memory (a folder loaded with roformer.Load
// and tokenizer.Load does the same): three lines in, three vectors
// out, in order, each with its index and the line's id.
func ExampleRun() {
	v, _ := tokenizer.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "call", "me", "ishmael", "the", "whale"})
	tok, _ := tokenizer.New(v, tokenizer.DefaultConfig(tokenizer.Bert))
	cfg := roformer.DefaultConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.EmbeddingSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = v.Size(), 8, 8, 1, 2, 16
	m, err := roformer.New(cfg, roformer.HeadBase)
	if err != nil {
		fmt.Println(err)
		return
	}
	m.Init(1)

	dir, _ := os.MkdirTemp("", "embed-example")
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	os.WriteFile(in, []byte(`{"text": "call me ishmael", "id": "a"}
"the whale"
{"text": "the whale", "text_pair": "call me", "id": 7}
`), 0o644)
	st, err := batchembed.Run(context.Background(), m, tok, in, out, batchembed.Options{
		EmbedOptions: pipeline.EmbedOptions{Pooling: pipeline.PoolMean, Normalize: true},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d lines, %d tokens\n", st.Lines, st.Tokens)
	f, _ := os.Open(out)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Index     int
			ID        json.RawMessage
			Embedding []float32
		}
		json.Unmarshal(sc.Bytes(), &line)
		if line.ID == nil {
			line.ID = json.RawMessage("none")
		}
		fmt.Printf("index %d, id %s, %d values\n", line.Index, line.ID, len(line.Embedding))
	}
	// Output:
	// 3 lines, 16 tokens
	// index 0, id "a", 8 values
	// index 1, id none, 8 values
	// index 2, id 7, 8 values
}
