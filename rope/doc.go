// Package rope implements the rotary position embedding of RoFormer
// (Su et al., "RoFormer: Enhanced Transformer with Rotary Position
// Embedding", arXiv 2104.09864, §3.2–3.4).
//
// A query or key vector x at position m is multiplied by the block-diagonal
// rotation R_{Θ,m} (eq. 15): each pair of dimensions is turned by the angle
// m·θ_i with θ_i = base^(−2i/d), i = 0 … d/2−1, d the number of rotated
// dimensions and base 10000. Because R_mᵀR_n = R_{n−m}, the score
// (R_m q)ᵀ(R_n k) = qᵀR_{n−m}k depends on the positions only through their
// offset (eq. 16), and the rotation keeps norms.
//
// Two layouts name which dimensions form a pair:
//
//	Interleaved  (x[2i], x[2i+1])       RoFormer, HF modeling_roformer.py, GPT-J, ggml mode 0
//	Halves       (x[i], x[i+d/2])       GPT-NeoX, LLaMA in HF, ggml mode 2
//
// RoFormer checkpoints need Interleaved: the wrong layout silently gives
// different numbers (off by more than 0.1 on HF's attention probabilities).
//
// Angles are computed on demand for any position, in float64 exactly as HF
// builds its sinusoid table (p / 10000^(2i/d)), and rounded to float32 once,
// so that sin and cos equal HF's table bit for bit where the table exists and
// keep going past max_position_embeddings, where HF fails.
//
// With RotaryDims < head size (partial rotary, as GPT-NeoX's rotary_pct), only
// the first RotaryDims dimensions of each head are turned; the rest pass
// through.
//
// Context extension: Scaling holds Hugging Face's rope_scaling (linear,
// dynamic NTK, YaRN, LongRoPE, Llama 3) and its Frequencies gives the inverse
// frequencies and the attention factor HF computes for a sequence length;
// SinCosFrom turns them into the sin/cos tables Forward takes. XPos gives
// the per-pair query/key scales of xPos (Sun et al. 2022).
package rope
