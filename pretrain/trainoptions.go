package pretrain

import (
	"fmt"

	"github.com/roformer-go/roformer/optim"
)

// TrainOptions configure a training run. Zero values of fields where zero makes
// no sense take the defaults given in the comments (see Defaults);
// WeightDecay, Clip and Warmup mean what they say at zero.
// DefaultOptions gives recommended values for all of them.
type TrainOptions struct {
	Steps       int     `json:"steps"`        // optimizer updates; required
	BatchSize   int     `json:"batch_size"`   // sequences per micro-batch; default 8
	SeqLen      int     `json:"seq_len"`      // tokens per sequence, [CLS] and [SEP] included; default 128
	LR          float64 `json:"lr"`           // peak learning rate; default 5e-4
	Warmup      int     `json:"warmup"`       // warm-up steps; default 0
	Schedule    string  `json:"schedule"`     // constant, linear or cosine; default linear
	WeightDecay float64 `json:"weight_decay"` // AdamW decoupled decay (not on biases, LayerNorm); 0: none
	Beta1       float64 `json:"beta1"`        // default 0.9
	Beta2       float64 `json:"beta2"`        // default 0.999
	Eps         float64 `json:"eps"`          // default 1e-8
	Clip        float64 `json:"clip"`         // max global gradient norm; 0: no clipping
	Accum       int     `json:"accum"`        // micro-batches per step, gradients averaged; default 1
	Seed        uint64  `json:"seed"`         // drives data order and masks; 0 is a valid seed
	MaskProb    float64 `json:"mask_prob"`    // MLM selection probability; default 0.15
	WholeWord   bool    `json:"whole_word"`   // whole-word masking
	SaveEvery   int     `json:"save_every"`   // steps between checkpoints; 0: only at the end
	EvalEvery   int     `json:"eval_every"`   // steps between evaluations; 0: only at the end
	EvalBatches int     `json:"eval_batches"` // held-out batches per evaluation; 0: all
	LogEvery    int     `json:"log_every"`    // steps between log lines; default 10
	Keep        int     `json:"keep"`         // checkpoints kept; default 2
	OutDir      string  `json:"out_dir"`      // run folder; required
	Threads     int     `json:"threads"`      // informational: the thread count the caller set (per rank)
	// WorldSize is the number of data-parallel ranks (Loop.Group); the loop
	// sets it, and Resume compares it with the job's group.
	WorldSize int `json:"world_size,omitempty"`
	// Precision is the number format of the linear layers' products:
	// "" or "fp32", or "bf16" for mixed precision (float32 weights,
	// gradients and optimizer state; see roformer.Model.SetTrainingPrecision).
	// A resumed run keeps it.
	Precision string `json:"precision,omitempty"`
}

// DefaultOptions returns the recommended options for a small pre-training
// run: batch 8 × 128 tokens, peak rate 5e-4 with 10% warm-up and linear
// decay, weight decay 0.01, clipping at norm 1, a checkpoint every 500
// steps, an evaluation every 250, a log line every 10.
func DefaultTrainOptions(steps int, outDir string) TrainOptions {
	return TrainOptions{Steps: steps, Warmup: steps / 10, WeightDecay: 0.01, Clip: 1, SaveEvery: 500, EvalEvery: 250,
		EvalBatches: 20, OutDir: outDir}.Defaults()
}

// Defaults returns o with zero fields set to their defaults.
func (o TrainOptions) Defaults() TrainOptions {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	deff := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	def(&o.BatchSize, 8)
	def(&o.SeqLen, 128)
	def(&o.Accum, 1)
	def(&o.LogEvery, 10)
	def(&o.Keep, 2)
	deff(&o.LR, 5e-4)
	deff(&o.Beta1, 0.9)
	deff(&o.Beta2, 0.999)
	deff(&o.Eps, 1e-8)
	deff(&o.MaskProb, 0.15)
	if o.Schedule == "" {
		o.Schedule = string(optim.Linear)
	}
	return o
}

// Validate checks o (after Defaults) and names the first bad field.
func (o TrainOptions) Validate() error {
	switch {
	case o.Steps < 1:
		return fmt.Errorf("pretrain: steps %d must be >= 1", o.Steps)
	case o.BatchSize < 1 || o.Accum < 1:
		return fmt.Errorf("pretrain: batch size %d and accumulation %d must be >= 1", o.BatchSize, o.Accum)
	case o.SeqLen < 3:
		return fmt.Errorf("pretrain: sequence length %d must be >= 3", o.SeqLen)
	case o.Warmup < 0 || o.WeightDecay < 0 || o.Clip < 0 || o.SaveEvery < 0 || o.EvalEvery < 0 || o.EvalBatches < 0 || o.LogEvery < 1 || o.Keep < 1:
		return fmt.Errorf("pretrain: warmup %d, weight decay %g, clip %g, save-every %d, eval-every %d, eval-batches %d must be >= 0, log-every %d and keep %d >= 1",
			o.Warmup, o.WeightDecay, o.Clip, o.SaveEvery, o.EvalEvery, o.EvalBatches, o.LogEvery, o.Keep)
	case o.OutDir == "":
		return fmt.Errorf("pretrain: no output folder")
	case !(o.MaskProb > 0 && o.MaskProb <= 1):
		return fmt.Errorf("pretrain: mask probability %g must lie in (0, 1]", o.MaskProb)
	case o.Precision != "" && o.Precision != "fp32" && o.Precision != "bf16":
		return fmt.Errorf("pretrain: precision %q: training runs in fp32 or bf16", o.Precision)
	}
	k, err := optim.ParseSchedule(o.Schedule)
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	return optim.Schedule{Kind: k, PeakLR: o.LR, Warmup: o.Warmup, Total: o.Steps}.Validate()
}

func (o TrainOptions) schedule() optim.Schedule {
	return optim.Schedule{Kind: optim.ScheduleKind(o.Schedule), PeakLR: o.LR, Warmup: o.Warmup, Total: o.Steps}
}
