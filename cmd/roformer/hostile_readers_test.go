package main

// The hostile data files of issue #47: one line of tens of megabytes, a
// line that is not UTF-8, an output that is the input, qrels that match
// nothing. Every verb that reads a data file a line at a time reads it
// through internal/lines, so each refuses the long line naming the file,
// the line and the limit, in memory that does not grow with the line
// (runCapped's child, as in hostile_test.go).

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/model/roformer"
)

// readersBound is the bound on a reader's peak RSS for a file whose
// longest line has size bytes: 300 MB + 2 × the line.
func readersBound(size int64) int64 { return 300<<20 + 2*size }

// longLineFile writes a file whose second line is one JSON object of about
// size bytes ("whale" repeated, as the probe), between two short
// ones. Every line is at once a labelled example, a BEIR document, an
// embed and a tokenize input, and text for vocab.
func longLineFile(t *testing.T, size int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "long.jsonl")
	var b bytes.Buffer
	b.WriteString(`{"_id": "d0", "text": "the movie was good", "label": "positive"}` + "\n")
	b.WriteString(`{"_id": "d1", "text": "`)
	b.Write(bytes.Repeat([]byte("whale "), size/6))
	b.WriteString(`", "label": "negative"}` + "\n")
	b.WriteString(`{"_id": "d2", "text": "the film was bad", "label": "negative"}` + "\n")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readerFixtures are what the verbs need beside the hostile file: a tiny
// model folder, a bag-of-words baseline (eval and predict read their data
// after loading it), BEIR queries and qrels.
type readerFixtures struct{ model, baseline, queries, qrels string }

func newReaderFixtures(t *testing.T) readerFixtures {
	t.Helper()
	dir := t.TempDir()
	f := readerFixtures{model: ftModel(t), baseline: filepath.Join(dir, "bow"),
		queries: filepath.Join(dir, "q.jsonl"), qrels: filepath.Join(dir, "qrels.tsv")}
	train := ftData(t, dir, "train.jsonl", 1, 32, true)
	if code, _, stderr := runCLI(t, "finetune", "--baseline", "bow", "--train", train, "--out", f.baseline, "--quiet"); code != 0 {
		t.Fatalf("baseline: exit %d: %s", code, stderr)
	}
	for p, s := range map[string]string{
		f.queries: `{"_id": "q0", "text": "the movie"}` + "\n",
		f.qrels:   "query-id\tcorpus-id\tscore\nq0\td0\t1\n",
	} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// TestHostileReadersLongLine runs every verb that reads a data file on one
// whose line 2 is 20 MB and one whose line 2 is 60 MB: exit 1 naming the
// file, the line and the limit, no crash, peak RSS within 300 MB + 2 × the
// line. On the readers before internal/lines, embed took 0.95 GB for the
// 20 MB line and ran out of memory (exit 2, a goroutine dump) on 200 MB,
// as did vocab and tokenize; vocab took 683 MB for 20 MB.
func TestHostileReadersLongLine(t *testing.T) {
	if testing.Short() {
		t.Skip("children under a memory cap, files of tens of MB")
	}
	f := newReaderFixtures(t)
	for _, size := range []int{20 << 20, 60 << 20} {
		long := longLineFile(t, size)
		out := t.TempDir()
		verbs := [][]string{
			{"embed", "--model", f.model, "--input", long, "--output", filepath.Join(out, "e.jsonl"), "--threads", "1"},
			{"finetune", "--model", f.model, "--train", long, "--out", filepath.Join(out, "ft"), "--quiet", "--threads", "1"},
			{"eval", "--model", f.baseline, "--eval", long},
			{"predict", "--model", f.baseline, "--input", long},
			{"eval", "--task", "retrieval", "--queries", f.queries, "--corpus", long, "--qrels", f.qrels, "--quiet"},
			{"vocab", "--corpus", long, "--size", "50", "--out", filepath.Join(out, "voc")},
			{"tokenize", "--model", f.model, "--input", long, "--output", filepath.Join(out, "t.jsonl")},
		}
		want := regexp.MustCompile(regexp.QuoteMeta(long) + `:2: the line has more than 1048576 bytes \(the limit; raise it with --max-line-bytes\)`)
		for _, args := range verbs {
			name := fmt.Sprintf("%s/%dMB", strings.Join(args[:min(len(args), 3)], " "), size>>20)
			if args[0] != "eval" || args[1] != "--task" {
				name = fmt.Sprintf("%s/%dMB", args[0], size>>20)
			}
			t.Run(name, func(t *testing.T) {
				code, stderr, peak := runCapped(t, args...)
				t.Logf("exit %d, peak RSS %.1f MB (bound %.1f MB): %s", code, float64(peak)/1e6, float64(readersBound(int64(size)))/1e6, lastLine(stderr))
				if crashed(stderr) {
					t.Fatalf("crashed:\n%s", truncate(stderr, 2000))
				}
				if code != 1 || !want.MatchString(stderr) {
					t.Errorf("exit %d, stderr %q; want exit 1 and %s", code, truncate(stderr, 500), want)
				}
				if peak > readersBound(int64(size)) {
					t.Errorf("peak RSS %d bytes, over the bound %d", peak, readersBound(int64(size)))
				}
			})
		}
	}
}

// With the limit raised, eval --task retrieval scores a corpus that holds
// one 15 MB document by BM25 within 300 MB + 2 × the line (196 MB before;
// the model's path is bounded by the tokenizer, not here).
func TestHostileReadersLongDocumentBM25(t *testing.T) {
	if testing.Short() {
		t.Skip("children under a memory cap")
	}
	f := newReaderFixtures(t)
	const size = 15 << 20
	long := longLineFile(t, size)
	code, stderr, peak := runCapped(t, "eval", "--task", "retrieval", "--queries", f.queries, "--corpus", long, "--qrels", f.qrels,
		"--quiet", "--max-line-bytes", fmt.Sprint(size+1<<20))
	t.Logf("exit %d, peak RSS %.1f MB: %s", code, float64(peak)/1e6, lastLine(stderr))
	if code != 0 || crashed(stderr) {
		t.Fatalf("exit %d:\n%s", code, truncate(stderr, 2000))
	}
	if peak > readersBound(size) {
		t.Errorf("peak RSS %d bytes, over the bound %d", peak, readersBound(size))
	}
}

// embed on invalid UTF-8 in line 4 refuses it naming the line (it embedded
// the line without its bad bytes, exit 0); an empty input prints no rates
// (it printed "NaN lines/s, NaN tokens/s").
func TestEmbedCLIInputText(t *testing.T) {
	model := ftModel(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("\"the movie\"\n\"a film\"\n\"the plot\"\n\"the st\xffory\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	code, _, stderr := runCLI(t, "embed", "--model", model, "--input", bad, "--output", out, "--threads", "1")
	if code != 1 || !strings.Contains(stderr, bad+":4: the line is not valid UTF-8") {
		t.Errorf("invalid UTF-8: exit %d, stderr %q; want exit 1 naming line 4", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("invalid UTF-8: %s was written", out)
	}
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "embed", "--model", model, "--input", empty, "--output", out, "--threads", "1")
	if code != 0 || strings.Contains(stderr, "NaN") || strings.Contains(stderr, "/s") {
		t.Errorf("empty input: exit %d, stderr %q; want exit 0 and no rates", code, stderr)
	}
}

// An --output that is the --input, by its path, a symlink or a hard link,
// is refused before anything is written, by every verb that reads a file
// and writes another: the input stays as it was (embed replaced it by its
// vectors, predict and tokenize by their lines).
func TestReadersOutputIsInput(t *testing.T) {
	f := newReaderFixtures(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	content := []byte(`{"text": "the movie was good"}` + "\n" + `{"text": "the film was bad"}` + "\n")
	if err := os.WriteFile(in, content, 0o644); err != nil {
		t.Fatal(err)
	}
	link, hard := filepath.Join(dir, "link.jsonl"), filepath.Join(dir, "hard.jsonl")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{in, link, hard} {
		for _, args := range [][]string{
			{"embed", "--model", f.model, "--input", in, "--output", out, "--threads", "1"},
			{"predict", "--model", f.baseline, "--input", in, "--output", out},
			{"tokenize", "--model", f.model, "--input", in, "--output", out},
		} {
			code, _, stderr := runCLI(t, args...)
			if code != 1 || !strings.Contains(stderr, "writing it would replace the input") {
				t.Errorf("%s --output %s: exit %d, stderr %q; want a refusal", args[0], filepath.Base(out), code, stderr)
			}
			if b, _ := os.ReadFile(in); !bytes.Equal(b, content) {
				t.Fatalf("%s --output %s: the input now holds %.80q", args[0], filepath.Base(out), b)
			}
		}
	}
}

// eval --task retrieval refuses qrels whose ids match no query, or no
// document, naming some of them (it printed every metric as 0.0000, exit 0).
func TestEvalRetrievalQrelsMatchNothing(t *testing.T) {
	f := newReaderFixtures(t)
	dir := t.TempDir()
	corpus := filepath.Join(dir, "c.jsonl")
	if err := os.WriteFile(corpus, []byte(`{"_id": "d0", "text": "the movie"}`+"\n"+`{"_id": "d1", "text": "a film"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, qrels, want string }{
		{"queries", "query-id\tcorpus-id\tscore\nx0\td0\t1\nx1\td1\t1\n", `2 of its 2 query ids are not queries ("x0", "x1")`},
		{"documents", "query-id\tcorpus-id\tscore\nq0\te7\t1\n", `1 document ids are not in the corpus ("e7")`},
	} {
		qrels := filepath.Join(dir, c.name+".tsv")
		if err := os.WriteFile(qrels, []byte(c.qrels), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, "eval", "--task", "retrieval", "--queries", f.queries, "--corpus", corpus, "--qrels", qrels, "--quiet")
		if code != 1 || !strings.Contains(stderr, qrels) || !strings.Contains(stderr, c.want) || strings.Contains(stdout, "0.0000") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 naming %q", c.name, code, stdout, stderr, c.want)
		}
	}
}

// The readers' bound on distinct labels is the model's bound on
// num_labels, so a file the reader takes never fails on num_labels later.
func TestReadersMaxLabels(t *testing.T) {
	if labelled.DefaultMaxLabels != roformer.MaxLabels {
		t.Errorf("labelled.DefaultMaxLabels %d, roformer.MaxLabels %d", labelled.DefaultMaxLabels, roformer.MaxLabels)
	}
}
