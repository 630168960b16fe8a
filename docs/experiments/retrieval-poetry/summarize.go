//go:build ignore

// summarize reads the eval --task retrieval --json files of the current
// folder and writes summary.json (-json) and, to stdout, summary.md: per
// split of poetry-zh, BM25, the untuned Chinese model (dense, hybrid) and
// the MNRL fine-tuned runs (-runs, by default run.sh's two learning rates)
// over their seeds (-seeds; mean and Student-t 95% interval,
// experiment.SeedSpread), and the two retrieval targets. Where the
// files have a hybrid-tuned line (eval --tune-fusion dev), its rows and its
// target are added.
//
//	go run summarize.go > summary.md
//	cd full-48k && go run ../summarize.go -script run-full.sh -runs "mnrl48k:MNRL all pairs" > summary.md
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/experiment"
)

var (
	seeds   []int
	splits  = []string{"dev", "test"}
	metrics = []string{"mrr@10", "ndcg@10", "recall@1", "recall@10", "recall@100", "map@100"}
	heads   = []string{"MRR@10", "nDCG@10", "R@1", "R@10", "R@100", "MAP@100"}
	// runs are the fine-tuning settings: file prefix and row label.
	runs []struct{ prefix, label string }
)

const tuned = "hybrid-tuned"

var script, jsonOut string

type evalFile struct {
	Tuned *struct {
		Weight float64 `json:"dense_weight"`
	} `json:"fusion_tuned"`
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
	// TunedGEMax is the same for the hybrid-tuned line, where there is one.
	TunedGEMax map[string][]bool `json:"hybrid_tuned_ge_max_bm25_dense_mrr10_per_seed,omitempty"`
	// TunedWeight is the dense weight chosen on dev, per seed.
	TunedWeight map[string][]float64 `json:"hybrid_tuned_dense_weight_per_seed,omitempty"`
}

func main() {
	list := flag.String("runs", "mnrl:MNRL lr 2e-4,mnrl-lr1e-3:MNRL lr 1e-3", "fine-tuning runs, prefix:label, comma-separated (files PREFIX-seedN-SPLIT.json)")
	seedList := flag.String("seeds", "1,2,3", "the runs' seeds, comma-separated")
	flag.StringVar(&script, "script", "run.sh", "the script that made the files, for the header")
	flag.StringVar(&jsonOut, "json", "summary.json", "where to write the summary's JSON")
	flag.Parse()
	for _, f := range strings.Split(*seedList, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "summarize: -seeds %q: %v\n", *seedList, err)
			os.Exit(2)
		}
		seeds = append(seeds, n)
	}
	for _, r := range strings.Split(*list, ",") {
		p, l, ok := strings.Cut(r, ":")
		if !ok {
			fmt.Fprintf(os.Stderr, "summarize: -runs %q: want prefix:label\n", r)
			os.Exit(2)
		}
		runs = append(runs, struct{ prefix, label string }{p, l})
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "summarize:", err)
		os.Exit(1)
	}
}

func run() error {
	out := map[string]*Split{}
	var md strings.Builder
	md.WriteString("Metrics of `roformer eval --task retrieval --json` (" + script + "); MNRL: mean over seeds " +
		fmt.Sprint(seeds) + " [Student-t 95% interval of the mean].\n")
	for _, sp := range splits {
		f, bm, err := read("bm25-" + sp + ".json")
		if err != nil {
			return err
		}
		unFile, un, err := read("untuned-" + sp + ".json")
		if err != nil {
			return err
		}
		s := &Split{Task: f.Task, Queries: f.Queries, Corpus: f.Corpus,
			DoublingRatio: map[string][]float64{}, HybridGEMax: map[string][]bool{}}
		s.Rows = append(s.Rows, Row{Name: "BM25", Value: bm["bm25"]},
			Row{Name: "untuned dense", Value: un["dense"]}, Row{Name: "untuned hybrid", Value: un["hybrid"]})
		ge := func(m map[string]map[string]float64, method string) bool {
			return m[method]["mrr@10"] >= max(m["bm25"]["mrr@10"], m["dense"]["mrr@10"])
		}
		s.HybridGEMax["untuned"] = []bool{ge(un, "hybrid")}
		_, hasTuned := un[tuned]
		if hasTuned {
			s.Rows = append(s.Rows, Row{Name: "untuned " + tuned, Value: un[tuned]})
			s.TunedGEMax, s.TunedWeight = map[string][]bool{"untuned": {ge(un, tuned)}}, map[string][]float64{}
		}
		for _, ru := range runs {
			methods := []string{"dense", "hybrid"}
			if hasTuned {
				methods = append(methods, tuned)
			}
			rows := make([]Row, len(methods))
			for i, me := range methods {
				rows[i] = Row{Name: ru.label + " " + me, Seeds: map[string][]float64{}, Spread: map[string]experiment.Spread{}}
			}
			for _, seed := range seeds {
				ef, m, err := read(fmt.Sprintf("%s-seed%d-%s.json", ru.prefix, seed, sp))
				if err != nil {
					return err
				}
				for i, me := range methods {
					if _, ok := m[me]; !ok {
						return fmt.Errorf("%s seed %d %s: no %s line", ru.prefix, seed, sp, me)
					}
					for _, k := range metrics {
						rows[i].Seeds[k] = append(rows[i].Seeds[k], m[me][k])
					}
				}
				s.DoublingRatio[ru.label] = append(s.DoublingRatio[ru.label], m["dense"]["mrr@10"]/un["dense"]["mrr@10"])
				s.HybridGEMax[ru.label] = append(s.HybridGEMax[ru.label], ge(m, "hybrid"))
				if hasTuned {
					s.TunedGEMax[ru.label] = append(s.TunedGEMax[ru.label], ge(m, tuned))
					s.TunedWeight[ru.label] = append(s.TunedWeight[ru.label], ef.Tuned.Weight)
				}
			}
			for i := range rows {
				for _, k := range metrics {
					rows[i].Spread[k] = experiment.SeedSpread(rows[i].Seeds[k])
				}
			}
			s.Rows = append(s.Rows, rows...)
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
		if hasTuned {
			fmt.Fprintf(&md, "%s MRR@10 ≥ max(BM25, dense), untuned: %v (dense weight %.2f, chosen on dev).\n", tuned, s.TunedGEMax["untuned"], unFile.Tuned.Weight)
		}
		for _, ru := range runs {
			fmt.Fprintf(&md, "%s: dense MRR@10 / untuned dense MRR@10 per seed %s (the doubling target needs ≥ 2); hybrid ≥ max(BM25, dense) per seed %v.\n",
				ru.label, fmtList(s.DoublingRatio[ru.label]), s.HybridGEMax[ru.label])
			if hasTuned {
				fmt.Fprintf(&md, "%s: %s ≥ max(BM25, dense) per seed %v, dense weights chosen on dev %s.\n",
					ru.label, tuned, s.TunedGEMax[ru.label], fmtList(s.TunedWeight[ru.label]))
			}
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
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
