package bpe_test

import (
	"fmt"
	"strings"

	"github.com/roformer-go/roformer/tokenizer/bpe"
)

func Example() {
	texts := []string{
		"And God said, Let there be light: and there was light.",
		"Y dijo Dios: Sea la luz: y fué la luz.",
		"And God saw the light, that it was good.",
		"Y vió Dios que la luz era buena.",
	}
	m, err := bpe.Train(texts, 340)
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := m.Encode("God saw the light.")
	var toks []string
	for _, id := range ids {
		toks = append(toks, m.Token(id))
	}
	fmt.Println(strings.Join(toks, " "))
	fmt.Println(m.Decode(append(append([]int{bpe.BosID}, ids...), bpe.EosID)))
	// Output:
	// God</w> sa w</w> th e</w> light .</w>
	// God saw the light.
}
