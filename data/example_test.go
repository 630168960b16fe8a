package data_test

import (
	"fmt"
	"strings"

	"github.com/roformer-go/roformer/data"
)

func ExamplePack() {
	// A toy encoder: one id per word, looked up in a tiny vocabulary.
	words := map[string]int{"the": 5, "whale": 6, "sea": 7, "ship": 8}
	enc := data.EncoderFunc(func(text string) []int {
		var ids []int
		for _, w := range strings.Fields(text) {
			ids = append(ids, words[w])
		}
		return ids
	})
	v := data.Vocab{Size: 9, PAD: 0, CLS: 2, SEP: 3, MASK: 4}
	docs := []data.Document{{Name: "toy", Text: "the whale\nthe sea\nship the sea the whale"}}
	p, err := data.Pack(docs, enc, v, data.PackOptions{SeqLen: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range p.Seqs {
		fmt.Println(s)
	}
	l, _ := data.NewLoader(p.Seqs, v, data.LoaderOptions{BatchSize: 2, SeqLen: 8, Seed: 1})
	b := l.Next()
	fmt.Println(b.B, b.T, len(b.InputIDs), l.Position())
	// Output:
	// [2 5 6 5 7 3]
	// [2 8 5 7 5 6 3]
	// 2 8 16 {1 0}
}
