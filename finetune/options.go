package finetune

import (
	"errors"
	"fmt"
	"math"

	"github.com/roformer-go/roformer/optim"
	"github.com/roformer-go/roformer/tokenizer"
)

// Options are the hyper-parameters of a fine-tuning run. Start from
// DefaultOptions.
type Options struct {
	MaxLength int `json:"max_length"` // tokens per input with [CLS] and [SEP]
	BatchSize int `json:"batch_size"` // inputs per micro-batch (per rank)
	// Accum is the number of micro-batches of BatchSize inputs per
	// optimizer step (gradients averaged); 0 counts as 1. A step takes
	// BatchSize × Accum × ranks inputs.
	Accum int `json:"accum,omitempty"`
	// MiniBatchSize, when in [1, BatchSize), makes contrastive training
	// (TrainEmbed) cache gradients (GradCache; sentence-transformers'
	// mini_batch_size of its Cached losses): each micro-batch's texts are
	// encoded MiniBatchSize rows at a time, so the activations held are a
	// mini-batch's, with the same in-batch negatives, dropout masks and
	// gradient; 0 (or BatchSize and more) off. Other training ignores it.
	MiniBatchSize int     `json:"mini_batch_size,omitempty"`
	EvalBatchSize int     `json:"eval_batch_size"` // inputs per evaluation forward pass
	Epochs        int     `json:"epochs"`
	LR            float64 `json:"lr"`           // peak learning rate
	Schedule      string  `json:"schedule"`     // linear, cosine or constant after the warm-up
	WarmupRatio   float64 `json:"warmup_ratio"` // warm-up as a share of all steps
	WarmupSteps   int     `json:"warmup_steps"` // when > 0, wins over WarmupRatio
	WeightDecay   float64 `json:"weight_decay"` // AdamW decoupled decay (not on biases and LayerNorm)
	Clip          float64 `json:"clip"`         // global gradient-norm clip; 0 off
	Seed          uint64  `json:"seed"`         // head initialisation, data order and dropout
	// Patience stops training after this many evaluations in a row without
	// a new best (0: never stop early).
	Patience   int    `json:"patience"`
	Truncation string `json:"truncation"` // longest_first, only_first, only_second or none (over-long input is an error)
	LogEvery   int    `json:"log_every"`  // optimizer steps between progress lines
	// Precision is the number format of the linear layers' products in
	// training and the evaluations during it: "" or "fp32", or "bf16" for
	// mixed precision (float32 weights, gradients and optimizer state; see
	// roformer.Model.SetTrainingPrecision). The saved weights are float32.
	Precision string `json:"precision,omitempty"`
}

// DefaultOptions returns Hugging Face Trainer-like settings: 3 epochs,
// batch 32, learning rate 5e-5 with linear decay and 6% warm-up, weight
// decay 0.01, clipping at 1, inputs cut at 128 tokens, seed 42.
func DefaultOptions() Options {
	return Options{MaxLength: 128, BatchSize: 32, EvalBatchSize: 64, Epochs: 3, LR: 5e-5, Schedule: "linear",
		WarmupRatio: 0.06, WeightDecay: 0.01, Clip: 1, Seed: 42, Truncation: "longest_first", LogEvery: 50}
}

// Validate checks the options; errors carry the numbers.
func (o *Options) Validate() error {
	var errs []error
	if o.MaxLength < 3 {
		errs = append(errs, fmt.Errorf("max length %d must be at least 3 ([CLS], a token, [SEP])", o.MaxLength))
	}
	if o.BatchSize < 1 || o.EvalBatchSize < 1 || o.Accum < 0 {
		errs = append(errs, fmt.Errorf("batch sizes %d and %d must be at least 1, accumulation %d at least 0", o.BatchSize, o.EvalBatchSize, o.Accum))
	}
	if o.MiniBatchSize < 0 {
		errs = append(errs, fmt.Errorf("mini-batch size %d must be at least 0 (0: no gradient caching)", o.MiniBatchSize))
	}
	if o.Epochs < 1 {
		errs = append(errs, fmt.Errorf("epochs %d must be at least 1", o.Epochs))
	}
	if !(o.LR > 0) || math.IsInf(o.LR, 0) {
		errs = append(errs, fmt.Errorf("learning rate %v must be a positive number", o.LR))
	}
	if _, err := optim.ParseSchedule(o.Schedule); err != nil {
		errs = append(errs, err)
	}
	if !(o.WarmupRatio >= 0 && o.WarmupRatio <= 1) || o.WarmupSteps < 0 {
		errs = append(errs, fmt.Errorf("warm-up ratio %v must lie in [0, 1] and warm-up steps %d must be >= 0", o.WarmupRatio, o.WarmupSteps))
	}
	if !(o.WeightDecay >= 0) || !(o.Clip >= 0) {
		errs = append(errs, fmt.Errorf("weight decay %v and clip %v must be >= 0", o.WeightDecay, o.Clip))
	}
	if o.Patience < 0 {
		errs = append(errs, fmt.Errorf("patience %d must be >= 0", o.Patience))
	}
	if _, err := o.truncation(); err != nil {
		errs = append(errs, err)
	}
	if o.Precision != "" && o.Precision != "fp32" && o.Precision != "bf16" {
		errs = append(errs, fmt.Errorf("precision %q: training runs in fp32 or bf16", o.Precision))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("finetune: %w", err)
	}
	return nil
}

func (o *Options) truncation() (tokenizer.Truncation, error) {
	if o.Truncation == "" {
		return tokenizer.TruncateLongestFirst, nil
	}
	return tokenizer.ParseTruncation(o.Truncation)
}

// EvalOptions returns the evaluation settings that match the training ones.
func (o *Options) EvalOptions() EvalOptions {
	tr, _ := o.truncation()
	return EvalOptions{MaxLength: o.MaxLength, BatchSize: o.EvalBatchSize, Truncation: tr}
}
