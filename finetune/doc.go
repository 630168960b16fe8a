// Package finetune fine-tunes a pretrained RoFormer on labelled text and
// evaluates it: the job behind `roformer finetune`, `roformer eval` and
// `roformer predict`.
//
// The pieces, in the order a run uses them:
//
//   - labelled.ReadFile reads the examples and a labelled.Spec says what is
//     learnt (package data/labelled holds both, with no model code; Head
//     and ApplySpec give a Spec's model head and configuration).
//   - LoadModel adds a sequence- or token-classification head to a pretrained
//     encoder (weights initialised as Hugging Face's _init_weights does:
//     N(0, initializer_range²) weights and zero biases) or continues a model
//     fine-tuned before, whose id2label must match the label set.
//   - Train runs the loop: shuffled batches padded to their longest row,
//     AdamW with HF's decay mask, a linear schedule with warm-up, gradient
//     clipping, dropout as in training mode, an evaluation after each epoch,
//     the best parameters kept in memory by the Spec's metric, and optional
//     early stopping.
//   - Evaluate scores a model on a dataset with GLUE's metrics (package
//     metrics) and a confusion matrix; Predict returns labels and scores.
//   - Run ties these together for a whole job and publishes the output
//     folder atomically: config.json and model.safetensors that
//     transformers' RoFormerFor{Sequence,Token}Classification loads, the
//     tokenizer files, finetune.json, metrics.jsonl and eval_results.json.
//     Until the job succeeds nothing is written under the output folder's
//     name.
//   - Baseline trains a bag-of-words logistic regression on the same splits,
//     the reference the results page compares with.
//
// The package reads files and folders only; fetching the built-in tasks'
// data is the job of package tasks and the CLI.
package finetune
