package finetune

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/metrics"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// ChoiceExample is one multiple-choice question: an optional context, the
// question, its choices and the index of the right one.
type ChoiceExample struct {
	Line     int      `json:"-"`
	Context  string   `json:"context,omitempty"`
	Question string   `json:"question"`
	Choices  []string `json:"choices"`
	Label    int      `json:"label"`
}

// MaxChoices bounds the choices of a question.
const MaxChoices = 64

// ReadChoices reads a JSONL file of rows {"context" (optional), "question",
// "choices": [...], "label": i}: every row with the first row's number of
// choices (2 to MaxChoices) and a label in [0, choices). Blank lines are
// skipped, other fields ignored; lines longer than maxLineBytes
// (labelled.DefaultMaxLineBytes when 0) are refused. Errors are
// *labelled.InputError naming the file, the line and the field.
func ReadChoices(path string, maxLineBytes int) ([]ChoiceExample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	defer f.Close()
	return readChoices(f, path, maxLineBytes)
}

func readChoices(r io.Reader, path string, maxLineBytes int) ([]ChoiceExample, error) {
	var out []ChoiceExample
	err := labelled.EachJSONLine(r, path, maxLineBytes, func(line int, b []byte) error {
		var raw struct {
			Context  string   `json:"context"`
			Question *string  `json:"question"`
			Choices  []string `json:"choices"`
			Label    *int     `json:"label"`
		}
		fail := func(err error) error {
			return &labelled.InputError{File: path, Line: line, Err: err}
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return fail(err)
		}
		switch {
		case raw.Question == nil || *raw.Question == "":
			return fail(errors.New(`no "question" (a non-empty string)`))
		case len(raw.Choices) < 2 || len(raw.Choices) > MaxChoices:
			return fail(fmt.Errorf(`"choices" has %d strings, want 2 to %d`, len(raw.Choices), MaxChoices))
		case len(out) > 0 && len(raw.Choices) != len(out[0].Choices):
			return fail(fmt.Errorf(`"choices" has %d strings; line %d has %d, and every row needs the same number`, len(raw.Choices), out[0].Line, len(out[0].Choices)))
		case raw.Label == nil:
			return fail(errors.New(`no "label" (the index of the right choice)`))
		case *raw.Label < 0 || *raw.Label >= len(raw.Choices):
			return fail(fmt.Errorf(`"label" %d is outside [0, %d)`, *raw.Label, len(raw.Choices)))
		}
		out = append(out, ChoiceExample{Line: line, Context: raw.Context, Question: *raw.Question, Choices: raw.Choices, Label: *raw.Label})
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

// ChoicePair returns the pair of texts one choice is encoded as, after HF's
// run_swag (first sentence the context, second the question and the
// ending): (context, question + " " + choice) with a context, else
// (question, choice).
func ChoicePair(ex *ChoiceExample, choice int) (first, second string) {
	if ex.Context != "" {
		return ex.Context, ex.Question + " " + ex.Choices[choice]
	}
	return ex.Question, ex.Choices[choice]
}

// choiceFeature is one question's choices, encoded.
type choiceFeature struct {
	ids, types [][]int32
	label      int32
}

func choiceFeatures(tok *tokenizer.Tokenizer, exs []ChoiceExample, o Options, file string) ([]choiceFeature, int, error) {
	tr, _ := o.truncation()
	out := make([]choiceFeature, len(exs))
	truncated := 0
	for i := range exs {
		ex := &exs[i]
		f := choiceFeature{label: int32(ex.Label)}
		for c := range ex.Choices {
			a, b := ChoicePair(ex, c)
			enc, err := tok.EncodePair(a, b, tokenizer.EncodeOptions{MaxLength: o.MaxLength, Truncation: tr})
			if err != nil {
				return nil, 0, &labelled.InputError{File: file, Line: ex.Line, Err: fmt.Errorf("choice %d: %w", c, err)}
			}
			if enc.Truncated {
				truncated++
			}
			f.ids, f.types = append(f.ids, tokenizer.Int32s(enc.IDs)), append(f.types, tokenizer.Int32s(enc.TypeIDs))
		}
		out[i] = f
	}
	return out, truncated, nil
}

// choiceBatch lays out the choices of feats as rows examples × choices.
func choiceBatch(feats []*choiceFeature, pad int32) (*roformer.Batch, *roformer.Labels) {
	var ids, types [][]int32
	lab := &roformer.Labels{IDs: make([]int32, len(feats))}
	for k, f := range feats {
		ids, types = append(ids, f.ids...), append(types, f.types...)
		lab.IDs[k] = f.label
	}
	return padRows(ids, types, pad), lab
}

// ChoiceJob is a multiple-choice fine-tuning run over loaded data.
type ChoiceJob struct {
	Model     *roformer.Model // with the multiple-choice head
	Tokenizer *tokenizer.Tokenizer
	Train     []ChoiceExample
	TrainFile string
	Eval      []ChoiceExample // nil: no evaluation, the last epoch is kept
	EvalFile  string
	Options   Options // BatchSize counts questions (each BatchSize × choices rows)
	Progress  io.Writer
	Metrics   io.Writer
}

// TrainChoices fine-tunes j.Model's multiple-choice head and encoder with
// HF's loss (cross-entropy over each question's choice scores); after
// each epoch it scores the evaluation questions (accuracy, loss), keeping
// the epoch with the best accuracy.
func TrainChoices(ctx context.Context, j ChoiceJob) (*HeadResult, error) {
	if j.Model.Head != roformer.HeadMultipleChoice {
		return nil, fmt.Errorf("finetune: multiple choice needs the %s head, the model has %s", roformer.HeadMultipleChoice, j.Model.Head)
	}
	if err := j.Options.Validate(); err != nil {
		return nil, err
	}
	if len(j.Eval) > 0 && len(j.Train) > 0 && len(j.Eval[0].Choices) != len(j.Train[0].Choices) {
		return nil, fmt.Errorf("finetune: %s has %d choices a question, %s %d", j.TrainFile, len(j.Train[0].Choices), j.EvalFile, len(j.Eval[0].Choices))
	}
	feats, trunc, err := choiceFeatures(j.Tokenizer, j.Train, j.Options, j.TrainFile)
	if err != nil {
		return nil, err
	}
	if j.Progress != nil {
		fmt.Fprintf(j.Progress, "multiple choice: %d questions of %d choices (%d choices truncated to %d tokens)\n", len(feats), len(j.Train[0].Choices), trunc, j.Options.MaxLength)
	}
	pad := int32(j.Tokenizer.PadID())
	nc := len(j.Train[0].Choices)
	task := headTask{n: len(feats), main: "accuracy", batch: func(items []int) (*roformer.Batch, *roformer.Labels, roformer.StepOptions) {
		fs := make([]*choiceFeature, len(items))
		for k, i := range items {
			fs[k] = &feats[i]
		}
		b, lab := choiceBatch(fs, pad)
		return b, lab, roformer.StepOptions{NumChoices: nc}
	}}
	if j.Eval != nil {
		task.eval = func(ctx context.Context, m *roformer.Model) (map[string]float64, error) {
			return EvaluateChoices(ctx, m, j.Tokenizer, j.Eval, j.Options, j.EvalFile)
		}
	}
	return trainHead(ctx, j.Model, task, j.Options, j.Progress, j.Metrics)
}

// EvaluateChoices scores the questions in batches of o.EvalBatchSize
// questions and returns "accuracy" (the arg-max choice is the label),
// "loss" (the mean cross-entropy) and "examples".
func EvaluateChoices(ctx context.Context, m *roformer.Model, tok *tokenizer.Tokenizer, exs []ChoiceExample, o Options, file string) (map[string]float64, error) {
	if len(exs) == 0 {
		return nil, errors.New("finetune: no multiple-choice questions to evaluate")
	}
	feats, _, err := choiceFeatures(tok, exs, o, file)
	if err != nil {
		return nil, err
	}
	nc := len(exs[0].Choices)
	pad := int32(tok.PadID())
	pred, gold := make([]int, 0, len(feats)), make([]int, 0, len(feats))
	lossSum := 0.0
	bs := max(o.EvalBatchSize, 1)
	for lo := 0; lo < len(feats); lo += bs {
		fs := make([]*choiceFeature, 0, bs)
		for i := lo; i < min(lo+bs, len(feats)); i++ {
			fs = append(fs, &feats[i])
		}
		b, lab := choiceBatch(fs, pad)
		out, err := m.Forward(ctx, b, lab, roformer.Options{NumChoices: nc})
		if err != nil {
			return nil, err
		}
		lossSum += out.Loss * float64(len(fs))
		for k := range fs {
			pred = append(pred, kernels.Argmax(out.Logits.Data[k*nc:(k+1)*nc]))
			gold = append(gold, int(lab.IDs[k]))
		}
	}
	return map[string]float64{"accuracy": metrics.Accuracy(pred, gold), "loss": lossSum / float64(len(feats)), "examples": float64(len(feats))}, nil
}
