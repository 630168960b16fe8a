// Package pipeline holds ready-made inference tasks on top of a model and
// its tokenizer, named as Hugging Face's pipelines: FillMask, TokenClassification.
package pipeline
