// Package train holds the one optimizer step of the toolkit and its
// data-parallel form, for every training loop: package pretrain's
// masked-LM loop, finetune.Train, the char-lm, long-text and translation
// experiments and the bench's training mode. The loops themselves (data,
// evaluation, checkpoints, logging) stay with their packages.
//
// Stepper does one update, top to bottom: the learning rate from the
// schedule, zeroed gradients, forward and backward over Accum micro-batches
// (gradients averaged), the Reduce hook, a non-finite check, global-norm
// clipping and the AdamW update.
//
// DataParallel is that update on one rank of a group (package distributed):
// the rank's share of the step's micro-batches, the weighted gradient
// allreduce run as the Stepper's Reduce, the loss allreduce that carries
// the vote to stop, and the checks that the ranks hold the same parameters
// (CheckParams, ParamBytes). With one process it is the Stepper alone.
package train
