// Package pretrain is masked-LM pretraining of a RoFormer from a text
// corpus, as one call: it reads the corpus (a file, a folder, or the
// built-in public-domain English corpus), gets a WordPiece vocabulary (given,
// built in, or trained on the corpus), packs the text into [CLS] … [SEP]
// sequences, holds out an evaluation split, builds the model from a size
// preset or a config.json, and runs package train's loop, which checkpoints
// atomically and resumes exactly.
//
// A run folder holds:
//
//	pretrain.json        these options (Resume reads them back)
//	tokenizer/           the vocabulary used (vocab.txt, tokenizer_config.json)
//	checkpoint-<step>/   model, vocabulary, optimizer and training state
//	latest               the newest complete checkpoint
//	metrics.jsonl        one JSON line per logged step and evaluation
//	loss.png             the loss curves
//	config.json, model.safetensors, vocab.txt, tokenizer_config.json, …
//	                     the final model and its tokenizer, loadable by HF's
//	                     RoFormerForMaskedLM and BertTokenizer
package pretrain
