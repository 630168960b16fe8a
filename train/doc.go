// Package train runs masked-language-model pre-training independently of the
// concrete model: it drives any Model (forward/backward, evaluation, saving)
// with the optim and data packages, and owns the run folder.
//
// One optimizer step reads top to bottom (trainer.update): the learning rate
// from the schedule, zeroed gradients, forward and backward over Accum
// micro-batches (gradients averaged), a non-finite check, global-norm
// clipping, the AdamW update, and one fixed-format log line.
//
// The run folder (Options.OutDir) holds:
//
//	metrics.jsonl        one JSON object per logged step and per evaluation
//	loss.png             train and eval loss against the step
//	checkpoint-<step>/   model files (Model.SaveModel + the SaveExtra hook),
//	                     optimizer.bin (optim.AdamW state) and
//	                     train_state.json (step, options, data position,
//	                     random state, SHA-256 of every file)
//	latest               the name of the newest complete checkpoint
//	config.json, ...     the final model, copied from the last checkpoint
//
// Every file is written to a temporary name, synced and renamed; a
// checkpoint is assembled in a temporary folder that is renamed into place
// before latest is updated, so a crash or a failed save (disk full) never
// damages the previous checkpoint. The last Options.Keep (2) checkpoints are
// kept.
//
// Resume restores parameters (Model.LoadModel), optimizer moments, the data
// loader's position and masking generator, the model's own random state (if
// it implements StatefulModel) and the metrics log, so that the resumed run
// ends with a model byte-identical to an uninterrupted run with the same
// seed and thread count. Nothing in the loop depends on the clock or on map
// order.
package train
