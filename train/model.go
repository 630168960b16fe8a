package train

import (
	"context"

	"github.com/roformer-go/roformer/data"
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
