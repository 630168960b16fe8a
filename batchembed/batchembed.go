package batchembed

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/internal/lines"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// Group is the process group a run is sharded over: package distributed's Comm
// (an MPI job) has these methods. Every rank calls Run with the same
// arguments.
type Group interface {
	// Rank is this process's index, 0 ≤ Rank < Size.
	Rank() int
	// Size is the number of processes.
	Size() int
	// Gather returns, on root, every rank's buf in rank order; nil on the
	// other ranks.
	Gather(buf []byte, root int) ([][]byte, error)
	// Bcast copies root's buf into every other rank's buf (of the same
	// length).
	Bcast(buf []byte, root int) error
}

// ErrOtherRank is wrapped by the error of Run on a rank whose own part
// went well when the run failed on another rank (or in rank 0's writing
// of the output).
var ErrOtherRank = errors.New("batchembed: the run failed on another rank")

// MaxDefaultWindow and MinDefaultWindow bound the default of
// Options.Window: MaxDefaultWindow lines, or fewer so that the input has at
// least 16 parts (for ranks to share), but never fewer than
// MinDefaultWindow: the sort by length needs lines to sort (with 32 inputs
// a batch, parts of 256 lines of prose paragraphs pad ~10% of the tokens,
// parts of 64 lines ~36%).
const (
	MaxDefaultWindow = 1024
	MinDefaultWindow = 256
)

// DefaultWindow returns the default of Options.Window for an input of n
// lines: ⌈n/16⌉ within [MinDefaultWindow, MaxDefaultWindow]. It depends on
// the input alone, so a run continued with another number of ranks has the
// same parts.
func DefaultWindow(n int) int {
	return min(max((n+15)/16, MinDefaultWindow), MaxDefaultWindow)
}

// Options says how Run embeds. The zero value of a field means its default.
type Options struct {
	// Embedding: pooling, normalization, max length and truncation, batch
	// bounds (see pipeline.EmbedOptions; the defaults are the server's).
	pipeline.EmbedOptions
	// Window is the lines of a part: sorted by length together, written
	// together, the unit of resuming and of sharding. Default:
	// DefaultWindow of the input's lines.
	Window int
	// WorkDir is the folder of the parts (default: the output path with
	// ".parts" appended).
	WorkDir string
	// MaxLineBytes bounds a line of the input, its end of line not counted
	// (default 1 MiB, the toolkit's default for every line reader): a
	// longer line is refused as soon as the limit is passed, naming the
	// file and the line, without reading the rest of it.
	MaxLineBytes int
	// Group shards the run over its ranks (nil: this process alone).
	Group Group
	// Progress, when not nil, is called on each rank after each part it
	// writes.
	Progress func(Progress)
	// NoSync skips fsync (for tests; see atomicfile.Options.NoSync).
	NoSync bool
}

// Progress is where a rank stands, after one of its parts.
type Progress struct {
	Rank, Ranks int
	Parts       int // parts of this rank, done before the run included
	Done        int // of them, done
	Lines       int // lines embedded by this rank in this run
	Tokens      int // their tokens, [CLS] and [SEP] included
	Elapsed     time.Duration
}

// Stats is what a run did: on rank 0, for every rank together; on the
// other ranks, for their own work.
type Stats struct {
	Lines     int // lines of the input
	Tokens    int // their tokens, [CLS] and [SEP] included (with truncation: after it)
	Truncated int // lines cut to the max length (EmbedOptions.Truncate)
	Parts     int // parts of the input
	Resumed   int // parts found done when the run started
	Ranks     int
	// Embedded counts the work of this run (rows, batches, tokens, padded
	// tokens), summed over the ranks on rank 0.
	Embedded pipeline.EmbedStats
	// Embedding is the time the ranks spent embedding their parts, from
	// after the check of the input to their last part (on rank 0 the
	// longest of the ranks').
	Embedding time.Duration
}

// Run embeds every line of the file input with m and tok (see the package
// documentation) and writes the vectors to the file output, in order. It
// returns when the output is written, or with the error that stopped the
// run: ctx's when it was cancelled, after which a Run with the same
// arguments continues where this one stopped.
//
// Under a Group, only rank 0 writes the output, and every rank returns at
// the same time, with an error when the run failed anywhere: its own, or
// on rank 0 the failing rank's (named), or on the others one that wraps
// ErrOtherRank (and context.Canceled when the run was interrupted). Every
// failure goes through the same two collectives (Gather, then Bcast), so no
// rank is left waiting for another.
func Run(ctx context.Context, m *roformer.Model, tok *tokenizer.Tokenizer, input, output string, o Options) (Stats, error) {
	g := o.Group
	if g == nil {
		g = local{}
	}
	j := &job{m: m, tok: tok, input: input, output: output, o: o, rank: g.Rank(), ranks: g.Size(),
		af: atomicfile.Options{NoSync: o.NoSync}}
	st, err := j.work(ctx)
	rep := report{Stats: st, Embedding: st.Embedding.Seconds()}
	rep.setErr(err)
	buf, merr := json.Marshal(rep)
	if merr != nil {
		return st, merr // a bug: report holds nothing that cannot be marshalled
	}
	all, gerr := g.Gather(buf, 0)
	if gerr != nil {
		return st, errors.Join(err, fmt.Errorf("batchembed: rank %d reporting to rank 0: %w", j.rank, gerr))
	}
	var out report // the outcome, rank 0's to say
	if j.rank == 0 {
		var total Stats
		total, err = j.finish(st, err, all)
		if err == nil {
			st = total
		}
		out.setErr(err)
	}
	if g.Size() == 1 {
		return st, err
	}
	if berr := bcastReport(g, &out); berr != nil {
		return st, errors.Join(err, fmt.Errorf("batchembed: rank %d hearing from rank 0: %w", j.rank, berr))
	}
	switch {
	case err != nil:
		return st, err
	case out.Canceled:
		return st, fmt.Errorf("%w: %s: %w", ErrOtherRank, out.Err, context.Canceled)
	case out.Err != "":
		return st, fmt.Errorf("%w: %s", ErrOtherRank, out.Err)
	}
	return st, nil
}

// finish is rank 0's end of a run: with every rank's report, it writes the
// output when every rank did its part, and returns the totals.
func (j *job) finish(st Stats, err error, reports [][]byte) (Stats, error) {
	if err != nil {
		return st, err
	}
	total := st
	total.Embedded = pipeline.EmbedStats{}
	total.Embedding = 0
	for r, b := range reports {
		var rr report
		if e := json.Unmarshal(b, &rr); e != nil {
			return st, fmt.Errorf("batchembed: rank %d's report: %w", r, e)
		}
		if rr.Canceled {
			return st, fmt.Errorf("batchembed: rank %d was interrupted: %w", r, context.Canceled)
		}
		if rr.Err != "" {
			return st, fmt.Errorf("batchembed: rank %d: %s", r, rr.Err)
		}
		total.Embedded.Add(rr.Stats.Embedded)
		total.Embedding = max(total.Embedding, time.Duration(rr.Embedding*float64(time.Second)))
	}
	return total, j.merge()
}

// bcastReport gives rank 0's r to every rank: its length, then its JSON.
func bcastReport(g Group, r *report) error {
	var b []byte
	if g.Rank() == 0 {
		var err error
		if b, err = json.Marshal(r); err != nil {
			return err
		}
	}
	n := binary.LittleEndian.AppendUint64(nil, uint64(len(b)))
	if err := g.Bcast(n, 0); err != nil {
		return err
	}
	if g.Rank() != 0 {
		b = make([]byte, binary.LittleEndian.Uint64(n))
	}
	if err := g.Bcast(b, 0); err != nil {
		return err
	}
	return json.Unmarshal(b, r)
}

// report is what a rank tells rank 0 at the end, and rank 0 the others.
type report struct {
	Stats     Stats
	Embedding float64 // seconds
	Err       string
	Canceled  bool
}

func (r *report) setErr(err error) {
	if err != nil {
		r.Err = err.Error()
		r.Canceled = errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	}
}

// local is the group of this process alone.
type local struct{}

func (local) Rank() int                                  { return 0 }
func (local) Size() int                                  { return 1 }
func (local) Gather(buf []byte, _ int) ([][]byte, error) { return [][]byte{buf}, nil }
func (local) Bcast([]byte, int) error                    { return nil }

// job is one rank's run.
type job struct {
	m             *roformer.Model
	tok           *tokenizer.Tokenizer
	input, output string
	o             Options
	rank, ranks   int
	af            atomicfile.Options
	dir           string
	info          inputInfo
}

// manifest is what a work folder was made for: a folder whose manifest
// differs (but for the input's path) belongs to another run.
type manifest struct {
	Format         int    `json:"format"`
	Input          string `json:"input"`
	InputBytes     int64  `json:"input_bytes"`
	InputSHA256    string `json:"input_sha256"`
	Lines          int    `json:"lines"`
	Window         int    `json:"window"`
	Parts          int    `json:"parts"`
	ModelSHA256    string `json:"model_sha256"` // config and parameters, see modelHash
	Precision      string `json:"precision"`
	Pooling        string `json:"pooling"`
	Normalize      bool   `json:"normalize"`
	MaxLength      int    `json:"max_length"`
	Truncate       bool   `json:"truncate"`
	MaxBatch       int    `json:"max_batch"`
	MaxBatchTokens int    `json:"max_batch_tokens"`
	// A sentence-transformers folder's prompt, and its modules after the
	// pooling (see vectorizerHash); empty for a plain folder.
	Prompt     string `json:"prompt,omitempty"`
	Lowercase  bool   `json:"lowercase,omitempty"`
	Vectorizer string `json:"vectorizer_sha256,omitempty"`
}

const manifestName = "manifest.json"

func (j *job) work(ctx context.Context) (Stats, error) {
	o := &j.o
	if err := lines.CheckOutput(j.output, j.input); err != nil {
		return Stats{}, fmt.Errorf("batchembed: %w", err)
	}
	var err error
	if o.EmbedOptions, err = o.EmbedOptions.WithDefaults(j.m); err != nil {
		return Stats{}, fmt.Errorf("batchembed: %w", err)
	}
	if o.Window == 0 {
		n, err := countLines(j.input)
		if err != nil {
			return Stats{}, err
		}
		o.Window = DefaultWindow(n)
	}
	if o.Window < 1 {
		return Stats{}, fmt.Errorf("batchembed: window %d must be at least 1", o.Window)
	}
	if j.tok.VocabSize() > j.m.Config.VocabSize {
		return Stats{}, fmt.Errorf("batchembed: the tokenizer has %d tokens, the model only %d", j.tok.VocabSize(), j.m.Config.VocabSize)
	}
	if j.info, err = scan(j.input, j.tok, o.EmbedOptions, o.Window, o.MaxLineBytes); err != nil {
		return Stats{}, err
	}
	st := Stats{Lines: j.info.lines, Tokens: j.info.tokens, Truncated: j.info.truncated, Parts: len(j.info.starts), Ranks: j.ranks}
	j.dir = o.WorkDir
	if j.dir == "" {
		j.dir = j.output + ".parts"
	}
	if err := j.prepare(); err != nil {
		return st, err
	}
	// This rank's parts, and which of them are done.
	var todo []int
	mine := 0
	for p := range st.Parts {
		_, err := os.Stat(j.partPath(p))
		if err == nil {
			st.Resumed++
		}
		if p%j.ranks != j.rank {
			continue
		}
		mine++
		if errors.Is(err, fs.ErrNotExist) {
			todo = append(todo, p)
		} else if err != nil {
			return st, fmt.Errorf("batchembed: %w", err)
		}
	}
	start := time.Now()
	pg := Progress{Rank: j.rank, Ranks: j.ranks, Parts: mine, Done: mine - len(todo)}
	for _, p := range todo {
		es, err := j.part(ctx, p)
		st.Embedded.Add(es)
		st.Embedding = time.Since(start)
		if err != nil {
			return st, err
		}
		pg.Done++
		pg.Lines, pg.Tokens, pg.Elapsed = st.Embedded.Rows, st.Embedded.Tokens, st.Embedding
		if err := j.writeProgress(pg); err != nil {
			return st, err
		}
		if o.Progress != nil {
			o.Progress(pg)
		}
	}
	return st, nil
}

// prepare makes the work folder and checks its manifest, or writes it.
// Ranks may do this at the same time: they write the same bytes.
func (j *job) prepare() error {
	want := manifest{Format: 1, Input: j.input, InputBytes: j.info.bytes, InputSHA256: j.info.sha256,
		Lines: j.info.lines, Window: j.o.Window, Parts: len(j.info.starts), ModelSHA256: modelHash(j.m),
		Precision: string(j.m.Precision()), Pooling: string(j.o.Pooling), Normalize: j.o.Normalize,
		MaxLength: j.o.MaxLength, Truncate: j.o.Truncate, MaxBatch: j.o.MaxBatch, MaxBatchTokens: j.o.MaxBatchTokens,
		Prompt: j.o.PromptText(), Lowercase: j.o.Sentence != nil && j.o.Sentence.DoLowerCase, Vectorizer: vectorizerHash(j.o.Vectorizer())}
	if err := os.MkdirAll(j.dir, 0o755); err != nil {
		return fmt.Errorf("batchembed: %w", err)
	}
	path := filepath.Join(j.dir, manifestName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if parts, _ := filepath.Glob(filepath.Join(j.dir, "part-*.jsonl")); len(parts) > 0 {
			return fmt.Errorf("batchembed: %s holds %d parts but no %s: it is not this run's folder; remove it, or give another --work folder", j.dir, len(parts), manifestName)
		}
		b, err := json.MarshalIndent(want, "", "  ")
		if err != nil {
			return err
		}
		return j.af.WriteFile(path, append(b, '\n'))
	}
	if err != nil {
		return fmt.Errorf("batchembed: %w", err)
	}
	var got manifest
	if err := json.Unmarshal(b, &got); err != nil {
		return fmt.Errorf("batchembed: %s: %w", path, err)
	}
	if diff := manifestDiff(got, want); diff != "" {
		return fmt.Errorf("batchembed: %s was made for another run (%s); run with the same input, model and options to continue it, or remove %s to start again",
			path, diff, j.dir)
	}
	return nil
}

// manifestDiff names the fields in which got and want differ, but for the
// input's path.
func manifestDiff(got, want manifest) string {
	var diffs []string
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		f := gv.Type().Field(i)
		if f.Name == "Input" {
			continue
		}
		if g, w := gv.Field(i).Interface(), wv.Field(i).Interface(); g != w {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			diffs = append(diffs, fmt.Sprintf("%s %v, now %v", name, g, w))
		}
	}
	return strings.Join(diffs, "; ")
}

// modelHash is the SHA-256 of m's config (as JSON) and of the shape and the
// float32 bits of every parameter, in Params' order.
func modelHash(m *roformer.Model) string {
	h := sha256.New()
	cfg, _ := json.Marshal(m.Config)
	h.Write(cfg)
	for _, p := range m.Weights() {
		var shape []byte
		for _, d := range p.Shape {
			shape = binary.LittleEndian.AppendUint64(shape, uint64(d))
		}
		h.Write(shape)
		hashFloats(h, p.Data) // the same byte stream as before, so old manifests still match
	}
	return hex.EncodeToString(h.Sum(nil))
}

// vectorizerHash is the SHA-256 of what v does after the pooling: the
// pooling's prompt rule and each Dense module's sizes, activation and
// weights (Normalize as a mark); "" when it does nothing more than pool.
func vectorizerHash(v *pipeline.Vectorizer) string {
	if v == nil || len(v.Steps) == 0 && v.Pooling.IncludePrompt {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "include_prompt=%v\n", v.Pooling.IncludePrompt)
	for _, s := range v.Steps {
		if s.Dense == nil {
			h.Write([]byte("normalize\n"))
			continue
		}
		d := s.Dense
		fmt.Fprintf(h, "dense %d %d %s %v\n", d.In, d.Out, d.Activation, d.Bias != nil)
		hashFloats(h, d.Weight)
		hashFloats(h, d.Bias)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hashFloats writes xs little-endian into h through a small buffer.
func hashFloats(h io.Writer, xs []float32) {
	buf := make([]byte, 0, 1<<16)
	for _, x := range xs {
		if len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
	}
	h.Write(buf)
}

func (j *job) partPath(p int) string {
	return filepath.Join(j.dir, fmt.Sprintf("part-%06d.jsonl", p))
}

// partLines returns the number of lines of part p.
func (j *job) partLines(p int) int {
	return min(j.o.Window, j.info.lines-p*j.o.Window)
}

// part embeds part p and writes it.
func (j *job) part(ctx context.Context, p int) (pipeline.EmbedStats, error) {
	ins, err := readPart(j.input, j.info.starts[p], j.partLines(p), j.o.MaxLineBytes)
	if err != nil {
		return pipeline.EmbedStats{}, err
	}
	rows := make([]pipeline.EmbedRow, len(ins))
	first := p * j.o.Window
	for i, in := range ins {
		if rows[i], err = pipeline.EncodeEmbedInput(j.tok, in.EmbedInput, j.o.EmbedOptions); err != nil {
			return pipeline.EmbedStats{}, fmt.Errorf("batchembed: %s:%d: %w", j.input, first+i+1, err)
		}
	}
	vecs, st, err := pipeline.EmbedRows(ctx, j.m, int32(j.tok.PadID()), rows, j.o.EmbedOptions)
	if err != nil {
		return st, fmt.Errorf("batchembed: part %d (lines %d to %d): %w", p, first+1, first+len(ins), err)
	}
	var buf []byte
	for i, v := range vecs {
		if buf, err = appendLine(buf, first+i, ins[i].ID, v); err != nil {
			return st, fmt.Errorf("batchembed: %s:%d: %w", j.input, first+i+1, err)
		}
	}
	return st, j.af.WriteFile(j.partPath(p), buf)
}

// appendLine appends output line index to b.
func appendLine(b []byte, index int, id json.RawMessage, v []float32) ([]byte, error) {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	if id != nil {
		b = append(b, `,"id":`...)
		b = append(b, id...)
	}
	b = append(b, `,"embedding":[`...)
	for k, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return b, fmt.Errorf("the vector has %v at %d", x, k)
		}
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, "]}\n"...), nil
}

// writeProgress writes this rank's progress record.
func (j *job) writeProgress(pg Progress) error {
	b, err := json.Marshal(map[string]any{"rank": pg.Rank, "ranks": pg.Ranks, "parts": pg.Parts, "done": pg.Done,
		"lines": pg.Lines, "tokens": pg.Tokens, "seconds": pg.Elapsed.Seconds()})
	if err != nil {
		return err
	}
	return j.af.WriteFile(filepath.Join(j.dir, fmt.Sprintf("progress-%d.json", j.rank)), append(b, '\n'))
}

// merge writes the output from the parts, in order, once every part is
// there with its lines, and then removes the work folder's files (and the
// folder, when nothing else is left in it).
func (j *job) merge() error {
	parts := len(j.info.starts)
	for p := range parts {
		if _, err := os.Stat(j.partPath(p)); err != nil {
			return fmt.Errorf("batchembed: every rank is done but part %d is missing: %w", p, err)
		}
	}
	err := j.af.Write(j.output, func(w io.Writer) error {
		for p := range parts {
			b, err := os.ReadFile(j.partPath(p))
			if err != nil {
				return fmt.Errorf("batchembed: %w", err)
			}
			if n, want := strings.Count(string(b), "\n"), j.partLines(p); n != want {
				return fmt.Errorf("batchembed: %s has %d lines, want %d: remove it and run again to redo it", j.partPath(p), n, want)
			}
			if _, err := w.Write(b); err != nil {
				return fmt.Errorf("batchembed: writing %s: %w", j.output, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return j.clean()
}

// clean removes what the run wrote into its work folder.
func (j *job) clean() error {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return fmt.Errorf("batchembed: %w", err)
	}
	for _, e := range ents {
		n := e.Name()
		ours := n == manifestName || strings.HasPrefix(n, atomicfile.TempPrefix) ||
			(strings.HasPrefix(n, "part-") && strings.HasSuffix(n, ".jsonl")) ||
			(strings.HasPrefix(n, "progress-") && strings.HasSuffix(n, ".json"))
		if ours && !e.IsDir() {
			if err := os.Remove(filepath.Join(j.dir, n)); err != nil {
				return fmt.Errorf("batchembed: %s is written; cleaning up: %w", j.output, err)
			}
		}
	}
	if ents, err := os.ReadDir(j.dir); err == nil && len(ents) == 0 {
		os.Remove(j.dir)
	}
	return nil
}
