package tasks

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/roformer-go/roformer/data/labelled"
)

var sentimentSource = Source{Kind: "npm", Package: "sentiment", Version: "5.0.2", Files: "test/fixtures/{amazon,imdb,yelp}.json"}

func init() {
	register(&Task{
		Name:        "sentiment",
		Description: "UCI Sentiment Labelled Sentences (Kotzias et al., KDD 2015): 3 × 1,000 review sentences from Amazon, IMDB and Yelp, negative or positive (an SST-2 stand-in)",
		Spec:        labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"negative", "positive"}, Metric: "accuracy", Positive: "positive"},
		Sources:     []Source{sentimentSource},
		Licence:     "the sentences: CC BY 4.0 (UCI Machine Learning Repository); the npm package: MIT",
		Splits:      "key: the sentence; records without a class dropped; FNV-1a 64 of the key mod 10: 0-7 train, 8 dev, 9 test",
		Settings:    Settings{MaxLength: 64, Epochs: 6, LR: 2e-4, BatchSize: 32},
		Build:       buildSentiment,
	})
}

func buildSentiment(fsys fs.FS) (*Splits, error) {
	dropped := map[string]int{}
	var items []item
	for _, site := range []string{"amazon", "imdb", "yelp"} {
		p := path.Join(sentimentSource.Dir(), "package", "test", "fixtures", site+".json")
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("tasks: sentiment: %w", err)
		}
		var recs []struct {
			Text  string `json:"text"`
			Class *int   `json:"class"`
		}
		if err := json.Unmarshal(b, &recs); err != nil {
			return nil, fmt.Errorf("tasks: sentiment: %s: %w", p, err)
		}
		for _, r := range recs {
			text := strings.TrimSpace(r.Text)
			if r.Class == nil || text == "" {
				dropped["no text or class"]++
				continue
			}
			if *r.Class != 0 && *r.Class != 1 {
				return nil, fmt.Errorf("tasks: sentiment: %s: class %d is neither 0 nor 1", p, *r.Class)
			}
			items = append(items, item{key: text, ex: labelled.Example{Text: text, Label: []string{"negative", "positive"}[*r.Class]}})
		}
	}
	return split("sentiment", items, dropped), nil
}
