package finetune

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/metrics"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// QAExample is one extractive question: SQuAD's fields, as Hugging Face's
// datasets write them. AnswerStart are character (code point) offsets into
// Context; no answers is an unanswerable question (SQuAD 2.0).
type QAExample struct {
	Line     int    `json:"-"` // the line of a JSONL file, the question's number in a SQuAD JSON file
	ID       string `json:"id"`
	Question string `json:"question"`
	Context  string `json:"context"`
	Answers  struct {
		Text        []string `json:"text"`
		AnswerStart []int    `json:"answer_start"`
	} `json:"answers"`
}

// MaxQAFileBytes bounds a SQuAD JSON file that ReadQA reads whole.
const MaxQAFileBytes = 1 << 30

// ReadQA reads extractive questions from a SQuAD JSON file
// ({"data": [{"paragraphs": [{"context", "qas": [{"id", "question",
// "answers": [{"text", "answer_start"}]}]}]}]}, the official files) or a
// JSONL file of rows {"id", "question", "context", "answers": {"text":
// […], "answer_start": […]}} (datasets' squad rows; "id" optional). Every
// answer must be the text of the context at its start. Lines of a JSONL
// file longer than maxLineBytes (labelled.DefaultMaxLineBytes when 0) are
// refused. Errors are *labelled.InputError naming the file and the line
// (the question's number in a JSON file).
func ReadQA(path string, maxLineBytes int) ([]QAExample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(4096)
	if isSQuADJSON(head) {
		b, err := io.ReadAll(io.LimitReader(br, MaxQAFileBytes+1))
		if err != nil {
			return nil, fmt.Errorf("finetune: %s: %w", path, err)
		}
		if len(b) > MaxQAFileBytes {
			return nil, &labelled.InputError{File: path, Err: fmt.Errorf("a SQuAD JSON file over %d bytes", MaxQAFileBytes)}
		}
		return readSQuADJSON(b, path)
	}
	return readQAJSONL(br, path, maxLineBytes)
}

// isSQuADJSON reports whether the file starts as one object whose first
// key is "data" or "version" (the official files), not a JSONL row.
func isSQuADJSON(head []byte) bool {
	d := json.NewDecoder(bytes.NewReader(head))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	t, err := d.Token()
	return err == nil && (t == "data" || t == "version")
}

func readSQuADJSON(b []byte, path string) ([]QAExample, error) {
	var doc struct {
		Data []struct {
			Paragraphs []struct {
				Context string `json:"context"`
				QAs     []struct {
					ID       string `json:"id"`
					Question string `json:"question"`
					Answers  []struct {
						Text        string `json:"text"`
						AnswerStart int    `json:"answer_start"`
					} `json:"answers"`
				} `json:"qas"`
			} `json:"paragraphs"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, &labelled.InputError{File: path, Err: fmt.Errorf("not SQuAD JSON: %w", err)}
	}
	var out []QAExample
	for _, a := range doc.Data {
		for _, p := range a.Paragraphs {
			for _, q := range p.QAs {
				ex := QAExample{Line: len(out) + 1, ID: q.ID, Question: q.Question, Context: p.Context}
				for _, an := range q.Answers {
					ex.Answers.Text = append(ex.Answers.Text, an.Text)
					ex.Answers.AnswerStart = append(ex.Answers.AnswerStart, an.AnswerStart)
				}
				if err := ex.check(); err != nil {
					return nil, &labelled.InputError{File: path, Line: ex.Line, Err: fmt.Errorf("question %q: %w", q.ID, err)}
				}
				out = append(out, ex)
			}
		}
	}
	if len(out) == 0 {
		return nil, &labelled.InputError{File: path, Err: errors.New("no questions")}
	}
	return out, nil
}

func readQAJSONL(r io.Reader, path string, maxLineBytes int) ([]QAExample, error) {
	var out []QAExample
	err := labelled.EachJSONLine(r, path, maxLineBytes, func(line int, b []byte) error {
		var ex QAExample
		if err := json.Unmarshal(b, &ex); err != nil {
			return &labelled.InputError{File: path, Line: line, Err: err}
		}
		ex.Line = line
		if err := ex.check(); err != nil {
			return &labelled.InputError{File: path, Line: line, Err: err}
		}
		out = append(out, ex)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &labelled.InputError{File: path, Err: errors.New("no questions")}
	}
	return out, nil
}

// check verifies the fields: a question and a context, as many starts as
// answers, each answer the context's text at its start.
func (ex *QAExample) check() error {
	a := &ex.Answers
	switch {
	case ex.Question == "" || ex.Context == "":
		return errors.New(`"question" and "context" must be non-empty strings`)
	case len(a.Text) != len(a.AnswerStart):
		return fmt.Errorf(`"answers" has %d texts and %d answer_start values`, len(a.Text), len(a.AnswerStart))
	}
	for i, t := range a.Text {
		from, to, ok := ex.answerBytes(i)
		if !ok || ex.Context[from:to] != t {
			return fmt.Errorf("answer %d %q is not the context's text at character %d", i, t, a.AnswerStart[i])
		}
	}
	return nil
}

// answerBytes returns answer i's byte range in the context.
func (ex *QAExample) answerBytes(i int) (from, to int, ok bool) {
	s, n := ex.Answers.AnswerStart[i], utf8.RuneCountInString(ex.Answers.Text[i])
	if s < 0 {
		return 0, 0, false
	}
	from, to = -1, -1
	c := 0
	for b := range ex.Context {
		if c == s {
			from = b
		}
		if c == s+n {
			to = b
		}
		c++
	}
	if c == s+n {
		to = len(ex.Context)
	}
	if c == s && n == 0 {
		from = len(ex.Context)
	}
	return from, to, from >= 0 && to >= from
}

// QAOptions are the windowing and decoding settings of question answering,
// the pipeline's (pipeline.QuestionAnsweringOptions) with Options.MaxLength
// as MaxSeqLen, so that training windows are the ones inference sees.
type QAOptions struct {
	DocStride      int `json:"doc_stride"`       // context tokens consecutive windows share (0: MaxLength/2, at most 128)
	MaxQuestionLen int `json:"max_question_len"` // question tokens kept (0: 64)
	MaxAnswerLen   int `json:"max_answer_len"`   // longest answer in tokens at evaluation (0: 30, run_qa's)
}

// Pipeline returns the pipeline's options for windows of maxLen tokens
// (Options.MaxLength): the ones TrainQA and EvaluateQA use.
func (q QAOptions) Pipeline(maxLen int) pipeline.QuestionAnsweringOptions {
	p := pipeline.QuestionAnsweringOptions{MaxSeqLen: maxLen, DocStride: q.DocStride, MaxQuestionLen: q.MaxQuestionLen, MaxAnswerLen: q.MaxAnswerLen}
	if p.MaxAnswerLen == 0 {
		p.MaxAnswerLen = 30
	}
	return p
}

// qaFeature is one training window with its answer positions.
type qaFeature struct {
	ids, types []int32
	start, end int32
}

// qaFeatures cuts each example into the pipeline's windows and labels each
// window as HF's run_qa (prepare_train_features) does with the first
// answer: the tokens whose offsets hold its first and last characters when
// the window's context holds the whole answer, else [CLS] (position 0) for
// both, as for an unanswerable question. It returns how many windows do not
// hold their answer.
func qaFeatures(tok *tokenizer.Tokenizer, exs []QAExample, o pipeline.QuestionAnsweringOptions, file string) ([]qaFeature, int, error) {
	var out []qaFeature
	outside := 0
	for i := range exs {
		ex := &exs[i]
		c, ws, err := pipeline.QAWindows(tok, ex.Question, ex.Context, o)
		if err != nil {
			return nil, 0, &labelled.InputError{File: file, Line: ex.Line, Err: err}
		}
		sb, eb := -1, -1
		if len(ex.Answers.Text) > 0 {
			sb, eb, _ = ex.answerBytes(0)
		}
		for _, w := range ws {
			f := qaFeature{ids: tokenizer.Int32s(w.IDs), types: tokenizer.Int32s(w.TypeIDs)}
			if s, e, ok := answerTokens(c.Offsets, w.Lo, w.Hi, sb, eb); ok {
				f.start, f.end = int32(w.ContextStart+s-w.Lo), int32(w.ContextStart+e-w.Lo)
			} else if sb >= 0 {
				outside++
			}
			out = append(out, f)
		}
	}
	return out, outside, nil
}

// answerTokens finds the context tokens lo ≤ s ≤ e < hi whose offsets
// hold the answer's bytes [sb, eb): s the last token starting at or before
// sb, e the first ending at or after eb (run_qa's two scans, kept inside
// the window's context). ok is false when there is no answer or the
// window's context does not hold it whole.
func answerTokens(offs [][2]int, lo, hi, sb, eb int) (s, e int, ok bool) {
	if sb < 0 || hi <= lo || offs[lo][0] > sb || offs[hi-1][1] < eb {
		return 0, 0, false
	}
	s = lo
	for s+1 < hi && offs[s+1][0] <= sb {
		s++
	}
	e = hi - 1
	for e-1 >= lo && offs[e-1][1] >= eb {
		e--
	}
	return s, max(e, s), true
}

// QAJob is a question-answering fine-tuning run over loaded data.
type QAJob struct {
	Model     *roformer.Model // with the question-answering head
	Tokenizer *tokenizer.Tokenizer
	Train     []QAExample
	TrainFile string
	Eval      []QAExample // nil: no evaluation, the last epoch is kept
	Options   Options
	QA        QAOptions
	Progress  io.Writer
	Metrics   io.Writer
}

// TrainQA fine-tunes j.Model's question-answering head and encoder with
// HF's loss (the mean of the start and end cross-entropies) on the
// examples' windows; after each epoch it answers the evaluation questions
// with pipeline.QuestionAnswering and scores them with SQuAD's exact match
// and F1 (metrics.SQuAD), keeping the epoch with the best F1.
func TrainQA(ctx context.Context, j QAJob) (*HeadResult, error) {
	if j.Model.Head != roformer.HeadQA {
		return nil, fmt.Errorf("finetune: question answering needs the %s head, the model has %s", roformer.HeadQA, j.Model.Head)
	}
	if err := j.Options.Validate(); err != nil {
		return nil, err
	}
	po := j.QA.Pipeline(j.Options.MaxLength)
	feats, outside, err := qaFeatures(j.Tokenizer, j.Train, po, j.TrainFile)
	if err != nil {
		return nil, err
	}
	if j.Progress != nil {
		fmt.Fprintf(j.Progress, "question answering: %d questions → %d windows of at most %d tokens (%d windows without their answer, labelled [CLS])\n", len(j.Train), len(feats), j.Options.MaxLength, outside)
	}
	pad := int32(j.Tokenizer.PadID())
	task := headTask{n: len(feats), main: "f1", batch: func(items []int) (*roformer.Batch, *roformer.Labels, roformer.StepOptions) {
		ids, types := make([][]int32, len(items)), make([][]int32, len(items))
		lab := &roformer.Labels{StartPositions: make([]int32, len(items)), EndPositions: make([]int32, len(items))}
		for k, i := range items {
			ids[k], types[k] = feats[i].ids, feats[i].types
			lab.StartPositions[k], lab.EndPositions[k] = feats[i].start, feats[i].end
		}
		return padRows(ids, types, pad), lab, roformer.StepOptions{}
	}}
	if j.Eval != nil {
		task.eval = func(ctx context.Context, m *roformer.Model) (map[string]float64, error) {
			return EvaluateQA(ctx, m, j.Tokenizer, j.Eval, po)
		}
	}
	return trainHead(ctx, j.Model, task, j.Options, j.Progress, j.Metrics)
}

// EvaluateQA answers each question with pipeline.QuestionAnswering (its
// best span) and returns SQuAD's "exact_match" and "f1" (fractions) over
// the examples' gold answers, and "examples".
func EvaluateQA(ctx context.Context, m *roformer.Model, tok *tokenizer.Tokenizer, exs []QAExample, o pipeline.QuestionAnsweringOptions) (map[string]float64, error) {
	preds, golds := make([]string, len(exs)), make([][]string, len(exs))
	for i := range exs {
		ans, err := pipeline.QuestionAnswering(ctx, m, tok, exs[i].Question, exs[i].Context, o)
		if err != nil {
			return nil, fmt.Errorf("finetune: question %d (%q): %w", i+1, exs[i].ID, err)
		}
		if len(ans) > 0 {
			preds[i] = ans[0].Answer
		}
		golds[i] = exs[i].Answers.Text
	}
	em, f1 := metrics.SQuAD(preds, golds)
	return map[string]float64{"exact_match": em, "f1": f1, "examples": float64(len(exs))}, nil
}
