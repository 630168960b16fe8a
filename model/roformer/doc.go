// Package roformer is the RoFormer model of Su et al. (arXiv 2104.09864) as
// Hugging Face transformers implements it (models/roformer/modeling_roformer.py,
// v4.30.2): configuration, parameters bound to checkpoint tensor names, the
// forward pass of the encoder and of every head, their losses, and the
// backward pass.
//
// The architecture, with E = embedding_size, H = hidden_size, d = H/heads:
//
//	x  = LayerNorm_E(word_emb[ids] + token_type_emb[types])      (no absolute positions)
//	x  = embeddings_project(x)                                    (only when E ≠ H)
//	for each layer (post-LN BERT layer with rotary attention):
//	    q, k, v = Linear(x);  q, k (and v when rotary_value) rotated by RoPE
//	    a = LayerNorm(x + Linear(softmax(q·kᵀ/√d + mask)·v))
//	    x = LayerNorm(a + Linear(act(Linear(a))))
//
// and the heads: masked and causal LM (transform dense → act → LayerNorm →
// decoder tied to the word embeddings, plus a bias), sequence classification
// (position 0 → dense → act → out_proj), token classification, question
// answering (start/end logits) and multiple choice (last position of each
// choice → Linear(H→1)).
//
// Two switches of config.json, not HF keys, re-run the paper's comparisons
// (package experiment): position_embedding_type picks rotary (the default,
// HF's model bit for bit), sinusoidal or learned absolute positions added
// to the embeddings (Vaswani et al. 2017; BERT), Shaw et al.'s relative key
// embeddings, or none; attention_type picks softmax (the default), linear
// attention with φ = elu+1 (Katharopoulos et al. 2020) or FAVOR+ random
// features (Performer, Choromanski et al. 2021). In linear attention, rotary
// positions follow the paper's eq. (19): φ(q) and φ(k) are rotated after
// the feature map and the normaliser is left unrotated. Every combination
// has its forward and backward pass (see posenc.go, attention.go).
//
// Parameters are fields tagged with their Hugging Face state-dict names
// (`hf:"attention.self.query"`); one reflective binder (Bind) maps a
// checkpoint onto them and reports every missing, unexpected and mis-shaped
// tensor in one error.
package roformer
