// Package pretrain is masked-LM pretraining of a RoFormer from a text
// corpus, as one call, and the owner of its run folder: it reads the corpus
// (a file, a folder, or the built-in public-domain English corpus), gets a
// WordPiece vocabulary (given, built in, or trained on the corpus), packs
// the text into [CLS] … [SEP] sequences, holds out an evaluation split,
// builds the model from a size preset or a config.json, and runs the MLM
// loop (Loop), which checkpoints atomically and resumes exactly.
//
// Start and Resume are the job; Prepare, Loop.Run and Loop.Resume its parts
// (the experiments run the loop on models of their own). The loop drives
// any Model (forward/backward, evaluation, saving; NewMLMModel adapts a
// RoFormer) with the data and optim packages, and steps through package
// train's Stepper and DataParallel. One optimizer step reads top to bottom
// (trainer.update): the micro-batches drawn from the loader, this rank's
// share of them forward and backward, the gradients averaged (over the
// ranks too), clipped and applied, then one fixed-format log line.
//
// A run folder (TrainOptions.OutDir) holds:
//
//	pretrain.json        the job's options (Resume reads them back)
//	tokenizer/           the vocabulary used (vocab.txt, tokenizer_config.json)
//	metrics.jsonl        one JSON object per logged step and per evaluation
//	loss.png             train and eval loss against the step
//	checkpoint-<step>/   model files (Model.SaveModel + the SaveExtra hook:
//	                     vocabulary and tokenizer files), optimizer.bin
//	                     (optim.AdamW state) and train_state.json (step,
//	                     options, data position, random state, SHA-256 of
//	                     every file)
//	latest               the name of the newest complete checkpoint
//	config.json, model.safetensors, vocab.txt, tokenizer_config.json, …
//	                     the final model and its tokenizer, copied from the
//	                     last checkpoint, loadable by HF's
//	                     RoFormerForMaskedLM and BertTokenizer
//
// Every file is written to a temporary name, synced and renamed; a
// checkpoint is assembled in a temporary folder that is renamed into place
// before latest is updated, so a crash or a failed save (disk full) never
// damages the previous checkpoint. The last TrainOptions.Keep (2)
// checkpoints are kept.
//
// Resume restores parameters (Model.LoadModel), optimizer moments, the data
// loader's position and masking generator, the model's own random state (if
// it implements StatefulModel) and the metrics log, so that the resumed run
// ends with a model byte-identical to an uninterrupted run with the same
// seed and thread count. Nothing in the loop depends on the clock or on map
// order.
package pretrain
