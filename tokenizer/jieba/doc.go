// Package jieba is a Go port of the dictionary-only ("HMM off") word
// segmentation of jieba 0.42.1 (https://github.com/fxsjy/jieba, MIT), the
// segmenter that Hugging Face's RoFormerTokenizer runs before WordPiece for
// RoFormer's Chinese word-level checkpoints (roformer_chinese_base/small).
//
// It reproduces jieba.lcut(text, cut_all=False, HMM=False) word for word:
//
//   - text is split into runs of [\u4E00-\u9FD5a-zA-Z0-9+#&._%-] and the rest;
//     outside the runs every character is a word ("\r\n" is one word);
//   - a run is cut along the route that maximises Σ log(freq(w)) − log(total)
//     over the dictionary's directed acyclic graph of words, ties going to the
//     longer first word, and single ASCII letters or digits on the route are
//     merged back into one word.
//
// The dictionary is jieba 0.42.1's dict.txt, embedded gzip-compressed (see
// NOTICE); Default builds the prefix trie from it once, on first use. The
// logarithms are rounded correctly (as glibc's log, which CPython calls,
// rounds them for every frequency in the dictionary), so scores and ties
// match Python bit for bit.
package jieba
