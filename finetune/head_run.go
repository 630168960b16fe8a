package finetune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// TaskRunFile is the run description in a question-answering or
// multiple-choice folder (finetune.json is the classification heads').
const TaskRunFile = "finetune_task.json"

// TaskRunInfo is finetune_task.json.
type TaskRunInfo struct {
	Format     string         `json:"format"` // "roformer-finetune-task"
	Version    int            `json:"version"`
	Task       roformer.Head  `json:"task"` // question-answering or multiple-choice
	BaseModel  string         `json:"base_model"`
	Continued  bool           `json:"continued"`
	Tokenizer  string         `json:"tokenizer"`
	Options    Options        `json:"options"`
	QA         *QAOptions     `json:"qa,omitempty"`
	NumChoices int            `json:"num_choices,omitempty"`
	Data       map[string]any `json:"data,omitempty"`
	Result     *HeadResult    `json:"result"`
	Created    string         `json:"created"`
}

// TaskRunOptions describe a question-answering or multiple-choice
// fine-tuning job: QATrain for question answering, or ChoiceTrain for
// multiple choice (with their optional evaluation data).
type TaskRunOptions struct {
	Model     string // folder of the pretrained (or fine-tuned) model
	Tokenizer string // tokenizer folder; empty: see LoadTokenizer
	NewHead   bool

	QATrain, QAEval         []QAExample
	QA                      QAOptions
	ChoiceTrain, ChoiceEval []ChoiceExample
	TrainFile, EvalFile     string

	Options  Options
	Out      string
	Data     map[string]any // recorded in finetune_task.json
	Progress io.Writer
}

// RunTask fine-tunes the question-answering or multiple-choice head
// (TrainQA, TrainChoices) and publishes the folder in ro.Out atomically, as
// Run does: config.json naming RoFormerForQuestionAnswering or
// RoFormerForMultipleChoice, model.safetensors, the tokenizer files,
// finetune_task.json and metrics.jsonl. A model folder saved with the head
// is continued unless NewHead; otherwise the head is new, with HF's
// initialisation seeded by Options.Seed. It runs in one process.
func RunTask(ctx context.Context, ro TaskRunOptions) (*TaskRunInfo, error) {
	head := roformer.HeadQA
	switch {
	case ro.QATrain != nil && ro.ChoiceTrain != nil:
		return nil, errors.New("finetune: RunTask takes question-answering or multiple-choice data, not both")
	case ro.ChoiceTrain != nil:
		head = roformer.HeadMultipleChoice
	case ro.QATrain == nil:
		return nil, errors.New("finetune: no training data")
	}
	if err := ro.Options.Validate(); err != nil {
		return nil, err
	}
	if err := CheckOut(ro.Out); err != nil {
		return nil, err
	}
	say := func(format string, a ...any) {
		if ro.Progress != nil {
			fmt.Fprintf(ro.Progress, format+"\n", a...)
		}
	}
	tok, tokFrom, err := LoadTokenizer(ro.Model, ro.Tokenizer)
	if err != nil {
		return nil, err
	}
	m, continued, err := loadTaskModel(ro.Model, head, ro.NewHead, ro.Options.Seed)
	if err != nil {
		return nil, err
	}
	how := fmt.Sprintf("a new %s head (HF initialisation, seed %d)", head, ro.Options.Seed)
	if continued {
		how = fmt.Sprintf("its fine-tuned %s head, continued", head)
	}
	say("model: %s with %s", ro.Model, how)
	say("tokenizer: %s (%s, %d tokens)", tokFrom, tok.Kind(), tok.VocabSize())
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(ro.Out)), 0o755); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	stage, err := atomicfile.NewStage(ro.Out)
	if err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	defer stage.Discard() // unless published
	info := &TaskRunInfo{Format: "roformer-finetune-task", Version: 1, Task: head, BaseModel: ro.Model, Continued: continued,
		Tokenizer: tokFrom, Options: ro.Options, Data: ro.Data}
	var mbuf bytes.Buffer
	if head == roformer.HeadQA {
		q := ro.QA
		info.QA = &q
		info.Result, err = TrainQA(ctx, QAJob{Model: m, Tokenizer: tok, Train: ro.QATrain, TrainFile: ro.TrainFile, Eval: ro.QAEval,
			Options: ro.Options, QA: ro.QA, Progress: ro.Progress, Metrics: &mbuf})
	} else {
		info.NumChoices = len(ro.ChoiceTrain[0].Choices)
		info.Result, err = TrainChoices(ctx, ChoiceJob{Model: m, Tokenizer: tok, Train: ro.ChoiceTrain, TrainFile: ro.TrainFile,
			Eval: ro.ChoiceEval, EvalFile: ro.EvalFile, Options: ro.Options, Progress: ro.Progress, Metrics: &mbuf})
	}
	if err != nil {
		return nil, err
	}
	info.Created = time.Now().UTC().Format(time.RFC3339)
	if err := saveTask(stage.Dir, m, tok, info, mbuf.Bytes()); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := publish(stage, ro.Out); err != nil {
		return nil, err
	}
	return info, nil
}

// loadTaskModel reads dir with head: continued when config.json's
// architectures name the head's class (and not newHead), else a new head.
// The question-answering head's configuration says num_labels 2, as
// HF's RoFormerForQuestionAnswering sets it.
func loadTaskModel(dir string, head roformer.Head, newHead bool, seed uint64) (*roformer.Model, bool, error) {
	cfg, err := roformer.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, false, err
	}
	var override func(*roformer.Config)
	if head == roformer.HeadQA {
		override = func(c *roformer.Config) {
			if c.NumLabels != 2 {
				c.SetLabels([]string{"LABEL_0", "LABEL_1"})
			}
		}
	}
	cont := slices.Contains(cfg.Architectures, head.HFClass()) && !newHead
	l, err := roformer.Load(dir, head, roformer.LoadOptions{ConfigOverride: override, NewHead: !cont, InitSeed: seed})
	if err != nil {
		return nil, false, err
	}
	return l.Model, cont, nil
}

func saveTask(dir string, m *roformer.Model, tok *tokenizer.Tokenizer, info *TaskRunInfo, metrics []byte) error {
	if err := m.Save(dir); err != nil {
		return err
	}
	if err := tok.Save(dir); err != nil {
		return err
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("finetune: %s: %w", TaskRunFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, TaskRunFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("finetune: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, MetricsFile), metrics, 0o644); err != nil {
		return fmt.Errorf("finetune: %w", err)
	}
	return nil
}
