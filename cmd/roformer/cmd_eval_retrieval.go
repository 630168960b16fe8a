package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/retrieval"
	"github.com/roformer-go/roformer/tasks"
)

// retrievalTask reports whether args ask eval for --task retrieval.
func retrievalTask(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--task" || a == "-task":
			return i+1 < len(args) && args[i+1] == "retrieval"
		case a == "--task=retrieval" || a == "-task=retrieval":
			return true
		}
	}
	return false
}

type evalRetrievalOptions struct {
	task, model, queries, corpus, qrels string
	name, split, cache                  string
	pooling, precision                  string
	threads, maxLength, batch, block    int
	maxLineBytes                        int
	rrfK                                float64
	depth                               int
	tuneSplit, tuneMetric, fusion       string
	exactLengths, json, quiet           bool
}

// cmdEvalRetrieval is eval --task retrieval: BM25, the model's dense
// retrieval and their fusion on BEIR files or a built-in retrieval task,
// scored as sentence-transformers' InformationRetrievalEvaluator scores.
func cmdEvalRetrieval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("eval", "--task retrieval [--model DIR] (--queries Q.jsonl --corpus C.jsonl --qrels QRELS.tsv | --name TASK [--split test]) [--json]", stderr)
	var o evalRetrievalOptions
	fs.StringVar(&o.task, "task", "", `"retrieval"`)
	fs.StringVar(&o.model, "model", "", "embedding model folder or Hugging Face model id, for the dense and hybrid lines (without it: BM25 alone)")
	fs.StringVar(&o.queries, "queries", "", `queries, BEIR JSONL: {"_id", "text"} per line`)
	fs.StringVar(&o.corpus, "corpus", "", `corpus, BEIR JSONL: {"_id", "text"} per line (optional "title", prepended with a space)`)
	fs.StringVar(&o.qrels, "qrels", "", "relevance, BEIR TSV: a header, then query-id, corpus-id, score (relevant when > 0)")
	fs.StringVar(&o.name, "name", "", "built-in retrieval task: "+strings.Join(retrievalTaskNames(), ", "))
	fs.StringVar(&o.split, "split", "test", "split of the built-in task: dev or test")
	fs.StringVar(&o.cache, "cache", defaultCacheDir(), "folder the built-in tasks are fetched into")
	fs.StringVar(&o.pooling, "pooling", "", `"mean", "cls" or "pooler" (default: the model's pooler when it has one, else mean)`)
	fs.IntVar(&o.maxLength, "max-length", 0, "tokens per input with [CLS] and [SEP]; longer ones are cut (default: the config's max_position_embeddings)")
	fs.IntVar(&o.batch, "batch", pipeline.DefaultMaxBatch, "inputs per forward pass")
	fs.IntVar(&o.block, "block", 4096, "corpus documents embedded and scored at a time (memory: block vectors plus 100 hits per query)")
	fs.StringVar(&o.fusion, "fusion", "rrf", `how the hybrid lines fuse BM25 and dense: "rrf" (reciprocal ranks, 1/(k + rank)), "convex" (each ranking's scores min-max normalised over its first --rrf-depth hits, then summed with the weights) or "zscore" (the same with each ranking's standard deviation in place of its range)`)
	fs.Float64Var(&o.rrfK, "rrf-k", 60, "the k of reciprocal-rank fusion, 1/(k + rank)")
	fs.IntVar(&o.depth, "rrf-depth", 100, "hits of each ranking fused")
	fs.StringVar(&o.tuneSplit, "tune-fusion", "", "with --name and --model: also a hybrid-tuned line, the dense ranking's weight w (BM25's 1−w) in the --fusion sum chosen from 0, 0.05, …, 1 on this other split (e.g. dev)")
	fs.StringVar(&o.tuneMetric, "tune-metric", "mrr@10", "the metric --tune-fusion maximises")
	fs.BoolVar(&o.exactLengths, "bm25-exact-lengths", false, "BM25 with exact document lengths (default: lengths rounded as Lucene 8+ stores them)")
	fs.BoolVar(&o.json, "json", false, "print the scores as JSON")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress output")
	maxLineBytesFlag(fs, &o.maxLineBytes)
	computeFlags(fs, &o.precision, &o.threads)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	files := o.queries != "" || o.corpus != "" || o.qrels != ""
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case o.task != "retrieval":
		return usagef("--task %q: want retrieval", o.task)
	case files == (o.name != ""):
		return usagef("give --queries, --corpus and --qrels, or --name TASK (one of %s)", strings.Join(retrievalTaskNames(), ", "))
	case files && (o.queries == "" || o.corpus == "" || o.qrels == ""):
		return usagef("--queries, --corpus and --qrels go together")
	case o.batch < 1 || o.block < 1 || o.depth < 1 || o.maxLength < 0 || o.rrfK < 0:
		return usagef("--batch %d, --block %d and --rrf-depth %d must be at least 1, --max-length %d and --rrf-k %g not negative", o.batch, o.block, o.depth, o.maxLength, o.rrfK)
	case o.fusion != "rrf" && o.fusion != "convex" && o.fusion != "zscore":
		return usagef(`--fusion %q: want "rrf", "convex" or "zscore"`, o.fusion)
	case o.tuneSplit != "" && (o.name == "" || o.model == ""):
		return usagef("--tune-fusion needs a built-in task (--name) and a --model: it tunes the fusion on another split of the task")
	case o.tuneSplit != "" && o.tuneSplit == o.split:
		return usagef("--tune-fusion %q is the evaluated split: tune on another one (dev to report test)", o.tuneSplit)
	}
	pool, err := pipeline.ParsePooling(o.pooling)
	if err != nil {
		return usagef("--pooling: %v", err)
	}
	if o.model != "" {
		if err := setupCompute(o.threads, stderr, o.quiet); err != nil {
			return err
		}
	}
	return runEvalRetrieval(ctx, o, pool, stdout, stderr)
}

func retrievalTaskNames() []string { return slices.Sorted(maps.Keys(tasks.RetrievalTasks)) }

// loadRetrieval reads the BEIR files or builds the built-in task's split
// o.split, and its split o.tuneSplit when set (tune, else nil): the task is
// built once for both.
func loadRetrieval(ctx context.Context, o evalRetrievalOptions, stderr io.Writer) (name string, sp, tune *tasks.RetrievalSplit, err error) {
	if o.name != "" {
		build, ok := tasks.RetrievalTasks[o.name]
		if !ok {
			return "", nil, nil, usagef("--name %q: the built-in retrieval tasks are %s", o.name, strings.Join(retrievalTaskNames(), ", "))
		}
		var log io.Writer = stderr
		if o.quiet {
			log = io.Discard
		}
		r, err := build(ctx, o.cache, log)
		if err != nil {
			return "", nil, nil, err
		}
		if sp, err = r.Split(o.split); err != nil {
			return "", nil, nil, usageError{err}
		}
		if o.tuneSplit != "" {
			if tune, err = r.Split(o.tuneSplit); err != nil {
				return "", nil, nil, usageError{fmt.Errorf("--tune-fusion: %w", err)}
			}
		}
		return o.name + "/" + o.split, sp, tune, nil
	}
	read := func(path string, f func(io.Reader, string) error) error {
		fh, err := os.Open(path)
		if err != nil {
			return err
		}
		defer fh.Close()
		return f(fh, path)
	}
	limit := o.maxLineBytes
	sp = &tasks.RetrievalSplit{}
	err = read(o.queries, func(r io.Reader, n string) (err error) { sp.Queries, err = retrieval.ReadDocs(r, n, limit); return })
	if err == nil {
		err = read(o.corpus, func(r io.Reader, n string) (err error) { sp.Corpus, err = retrieval.ReadDocs(r, n, limit); return })
	}
	if err == nil {
		err = read(o.qrels, func(r io.Reader, n string) (err error) { sp.Qrels, err = retrieval.ReadQrels(r, n, limit); return })
	}
	if err == nil {
		if err = sp.Qrels.Check(sp.Queries, sp.Corpus); err != nil {
			err = fmt.Errorf("%s against %s and %s: %w", o.qrels, o.queries, o.corpus, err)
		}
	}
	return o.queries, sp, nil, err
}

// methodScores are one ranking method's scores.
type methodScores struct {
	Method string `json:"method"`
	*retrieval.Scores
}

func runEvalRetrieval(ctx context.Context, o evalRetrievalOptions, pool pipeline.Pooling, stdout, stderr io.Writer) error {
	name, sp, tsp, err := loadRetrieval(ctx, o, stderr)
	if err != nil {
		return err
	}
	c := retrieval.DefaultCutoffs
	progress := func(format string, a ...any) {
		if !o.quiet {
			fmt.Fprintf(stderr, "roformer: "+format+"\n", a...)
		}
	}
	var embed retrieval.Embedder
	if o.model != "" {
		m, err := openModel(&o.model, o.precision, pipeline.OpenOptions{})
		if err != nil {
			return err
		}
		eo := pipeline.EmbedOptions{Pooling: pool, Normalize: true, MaxLength: o.maxLength, Truncate: true, MaxBatch: o.batch}
		embed = func(ctx context.Context, texts []string) ([][]float32, error) {
			in := make([]pipeline.EmbedInput, len(texts))
			for i, t := range texts {
				in[i] = pipeline.EmbedInput{Text: t}
			}
			v, _, err := pipeline.Embed(ctx, m.Model, m.Tokenizer, in, eo)
			return v, err
		}
	}
	ids, bm25, dense, err := rankRetrieval(ctx, o, sp, embed, progress)
	if err != nil {
		return err
	}
	rankings := []map[string][]retrieval.Hit{bm25}
	methods := []string{"bm25"}
	var tuned *retrieval.Tuned
	if embed != nil {
		hybrid, err := fuseRankings(ids, bm25, dense, o.fuser(), nil)
		if err != nil {
			return err
		}
		rankings = append(rankings, dense, hybrid)
		methods = append(methods, "dense", "hybrid")
		if o.tuneSplit != "" {
			tids, tbm25, tdense, err := rankRetrieval(ctx, o, tsp, embed, progress)
			if err != nil {
				return err
			}
			t, err := retrieval.TuneFusion(tids, tbm25, tdense, tsp.Qrels, c, o.fuser(), o.tuneMetric, nil)
			if err != nil {
				return usageError{fmt.Errorf("--tune-fusion: %w", err)}
			}
			progress("fusion tuned on %s: dense weight %.2f (%s %.4f there)", o.tuneSplit, t.Weight, t.Metric, t.Score)
			h, err := fuseRankings(ids, bm25, dense, o.fuser(), []float64{1 - t.Weight, t.Weight})
			if err != nil {
				return err
			}
			rankings = append(rankings, h)
			methods = append(methods, "hybrid-tuned")
			tuned = &t
		}
	}
	var out []methodScores
	for i, r := range rankings {
		s, err := retrieval.Evaluate(ids, r, sp.Qrels, c)
		if err != nil {
			return err
		}
		out = append(out, methodScores{methods[i], s})
	}
	if o.json {
		j := map[string]any{"task": name, "queries": len(sp.Queries), "corpus": len(sp.Corpus), "methods": out}
		if embed != nil {
			j["fusion"] = o.fusion
		}
		if tuned != nil {
			j["fusion_tuned"] = map[string]any{"split": o.tuneSplit, "dense_weight": tuned.Weight, "metric": tuned.Metric, "score": tuned.Score}
		}
		b, err := json.MarshalIndent(j, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(stdout, "%s: %d queries (%d with a relevant document), %d documents\n", name, len(sp.Queries), out[0].Queries, len(sp.Corpus))
	first := []string{"mrr@10", "ndcg@10", "recall@1", "recall@10", "recall@100", "map@100"}
	conv := "" // the fusion, named on the hybrid lines when not rrf
	if o.fusion != "rrf" {
		conv = o.fusion + ", "
	}
	for _, m := range out {
		var b strings.Builder
		fmt.Fprintf(&b, "%-6s", m.Method)
		switch {
		case m.Method == "hybrid-tuned":
			fmt.Fprintf(&b, " (%sdense weight %.2f, tuned on %s)", conv, tuned.Weight, o.tuneSplit)
		case m.Method == "hybrid" && conv != "":
			fmt.Fprintf(&b, " (%s)", o.fusion)
		}
		for _, n := range first {
			fmt.Fprintf(&b, " %s %.4f", n, m.Metrics[n])
		}
		for _, n := range m.Names {
			if !slices.Contains(first, n) {
				fmt.Fprintf(&b, " %s %.4f", n, m.Metrics[n])
			}
		}
		fmt.Fprintln(stdout, b.String())
	}
	return nil
}

// rankRetrieval ranks the corpus of sp for each query by BM25 and, when
// embed is not nil, by the model's vectors (dense is nil otherwise).
func rankRetrieval(ctx context.Context, o evalRetrievalOptions, sp *tasks.RetrievalSplit, embed retrieval.Embedder, progress func(string, ...any)) (ids []string, bm25, dense map[string][]retrieval.Hit, err error) {
	k := max(retrieval.DefaultCutoffs.Max(), o.depth)
	ids = make([]string, len(sp.Queries))
	for i, q := range sp.Queries {
		ids[i] = q.ID
	}
	start := time.Now()
	bm25 = retrieval.BM25Search(sp.Queries, sp.Corpus, k, retrieval.BM25Options{ExactLengths: o.exactLengths})
	progress("bm25: %d queries over %d documents in %.1fs", len(sp.Queries), len(sp.Corpus), time.Since(start).Seconds())
	if embed == nil {
		return ids, bm25, nil, nil
	}
	start = time.Now()
	if dense, err = retrieval.DenseSearch(ctx, embed, sp.Queries, sp.Corpus, k, o.block); err != nil {
		return nil, nil, nil, err
	}
	progress("dense: %d queries and %d documents embedded and searched in %.1fs", len(sp.Queries), len(sp.Corpus), time.Since(start).Seconds())
	return ids, bm25, dense, nil
}

// fuser is the fusion --fusion names.
func (o evalRetrievalOptions) fuser() retrieval.Fuser {
	switch o.fusion {
	case "convex":
		return retrieval.Convex(o.depth)
	case "zscore":
		return retrieval.ZScore(o.depth)
	}
	return retrieval.RRF(o.rrfK, o.depth)
}

// fuseRankings fuses BM25's and the dense rankings query by query, with
// weights (nil: 1 each).
func fuseRankings(ids []string, bm25, dense map[string][]retrieval.Hit, fuse retrieval.Fuser, weights []float64) (map[string][]retrieval.Hit, error) {
	out := make(map[string][]retrieval.Hit, len(ids))
	for _, q := range ids {
		h, err := fuse(weights, bm25[q], dense[q])
		if err != nil {
			return nil, err
		}
		out[q] = h
	}
	return out, nil
}
