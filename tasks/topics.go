package tasks

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/roformer-go/roformer/data/labelled"
)

var fortunesSource = Source{Kind: "deb", Package: "fortunes", Version: "1:1.99.1-7.3", Files: "usr/share/games/fortunes/<category>"}

// topicCategories are the fortunes files used as classes: the ones about a
// clear subject (files of mixed content such as "people", "wisdom" or
// "miscellaneous" are left out).
var topicCategories = []string{"computers", "education", "food", "law", "love", "medicine", "politics", "science", "sports", "work"}

func init() {
	register(&Task{
		Name:        "topics",
		Description: "quotations from Debian's fortunes, classified into 10 subject files: " + strings.Join(topicCategories, ", "),
		Spec:        labelled.Spec{Problem: labelled.SingleLabel, Labels: topicCategories, Metric: "macro_f1"},
		Sources:     []Source{fortunesSource},
		Licence:     "BSD (fortune-mod; see /usr/share/doc/fortunes/copyright in the package)",
		Splits:      "one example per fortune (the %-separated entries), white space collapsed; key: the text; a text in two files dropped; FNV-1a 64 of the key mod 10: 0-7 train, 8 dev, 9 test",
		Settings:    Settings{MaxLength: 128, Epochs: 6, LR: 2e-4, BatchSize: 32},
		Build:       buildTopics,
	})
}

func buildTopics(fsys fs.FS) (*Splits, error) {
	dropped := map[string]int{}
	var items []item
	for _, cat := range topicCategories {
		p := path.Join(fortunesSource.Dir(), "usr", "share", "games", "fortunes", cat)
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("tasks: topics: %w", err)
		}
		for _, entry := range splitFortunes(string(b)) {
			text := strings.Join(strings.Fields(entry), " ")
			if text == "" {
				dropped["empty"]++
				continue
			}
			items = append(items, item{key: text, ex: labelled.Example{Text: text, Label: cat}})
		}
	}
	return split("topics", items, dropped), nil
}

// splitFortunes cuts a fortune file at its separator lines ("%" alone).
func splitFortunes(s string) []string {
	var out []string
	var cur []string
	for _, line := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if line == "%" {
			out = append(out, strings.Join(cur, "\n"))
			cur = cur[:0]
			continue
		}
		cur = append(cur, line)
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, "\n"))
	}
	return out
}
