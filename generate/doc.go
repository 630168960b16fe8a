// Package generate decodes token sequences from any autoregressive model
// through a small interface, written once for every model of the module:
// greedy decoding, sampling (temperature, top-k, top-p, repetition penalty,
// seeded), beam search (length penalty, early stopping), the stop
// conditions (an EOS id, a number of new tokens, a per-row callback) and
// streaming (a callback per step, with the chosen ids' log-probabilities
// and the most likely ids on request).
//
// A model takes part by implementing Decoder: Prefill runs the prompts and
// returns the logits of the token after each, Step feeds one token per row
// and returns the next logits, Reorder makes the rows follow the beams they
// continue (the model's key/value cache moves with them). The package knows
// no model: it imports only kernels (the log-softmax and softmax of a row of
// logits) and the standard library, and the models (model/roformer with its
// causal and UniLM masks, model/seq2seq with its encoder pass and
// cross-attention) import it for Options and satisfy Decoder, so imports go
// one way: kernels ← generate ← model/… ← server, cmd.
//
// The searches follow Hugging Face transformers 4.30.2
// (generation/utils.py, logits_process.py, beam_search.py): at each step
// the row's logits z (V ids) become the scores that choose the next id:
//
//	greedy:  argmax_v z'_v                      z' = repetition-penalised z
//	sample:  v ~ softmax(warp(z'))              warp: /T, top-k, top-p
//	beam:    the 2K best of s_k + log softmax(z_k)'_v over the K beams k
//
// where beam search keeps the K best continuations that do not end in the
// EOS, files those that do (ranked among the first K) as finished
// hypotheses scored by their summed log-probability over a length penalty,
// and returns the best hypothesis of each prompt.
package generate
