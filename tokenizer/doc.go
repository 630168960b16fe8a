// Package tokenizer turns text into the input ids of RoFormer and BERT
// models exactly as Hugging Face's slow tokenizers do (transformers 4.30.2:
// RoFormerTokenizer and BertTokenizer), with byte offsets, pairs,
// truncation, padding, batches, decoding, the model-folder files, and
// vocabulary training.
//
// # Tokenization
//
// Bert (BertTokenizer): lower-case (Python's str.lower, one character at a
// time, outside special tokens), split on special tokens, then
// BasicTokenizer (drop control characters, spaces around CJK ideographs,
// NFC, whitespace split, NFD accent stripping when lower-casing, split off
// punctuation: Unicode P* plus ASCII symbols) and WordPiece (greedy
// longest-match-first, "##" continuations, words over 100 characters →
// [UNK]).
//
// RoFormer (RoFormerTokenizer): the same lower-casing and special-token
// split, then jieba word segmentation with HMM off (package jieba, jieba
// 0.42.1's dictionary embedded); a word that is in the vocabulary is one
// token as it stands, any other word goes through the Bert rules. jieba runs
// before accent stripping, so "café" becomes c ##a ##f e.
//
// # Offsets
//
// Encoding.Offsets are byte offsets [start, end) into the UTF-8 input
// string (not character or UTF-16 offsets): text[start:end] is the
// smallest stretch of the original text that a token was made from.
// Invalid UTF-8 is accepted: each bad byte decodes to U+FFFD, which the
// Bert rules drop.
//
// # Encodings, files, training
//
// Encode, EncodePair and EncodeBatch (parallel) add [CLS]/[SEP] and token
// types, truncate (longest_first, only_first, only_second) and pad (longest,
// max_length) as HF's tokenizer(...) call does; Decode inverts ids as HF's
// decode. Load reads a model folder (vocab.txt or a WordPiece
// tokenizer.json, tokenizer_config.json, special_tokens_map.json) and Save
// writes one. TrainWordPiece learns a vocabulary the way HF tokenizers'
// WordPieceTrainer does, TrainChineseWords a character + jieba-word one as
// RoFormer's was made. docs/tokenizer.md lists what is matched, the known
// differences and the measured speed.
//
// # Bounds
//
// The work and memory of an encoding are bounded by what it is asked for,
// whatever the text: with truncation to a length, or with
// EncodeOptions.Limit, a text longer than 64 KiB is tokenized a chunk at a
// time, cut only where no token can cross, and the tokenizer stops once
// the kept tokens are made (with Limit it goes on counting, without
// keeping, and refuses with a *LengthError that gives the count). Truncating
// a 20 MB text to 512 tokens allocates about 10 MB, not the 1.1 GB its 3.5 M
// tokens take whole. A text that has no place to cut for long (a single
// word of megabytes, or a run of Chinese characters that jieba cuts as one
// block) is held whole up to the next one; Tokenize, EncodeIDs and
// encodings without a length take about 130 bytes a byte of text, so
// callers bound the text first (the readers' line limits, the server's
// body limit). Special tokens are found in time linear in the text
// whatever they are (an Aho–Corasick automaton; at most MaxSpecialTokens of
// MaxSpecialTokenBytes), and WordPiece's words are at most MaxWordChars
// characters.
//
// A Tokenizer is immutable and safe for concurrent use; Load caches
// tokenizers by folder.
package tokenizer
