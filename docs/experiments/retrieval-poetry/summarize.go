//go:build ignore

// summarize reads the eval --task retrieval --json files of this folder
// (run.sh) and writes summary.json and, to stdout, summary.md: per split of
// poetry-zh, BM25, the untuned Chinese model made by run.sh (dense, hybrid)
// and the MNRL fine-tuned ones (two learning rates) over their seeds (mean
// and Student-t 95% interval, experiment.SeedSpread), and the two
// retrieval targets.
//
//	go run summarize.go > summary.md
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/roformer-go/roformer/experiment"
)

var (
	seeds   = []int{1, 2, 3}
	splits  = []string{"dev", "test"}
	metrics = []string{"mrr@10", "ndcg@10", "recall@1", "recall@10", "recall@100", "map@100"}
	heads   = []string{"MRR@10", "nDCG@10", "R@1", "R@10", "R@100", "MAP@100"}
	// runs are the fine-tuning settings: file prefix and row label.
	runs = []struct{ prefix, label string }{{"mnrl", "MNRL lr 2e-4"}, {"mnrl-lr1e-3", "MNRL lr 1e-3"}}
)

type evalFile struct {
	Task    string `json:"task"`
	Queries int    `json:"queries"`
	Corpus  int    `json:"corpus"`
	Methods []struct {
		Method  string             `json:"method"`
		Metrics map[string]float64 `json:"metrics"`
	} `json:"methods"`
}

// read returns the metrics of file name by method.
func read(name string) (*evalFile, map[string]map[string]float64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, nil, err
	}
	var f evalFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	m := map[string]map[string]float64{}
	for _, x := range f.Methods {
		m[x.Method] = x.Metrics
	}
	return &f, m, nil
}

// Row is one line of the table: a value per metric, or a spread over seeds.
type Row struct {
	Name   string                       `json:"name"`
	Value  map[string]float64           `json:"value,omitempty"`
	Seeds  map[string][]float64         `json:"per_seed,omitempty"`
	Spread map[string]experiment.Spread `json:"spread,omitempty"`
}

type Split struct {
	Task    string `json:"task"`
	Queries int    `json:"queries"`
	Corpus  int    `json:"corpus"`
	Rows    []Row  `json:"rows"`
	// Targets: the issue's, on MRR@10.
	DoublingRatio map[string][]float64 `json:"mnrl_over_untuned_mrr10_per_seed"`
	HybridGEMax   map[string][]bool    `json:"hybrid_ge_max_bm25_dense_mrr10_per_seed"` // "untuned": one
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "summarize:", err)
		os.Exit(1)
	}
}

func run() error {
	out := map[string]*Split{}
	var md strings.Builder
	md.WriteString("Metrics of `roformer eval --task retrieval --json` (run.sh); MNRL: mean over seeds " +
		fmt.Sprint(seeds) + " [Student-t 95% interval of the mean].\n")
	for _, sp := range splits {
		f, bm, err := read("bm25-" + sp + ".json")
		if err != nil {
			return err
		}
		_, un, err := read("untuned-" + sp + ".json")
		if err != nil {
			return err
		}
		s := &Split{Task: f.Task, Queries: f.Queries, Corpus: f.Corpus,
			DoublingRatio: map[string][]float64{}, HybridGEMax: map[string][]bool{}}
		s.Rows = append(s.Rows, Row{Name: "BM25", Value: bm["bm25"]},
			Row{Name: "untuned dense", Value: un["dense"]}, Row{Name: "untuned hybrid", Value: un["hybrid"]})
		s.HybridGEMax["untuned"] = []bool{un["hybrid"]["mrr@10"] >= max(un["bm25"]["mrr@10"], un["dense"]["mrr@10"])}
		for _, ru := range runs {
			dense := Row{Name: ru.label + " dense", Seeds: map[string][]float64{}, Spread: map[string]experiment.Spread{}}
			hybrid := Row{Name: ru.label + " hybrid", Seeds: map[string][]float64{}, Spread: map[string]experiment.Spread{}}
			for _, seed := range seeds {
				_, m, err := read(fmt.Sprintf("%s-seed%d-%s.json", ru.prefix, seed, sp))
				if err != nil {
					return err
				}
				for _, k := range metrics {
					dense.Seeds[k] = append(dense.Seeds[k], m["dense"][k])
					hybrid.Seeds[k] = append(hybrid.Seeds[k], m["hybrid"][k])
				}
				s.DoublingRatio[ru.label] = append(s.DoublingRatio[ru.label], m["dense"]["mrr@10"]/un["dense"]["mrr@10"])
				s.HybridGEMax[ru.label] = append(s.HybridGEMax[ru.label], m["hybrid"]["mrr@10"] >= max(m["bm25"]["mrr@10"], m["dense"]["mrr@10"]))
			}
			for _, k := range metrics {
				dense.Spread[k] = experiment.SeedSpread(dense.Seeds[k])
				hybrid.Spread[k] = experiment.SeedSpread(hybrid.Seeds[k])
			}
			s.Rows = append(s.Rows, dense, hybrid)
		}
		out[sp] = s

		fmt.Fprintf(&md, "\n%s: %d queries, %d documents\n\n| method | %s |\n|---|%s\n", s.Task, s.Queries, s.Corpus,
			strings.Join(heads, " | "), strings.Repeat("---|", len(heads)))
		for _, r := range s.Rows {
			cells := make([]string, len(metrics))
			for i, k := range metrics {
				if r.Spread != nil {
					cells[i] = fmt.Sprintf("%.4f %s", float64(r.Spread[k].Mean), r.Spread[k].FormatCI(4))
				} else {
					cells[i] = fmt.Sprintf("%.4f", r.Value[k])
				}
			}
			fmt.Fprintf(&md, "| %s | %s |\n", r.Name, strings.Join(cells, " | "))
		}
		fmt.Fprintf(&md, "\nhybrid MRR@10 ≥ max(BM25, dense), untuned: %v.\n", s.HybridGEMax["untuned"])
		for _, ru := range runs {
			fmt.Fprintf(&md, "%s: dense MRR@10 / untuned dense MRR@10 per seed %s (the doubling target needs ≥ 2); hybrid ≥ max(BM25, dense) per seed %v.\n",
				ru.label, fmtList(s.DoublingRatio[ru.label]), s.HybridGEMax[ru.label])
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile("summary.json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	_, err = os.Stdout.WriteString(md.String())
	return err
}

func fmtList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(s, ", ")
}
