//go:build ignore

// pairs writes the training pairs of the built-in retrieval task poetry-zh
// (tasks.PoetryRetrieval: a Tang couplet as the anchor, the rest of its
// poem as the positive, training authors only) as JSONL rows
// {"anchor", "positive"} for roformer finetune --objective mnrl, or with
// -text the training poems as plain text, one poem a line (the query
// couplet, then the rest), for roformer vocab and pretrain:
//
//	go run pairs.go [-cache DIR] [-n N] [-seed S] [-text] > train.jsonl
//
// With -n it writes N pairs drawn without replacement (a seeded shuffle,
// then the first N), else all of them in canonical order. No dev or test
// poem is in either output: the task splits by author.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/tasks"
)

func main() {
	home, _ := os.UserHomeDir()
	cache := flag.String("cache", filepath.Join(home, ".cache", "roformer", "tasks"), "folder the built-in tasks are fetched into")
	n := flag.Int("n", 0, "pairs to write, drawn by a seeded shuffle (0: all, in canonical order)")
	seed := flag.Uint64("seed", 1, "seed of the draw")
	text := flag.Bool("text", false, "write each pair as one line of text (anchor then positive) instead of JSONL")
	flag.Parse()
	if err := run(*cache, *n, *seed, *text); err != nil {
		fmt.Fprintln(os.Stderr, "pairs:", err)
		os.Exit(1)
	}
}

func run(cache string, n int, seed uint64, text bool) error {
	r, err := tasks.PoetryRetrieval(context.Background(), cache, os.Stderr)
	if err != nil {
		return err
	}
	p := r.Train
	if n < 0 || n > len(p) {
		return fmt.Errorf("-n %d: the task has %d training pairs", n, len(p))
	}
	if n > 0 {
		p = append([]tasks.TrainPair(nil), p...)
		rand.New(rand.NewPCG(seed, 0)).Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		p = p[:n]
	}
	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, x := range p {
		if text {
			if _, err := fmt.Fprintf(w, "%s%s\n", x.Anchor, x.Positive); err != nil {
				return err
			}
			continue
		}
		if err := enc.Encode(x); err != nil {
			return err
		}
	}
	return w.Flush()
}
