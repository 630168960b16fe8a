// Package optim holds the optimizer side of training: AdamW with decoupled
// weight decay, learning-rate schedules as pure functions of the step, and
// global-norm gradient clipping.
//
// AdamW follows torch.optim.AdamW (single-tensor path) as used by Hugging
// Face's Trainer; the schedules follow transformers.optimization
// (get_constant_schedule_with_warmup, get_linear_schedule_with_warmup,
// get_cosine_schedule_with_warmup); clipping follows
// torch.nn.utils.clip_grad_norm_ with the norm computed in float64.
//
// Parameters, gradients and both Adam moments are float32. Scalars that
// depend only on the step (bias corrections, step size) are computed in
// float64 and rounded once to float32 before the element loop, as PyTorch
// does when it passes a Python float to a float32 kernel.
//
// Gradient accumulation is the training loop's concern: the optimizer takes
// whatever sits in Param.Grad. The loop in package train averages the
// micro-batch gradients (it divides by the number of micro-batches), the
// Hugging Face Trainer convention.
package optim
