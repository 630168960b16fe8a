// Package sentence reads and writes sentence-transformers folders: the
// files that say how a transformer's last hidden state becomes one vector
// per text, and the modules that compute it.
//
// A sentence-transformers folder is a Hugging Face model folder (config.json,
// the weights, the tokenizer) with, beside it:
//
//	modules.json                      the pipeline: Transformer, Pooling, then Dense and Normalize modules
//	1_Pooling/config.json             which poolings (cls, mean, max, mean_sqrt_len_tokens, weightedmean,
//	                                  lasttoken; several at once are concatenated) and include_prompt
//	2_Dense/config.json, weights      a linear layer (in_features, out_features, bias) and its activation
//	3_Normalize/                      unit length
//	sentence_bert_config.json         max_seq_length, do_lower_case
//	config_sentence_transformers.json prompts, default_prompt_name, similarity_fn_name
//
// Load reads them (every file bounded, every size checked before it is
// allocated) into a Folder; Folder.Save writes them. The math of the modules
// is here too, on one row at a time: Pooling.Pool, Dense.Forward and
// Normalize, each as sentence-transformers computes it (formulas in their
// doc comments). Running the transformer and tokenizing belong to the
// packages above (pipeline).
//
// The reference is sentence-transformers' own code (UKPLab/sentence-
// transformers, v2.2.2 and v2.7.0): testdata/st holds folders saved by it
// and the vectors its SentenceTransformer.encode gives, and the tests
// compare.
package sentence
