// Package pipeline opens a model folder once (Open: config.json, the
// weights, the head, the precision and the tokenizer) and holds ready-made
// inference tasks on top of a model and its tokenizer, named as Hugging
// Face's pipelines: FillMask, TokenClassification, QuestionAnswering; and
// Embed, one pooled vector per text as the server's embedding routes and
// `roformer embed` give them.
package pipeline
