package pipeline_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

// Quantize writes a sentence-transformers folder again with its
// transformer's weights in int8: codes and per-channel scales, loaded as
// they are (in int8 where the CPU runs it: oneDNN), the tokenizer and the
// modules copied.
func ExampleQuantize() {
	tmp, err := os.MkdirTemp("", "quantize")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	res, err := pipeline.Quantize("../sentence/testdata/st/mean", filepath.Join(tmp, "int8"), roformer.PrecisionInt8)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("read:", res.Read)
	fmt.Println("copied:", res.Copied)
	m, err := pipeline.Open(res.Dir, pipeline.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored:", m.DTypes)
	fmt.Println(m.Sentence)
	// Output:
	// read: [pytorch_model.bin]
	// copied: [1_Pooling/config.json README.md config_sentence_transformers.json expected.json modules.json sentence_bert_config.json special_tokens_map.json tokenizer_config.json vocab.txt]
	// stored: map[BF16:1 F32:36 I8:12]
	// mean; max_seq_length 64
}
