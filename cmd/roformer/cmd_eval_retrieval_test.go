package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/retrieval"
	"github.com/roformer-go/roformer/tasks"
)

// retrievalFiles writes a BEIR set of 12 documents of the tiny model's
// words and 6 queries, each the very text of one document (and query q5
// also judged relevant to a second document), and returns the three paths.
func retrievalFiles(t *testing.T, dir string) (queries, corpus, qrels string) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	var c, q strings.Builder
	qr := "query-id\tcorpus-id\tscore\n"
	for i := 0; i < 12; i++ {
		w := make([]string, 3+r.IntN(4))
		for j := range w {
			w[j] = ftWords[5+r.IntN(len(ftWords)-5)]
		}
		text := strings.Join(w, " ") + fmt.Sprintf(" %s", ftWords[5+i%15])
		line, _ := json.Marshal(map[string]string{"_id": fmt.Sprintf("d%d", i), "text": text})
		c.Write(append(line, '\n'))
		if i%2 == 0 {
			line, _ := json.Marshal(map[string]string{"_id": fmt.Sprintf("q%d", i/2), "text": text})
			q.Write(append(line, '\n'))
			qr += fmt.Sprintf("q%d\td%d\t1\n", i/2, i)
		}
	}
	qr += "q5\td1\t2\nq4\td3\t0\n"
	queries, corpus, qrels = filepath.Join(dir, "q.jsonl"), filepath.Join(dir, "c.jsonl"), filepath.Join(dir, "qrels.tsv")
	for p, s := range map[string]string{queries: q.String(), corpus: c.String(), qrels: qr} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return queries, corpus, qrels
}

func readRetrievalDocs(t *testing.T, p string) []retrieval.Doc {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := retrieval.ReadDocs(f, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func readRetrievalQrels(t *testing.T, p string) retrieval.Qrels {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	q, err := retrieval.ReadQrels(f, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// modelEmbedder embeds as eval does by default: the model's pooling,
// normalised vectors, long inputs cut.
func modelEmbedder(t *testing.T, model string) retrieval.Embedder {
	t.Helper()
	m, err := pipeline.Open(model, pipeline.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, texts []string) ([][]float32, error) {
		in := make([]pipeline.EmbedInput, len(texts))
		for i, s := range texts {
			in[i] = pipeline.EmbedInput{Text: s}
		}
		v, _, err := pipeline.Embed(ctx, m.Model, m.Tokenizer, in, pipeline.EmbedOptions{Normalize: true, Truncate: true})
		return v, err
	}
}

type retrievalJSON struct {
	Task    string `json:"task"`
	Queries int    `json:"queries"`
	Corpus  int    `json:"corpus"`
	Methods []struct {
		Method  string             `json:"method"`
		Queries int                `json:"queries"`
		Metrics map[string]float64 `json:"metrics"`
	} `json:"methods"`
}

// eval --task retrieval prints what the retrieval package computes from
// the same files: BM25, dense retrieval with the model's vectors, and their
// fusion.
func TestEvalRetrievalCLI(t *testing.T) {
	model := ftModel(t)
	work := t.TempDir()
	qf, cf, rf := retrievalFiles(t, work)
	code, stdout, stderr := runCLI(t, "eval", "--task", "retrieval", "--model", model, "--queries", qf, "--corpus", cf, "--qrels", rf,
		"--json", "--quiet", "--threads", "1", "--block", "5")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var got retrievalJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if got.Queries != 6 || got.Corpus != 12 || len(got.Methods) != 3 {
		t.Fatalf("got %+v", got)
	}
	// The same through the package.
	read := func(p string) []retrieval.Doc { return readRetrievalDocs(t, p) }
	queries, corpus := read(qf), read(cf)
	qrels := readRetrievalQrels(t, rf)
	embed := modelEmbedder(t, model)
	bm25 := retrieval.BM25Search(queries, corpus, 100, retrieval.BM25Options{})
	dense, err := retrieval.DenseSearch(context.Background(), embed, queries, corpus, 100, 5)
	if err != nil {
		t.Fatal(err)
	}
	hybrid := map[string][]retrieval.Hit{}
	ids := []string{}
	for _, q := range queries {
		ids = append(ids, q.ID)
		hybrid[q.ID], _ = retrieval.Fuse(60, 100, bm25[q.ID], dense[q.ID])
	}
	for i, r := range []map[string][]retrieval.Hit{bm25, dense, hybrid} {
		want, err := retrieval.Evaluate(ids, r, qrels, retrieval.DefaultCutoffs)
		if err != nil {
			t.Fatal(err)
		}
		g := got.Methods[i]
		if g.Method != []string{"bm25", "dense", "hybrid"}[i] || g.Queries != 6 || len(g.Metrics) != len(want.Metrics) {
			t.Errorf("method %d: %+v", i, g)
		}
		for n, w := range want.Metrics {
			if g.Metrics[n] != w {
				t.Errorf("%s %s = %v, the package gives %v", g.Method, n, g.Metrics[n], w)
			}
		}
	}
	// A query is its document's very text: dense ranks it first; q5's
	// second relevant document keeps recall@1 below 1.
	if d := got.Methods[1].Metrics; d["mrr@10"] != 1 || d["recall@1"] != (5+0.5)/6 {
		t.Errorf("dense mrr@10 %v recall@1 %v, want 1 and %v", d["mrr@10"], d["recall@1"], 5.5/6)
	}

	// The text form: a header and one line per method; BM25 alone without a model.
	code, stdout, stderr = runCLI(t, "eval", "--task=retrieval", "--model", model, "--queries", qf, "--corpus", cf, "--qrels", rf, "--quiet", "--threads", "1")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], qf+": 6 queries (6 with a relevant document), 12 documents") ||
		!strings.HasPrefix(lines[2], "dense  mrr@10 1.0000 ndcg@10 ") || !strings.HasPrefix(lines[3], "hybrid mrr@10 ") || !strings.Contains(lines[1], " map@100 ") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "eval", "--task", "retrieval", "--queries", qf, "--corpus", cf, "--qrels", rf)
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "bm25 ") {
		t.Errorf("without a model: exit %d\n%s", code, stdout)
	}
}

// --tune-fusion chooses the dense weight on one split of a built-in task
// (here a task registered by the test, both splits the BEIR files above)
// and reports the fusion at that weight on the other, as the package's
// TuneFusion and WeightedFuse give.
func TestEvalRetrievalTuneFusion(t *testing.T) {
	model := ftModel(t)
	qf, cf, rf := retrievalFiles(t, t.TempDir())
	read := func(p string) []retrieval.Doc { return readRetrievalDocs(t, p) }
	qrels := readRetrievalQrels(t, rf)
	// The queries cut to one of their words, so that BM25 and dense
	// disagree: the first on dev, the second on test.
	split := tasks.RetrievalSplit{Corpus: read(cf), Qrels: qrels}
	test := tasks.RetrievalSplit{Corpus: split.Corpus, Qrels: qrels}
	for _, q := range read(qf) {
		w := strings.Fields(q.Text)
		split.Queries = append(split.Queries, retrieval.Doc{ID: q.ID, Text: w[0]})
		test.Queries = append(test.Queries, retrieval.Doc{ID: q.ID, Text: w[1]})
	}
	tasks.RetrievalTasks["test-tune"] = func(context.Context, string, io.Writer) (*tasks.Retrieval, error) {
		return &tasks.Retrieval{Name: "test-tune", Dev: split, Test: test}, nil
	}
	t.Cleanup(func() { delete(tasks.RetrievalTasks, "test-tune") })

	code, stdout, stderr := runCLI(t, "eval", "--task", "retrieval", "--name", "test-tune", "--model", model, "--tune-fusion", "dev",
		"--json", "--quiet", "--threads", "1")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var got struct {
		retrievalJSON
		Tuned struct {
			Split  string  `json:"split"`
			Weight float64 `json:"dense_weight"`
			Metric string  `json:"metric"`
			Score  float64 `json:"score"`
		} `json:"fusion_tuned"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(got.Methods) != 4 || got.Methods[3].Method != "hybrid-tuned" || got.Tuned.Split != "dev" || got.Tuned.Metric != "mrr@10" {
		t.Fatalf("got %+v", got)
	}
	embed := modelEmbedder(t, model)
	rank := func(sp tasks.RetrievalSplit) (ids []string, bm25, dense map[string][]retrieval.Hit) {
		bm25 = retrieval.BM25Search(sp.Queries, sp.Corpus, 100, retrieval.BM25Options{})
		dense, err := retrieval.DenseSearch(context.Background(), embed, sp.Queries, sp.Corpus, 100, 4096)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range sp.Queries {
			ids = append(ids, q.ID)
		}
		return ids, bm25, dense
	}
	dids, dbm25, ddense := rank(split)
	tuned, err := retrieval.TuneFusion(dids, dbm25, ddense, qrels, retrieval.DefaultCutoffs, retrieval.RRF(60, 100), "mrr@10", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tuned on dev: %+v", tuned)
	if got.Tuned.Weight != tuned.Weight || got.Tuned.Score != tuned.Score {
		t.Errorf("tuned %+v, the package gives %+v", got.Tuned, tuned)
	}
	ids, bm25, dense := rank(test)
	// Tuned on test, the weight differs (0.7 against dev's 0.3 with this
	// model and seed), so the test tells the two splits apart.
	if onTest, _ := retrieval.TuneFusion(ids, bm25, dense, qrels, retrieval.DefaultCutoffs, retrieval.RRF(60, 100), "mrr@10", nil); onTest.Weight == tuned.Weight {
		t.Fatalf("dev and test both tune to %g: the test cannot tell them apart", tuned.Weight)
	}
	fused := map[string][]retrieval.Hit{}
	for _, q := range ids {
		fused[q], _ = retrieval.WeightedFuse(60, 100, []float64{1 - tuned.Weight, tuned.Weight}, bm25[q], dense[q])
	}
	want, err := retrieval.Evaluate(ids, fused, qrels, retrieval.DefaultCutoffs)
	if err != nil {
		t.Fatal(err)
	}
	for n, w := range want.Metrics {
		if g := got.Methods[3].Metrics[n]; g != w {
			t.Errorf("hybrid-tuned %s = %v, the package gives %v", n, g, w)
		}
	}
	// The text form names the weight.
	code, stdout, _ = runCLI(t, "eval", "--task", "retrieval", "--name", "test-tune", "--model", model, "--tune-fusion", "dev", "--quiet", "--threads", "1")
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); code != 0 || len(lines) != 5 ||
		!strings.HasPrefix(lines[4], fmt.Sprintf("hybrid-tuned (dense weight %.2f, tuned on dev) mrr@10 ", tuned.Weight)) {
		t.Errorf("exit %d\n%s", code, stdout)
	}
	// --fusion convex and zscore: both hybrid lines by ConvexFuse or
	// ZScoreFuse, tuned by TuneFusion with that Fuser, as the package gives.
	for _, fc := range []struct {
		name  string
		fuser retrieval.Fuser
		fuse  func(depth int, weights []float64, lists ...[]retrieval.Hit) ([]retrieval.Hit, error)
	}{{"convex", retrieval.Convex(100), retrieval.ConvexFuse}, {"zscore", retrieval.ZScore(100), retrieval.ZScoreFuse}} {
		code, stdout, stderr = runCLI(t, "eval", "--task", "retrieval", "--name", "test-tune", "--model", model, "--tune-fusion", "dev",
			"--fusion", fc.name, "--json", "--quiet", "--threads", "1")
		var conv struct {
			retrievalJSON
			Fusion string `json:"fusion"`
			Tuned  struct {
				Weight float64 `json:"dense_weight"`
			} `json:"fusion_tuned"`
		}
		if err := json.Unmarshal([]byte(stdout), &conv); code != 0 || err != nil || len(conv.Methods) != 4 || conv.Fusion != fc.name {
			t.Fatalf("%s: exit %d, %v\n%s\n%s", fc.name, code, err, stdout, stderr)
		}
		ctuned, err := retrieval.TuneFusion(dids, dbm25, ddense, qrels, retrieval.DefaultCutoffs, fc.fuser, "mrr@10", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s, tuned on dev: %+v", fc.name, ctuned)
		if conv.Tuned.Weight != ctuned.Weight {
			t.Errorf("%s: tuned weight %g, the package gives %g", fc.name, conv.Tuned.Weight, ctuned.Weight)
		}
		for i, w := range [][]float64{nil, {1 - ctuned.Weight, ctuned.Weight}} {
			fused := map[string][]retrieval.Hit{}
			for _, q := range ids {
				fused[q], _ = fc.fuse(100, w, bm25[q], dense[q])
			}
			want, _ := retrieval.Evaluate(ids, fused, qrels, retrieval.DefaultCutoffs)
			g := conv.Methods[2+i]
			for n, v := range want.Metrics {
				if g.Metrics[n] != v {
					t.Errorf("%s %s %s = %v, the package gives %v", fc.name, g.Method, n, g.Metrics[n], v)
				}
			}
		}
	}
	// Tuning on the reported split is refused.
	code, _, stderr = runCLI(t, "eval", "--task", "retrieval", "--name", "test-tune", "--model", model, "--split", "dev", "--tune-fusion", "dev")
	if code != 2 || !strings.Contains(stderr, `--tune-fusion "dev" is the evaluated split`) {
		t.Errorf("same split: exit %d, stderr %q", code, stderr)
	}
}

func TestEvalRetrievalCLIErrors(t *testing.T) {
	work := t.TempDir()
	qf, cf, rf := retrievalFiles(t, work)
	bad := filepath.Join(work, "bad.tsv")
	os.WriteFile(bad, []byte("h\nq1\td1\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--queries", qf, "--corpus", cf}, 2, "--queries, --corpus and --qrels go together"},
		{[]string{}, 2, "give --queries, --corpus and --qrels, or --name TASK (one of bible-en, poetry-zh)"},
		{[]string{"--name", "nope"}, 2, `--name "nope": the built-in retrieval tasks are bible-en, poetry-zh`},
		{[]string{"--queries", qf, "--corpus", cf, "--qrels", bad}, 1, bad + ":2: 2 tab-separated fields, want 3"},
		{[]string{"--queries", qf, "--corpus", cf, "--qrels", rf, "--rrf-depth", "0"}, 2, "--rrf-depth 0 must be at least 1"},
		{[]string{"--queries", qf, "--corpus", cf, "--qrels", rf, "--tune-fusion", "dev"}, 2, "--tune-fusion needs a built-in task (--name) and a --model"},
		{[]string{"--queries", qf, "--corpus", cf, "--qrels", rf, "--fusion", "max"}, 2, `--fusion "max": want "rrf", "convex" or "zscore"`},
	} {
		code, _, stderr := runCLI(t, append([]string{"eval", "--task", "retrieval"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
