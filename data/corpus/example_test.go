package corpus_test

import (
	"fmt"

	"github.com/roformer-go/roformer/data/corpus"
)

func ExampleBuiltin() {
	docs, err := corpus.Builtin()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(docs), docs[0].Name, docs[len(docs)-1].Name)
	// Output: 228 moby-dick/etymology sotu/2021_joseph_r_biden_d
}
