// Package nn holds the layer types that both of the toolkit's models are
// built of: Linear (PyTorch's nn.Linear) and LayerNorm (nn.LayerNorm, or the
// parameter-free RMS norm of RoFormer-V2), each a struct of parameters with
// a Forward and a Backward pass over flat row-major slices (llm.c style),
// computed by package kernels.
//
// model/roformer (the encoder with its heads) and model/seq2seq (the
// encoder-decoder of the paper's §4.1) both use these types; it sits below
// them so that neither model imports the other. The struct tags name the
// tensors as Hugging Face checkpoints do ("weight", "bias"): the roformer
// binder appends them to each field's own tag; seq2seq names its
// parameters itself and ignores them.
//
// Gradients follow kernels' policy: parameter gradients accumulate (+=);
// Linear.Backward writes its input gradient (=), LayerNorm.Backward adds
// into it (+=), so that a residual stream's gradient can already be there.
package nn
