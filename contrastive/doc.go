// Package contrastive holds the losses of contrastive sentence-embedding
// fine-tuning as sentence-transformers defines them, each a forward
// function and a backward function on flat slices (llm.c's layout:
// outputs first, inputs next, dims last), and the two steps between an
// encoder's last hidden state and the losses: the pooling (mean or [CLS]
// over the attention mask) and the normalization inside the cosine.
//
//	pool      h [B, T, H], mask [B, T] → e [B, H]           MeanPool*, CLSPool*
//	cosine    cos(x, y) = x/max(‖x‖, 1e-12) · y/max(‖y‖, 1e-12)  Normalize*
//	MNRL      MultipleNegativesRankingLoss (and its symmetric form)  MNRL*
//	CoSENT    CoSENTLoss                                     CoSENT*
//	Matryoshka MatryoshkaLoss: a loss summed over truncated vectors  Objective.Dims
//
// Every loss reads the first d values of each row of stride values (d is
// the Matryoshka truncation; d = stride for the full vector) and is
// computed in float64 from float32 inputs. A backward function recomputes
// what it needs of the forward pass (the score matrix is B × M, small next
// to the encoder) and ADDS w times the loss's gradient into its outputs, so
// the terms of a Matryoshka sum accumulate.
//
// Objective puts one configuration of these together for the columns of a
// batch (anchors, positives, hard negatives; or scored pairs), as
// package finetune's contrastive training uses it. The package imports
// only the standard library.
//
// Every loss here is a function of the pooled vectors alone, so its
// gradient with respect to the vectors can be computed for a whole batch
// and then back-propagated through the encoder a few rows at a time: the
// gradient caching of Gao et al. 2021 ("Scaling Deep Contrastive Learning
// Batch Size under Memory Limited Setup"), which finetune.Options's
// MiniBatchSize turns on (sentence-transformers' mini_batch_size).
//
// References: sentence-transformers' losses (UKPLab/sentence-transformers,
// sentence_transformers/losses: MultipleNegativesRankingLoss.py,
// MultipleNegativesSymmetricRankingLoss.py, CoSENTLoss.py,
// MatryoshkaLoss.py) and util.cos_sim, read for their formulas.
package contrastive
