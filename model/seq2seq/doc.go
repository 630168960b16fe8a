// Package seq2seq is the encoder-decoder Transformer of the RoFormer paper's
// machine-translation experiment (Su et al., arXiv 2104.09864, §4.1: the
// Transformer-base of Vaswani et al. 2017 with its self-attention rotated),
// built from the toolkit's kernels and its rotary package.
//
// The model:
//
//	x_src = √C·E[src] (+ PE)        x_tgt = √C·E[BOS y_1 … y_{n}] (+ PE)
//	encoder layer:  x += Drop(SelfAttn(LN(x), source mask))
//	                x += Drop(W2·ReLU(W1·LN(x)))
//	decoder layer:  y += Drop(SelfAttn(LN(y), causal))
//	                y += Drop(CrossAttn(LN(y), LN_enc(x_L), source mask))
//	                y += Drop(W2·ReLU(W1·LN(y)))
//	logits = LN_dec(y_L)·Eᵀ
//
// E is one embedding matrix shared by source, target and output projection
// (Vaswani et al. §3.4, a shared BPE vocabulary). Position is either rotary
// (RoPE on the queries and keys of encoder and decoder self-attention;
// cross-attention is not rotated, since source and target positions are not
// on one axis: the paper's setup) or sinusoidal (Vaswani's table added to the
// √C-scaled token embeddings, §3.5).
//
// The layers are pre-LN by default (the LayerNorm before each sub-layer, one
// at the top of each stack), not the post-LN of the original paper: at the
// small scale and few steps of this toolkit's experiment pre-LN trains
// without the long warm-up that post-LN needs (Xiong et al. 2020). Config's
// LayerNorm = PostLN gives Vaswani et al.'s layers (§3.1: the output of each
// sub-layer is LayerNorm(x + Sublayer(x)), dropout applied to the
// sub-layer's output before the sum, §5.4):
//
//	encoder layer:  x = LN(x + Drop(SelfAttn(x, source mask)))
//	                x = LN(x + Drop(W2·ReLU(W1·x)))
//	decoder layer:  y = LN(y + Drop(SelfAttn(y, causal)))
//	                y = LN(y + Drop(CrossAttn(y, x_L, source mask)))
//	                y = LN(y + Drop(W2·ReLU(W1·y)))
//	logits = y_L·Eᵀ
//
// with no LayerNorm at the top of either stack (the last sub-layer already
// ends in one): fairseq's transformer without normalize_before, whose
// encoder and decoder then hold no final layer_norm, and tensor2tensor's
// v1 Transformer (post-processing "dan", no pre-processing), whose final
// pre-processing step is then empty. The LayerNorms keep their names (and
// fairseq's): self_attn_layer_norm, encoder_attn_layer_norm,
// final_layer_norm.
//
// Training uses label-smoothed cross-entropy (ε = 0.1, Szegedy et al.; §5.4
// of Vaswani et al.) through Forward and Pass.Backward, llm.c-style pairs
// whose every parameter gradient is checked against float64 finite
// differences in the tests. Decoding keeps a key/value cache per decoder
// layer, with the cross-attention keys and values computed once per source:
// Greedy and Beam (beam search with GNMT's length penalty ((5+|Y|)/6)^α).
// Save and Load write and read a folder with config.json and
// model.safetensors; Average is Vaswani et al.'s checkpoint averaging.
package seq2seq
