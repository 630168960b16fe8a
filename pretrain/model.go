package pretrain

import (
	"context"
	"path/filepath"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tensor"
)

// Model is what the loop needs from a masked language model.
type Model interface {
	// Params returns the trainable parameters, in a fixed order, with their
	// Hugging Face names. The loop zeroes Grad before each step.
	Params() []*tensor.Param
	// ForwardBackward runs the MLM forward and backward pass on b, ADDING
	// the gradient of the mean loss over labelled tokens (Labels != -100)
	// into Param.Grad, and returns that mean loss. Training-mode dropout
	// should take its masks from b.Seed, which a resumed run reproduces.
	// It should return ctx's error promptly when ctx is cancelled.
	ForwardBackward(ctx context.Context, b *data.Batch) (loss float64, err error)
	// Evaluate returns the summed cross-entropy over the labelled tokens of
	// b, their number and how many the argmax predicts correctly, without
	// touching gradients or any random state.
	Evaluate(ctx context.Context, b *data.Batch) (lossSum float64, n, correct int, err error)
	// SaveModel writes the Hugging Face model files (config.json,
	// model.safetensors) into the existing folder dir. The loop makes the
	// result atomic at the folder level.
	SaveModel(dir string) error
	// LoadModel reads the parameters back from a folder written by
	// SaveModel, exactly (float32 bits).
	LoadModel(dir string) error
}

// StatefulModel is a Model with random state of its own (a dropout
// generator not driven by Batch.Seed) that must be checkpointed for an
// exact resume. The loop saves
// TrainState at each checkpoint and restores it with SetTrainState.
type StatefulModel interface {
	Model
	TrainState() ([]byte, error)
	SetTrainState(b []byte) error
}

// NewMLMModel adapts a RoFormer with the masked-LM head to Model:
// training steps with dropout seeded by data.Batch.Seed, evaluation of the
// labelled tokens, and the model saved and reloaded exactly as
// config.json + model.safetensors. Its workspaces are reused across steps.
func NewMLMModel(m *roformer.Model) Model { return &mlm{m: m} }

// mlm adapts the RoFormer masked-LM model to Model.
type mlm struct {
	m         *roformer.Model
	st, evalS *roformer.State
}

func toBatch(b *data.Batch) *roformer.Batch {
	return &roformer.Batch{InputIDs: b.InputIDs, TokenTypeIDs: b.TokenTypeIDs, AttentionMask: b.AttentionMask, B: b.B, T: b.T}
}

func (a *mlm) Params() []*tensor.Param { return a.m.Params() }

func (a *mlm) ForwardBackward(ctx context.Context, b *data.Batch) (float64, error) {
	if a.st == nil || a.st.B != b.B || a.st.T != b.T {
		a.st = a.m.NewState(b.B, b.T, true)
	}
	r, err := a.m.ForwardBackward(ctx, a.st, toBatch(b), &roformer.Labels{IDs: b.Labels}, roformer.StepOptions{Dropout: true, Seed: b.Seed})
	if err != nil {
		return 0, err
	}
	return r.Loss, nil
}

func (a *mlm) Evaluate(ctx context.Context, b *data.Batch) (float64, int, int, error) {
	if a.evalS == nil || a.evalS.B != b.B || a.evalS.T != b.T {
		a.evalS = a.m.NewState(b.B, b.T, false)
	}
	return a.m.EvaluateMLM(ctx, a.evalS, toBatch(b), b.Labels)
}

func (a *mlm) SaveModel(dir string) error { return a.m.Save(dir) }

func (a *mlm) LoadModel(dir string) error {
	f, err := checkpoint.ReadSafetensors(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return err
	}
	_, err = a.m.Bind(f.TensorMap(), roformer.BindOptions{Strict: true})
	return err
}
