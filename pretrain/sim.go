package pretrain

import (
	"context"
	"fmt"
	"github.com/roformer-go/roformer/data/labelled"

	"github.com/roformer-go/roformer/tasks"
)

// The RoFormer-Sim recipe (ObjectiveSim), as Su Jianlin's bert4keras
// scripts train SimBERT and RoFormer-Sim: starting from a masked-LM
// checkpoint (Options.Init, RoFormer v1 or V2), every paraphrase pair
// (a, b) gives two rows, [CLS] a [SEP] b [SEP] and [CLS] b [SEP] a [SEP],
// side by side in the batch (so a micro-batch of Batch pairs has 2·Batch
// rows), and the loss is the sum of
//
//   - the UniLM generation loss (ObjectiveUniLM) on both rows: each text
//     generated from its paraphrase, and
//   - the in-batch similarity loss on the pooler output (the [CLS] vector,
//     which under the UniLM mask encodes the source alone):
//     contrastive.PairedForward with scale SimScale (30): cosine
//     similarities, each row's partner the target of a softmax over the
//     other rows of the micro-batch (not over other micro-batches or
//     ranks).
//
// The model gets a pooler (roformer.pooler.dense) when the checkpoint has
// none, with the configuration's pooler_activation (tanh by default, BERT's
// pooler; Su's scripts use a linear one, pooler_activation "linear"). The
// output folder is RoFormerForCausalLM with is_decoder true and a pooler:
// roformer.Model.IsSim, which roformer similar, generate --unilm and the
// server's /similarity and /generate read as RoFormer-Sim. Evaluation
// scores the generation loss of the held-out pairs.

// DefaultSimScale is the similarity loss's scale (Su's 30).
const DefaultSimScale = 30

// BiblePairs names, as Options.Pairs, the Bible paraphrase task's training
// pairs (tasks.BibleRetrieval: World English Bible verse, King James verse,
// from the training books).
const BiblePairs = "bible"

// readTextPairs reads opts.Pairs: BiblePairs, or a JSONL file of
// {"anchor", "positive"} rows (labelled.ReadPairs; for unilm the anchor is
// the source and the positive the target).
func readTextPairs(opts Options, say func(string, ...any)) ([][2]string, error) {
	if opts.Pairs == BiblePairs {
		r, err := tasks.BibleRetrieval(context.Background(), opts.CacheDir, nil)
		if err != nil {
			return nil, fmt.Errorf("pretrain: the Bible pairs: %w", err)
		}
		out := make([][2]string, len(r.Train))
		for i, p := range r.Train {
			out[i] = [2]string{p.Anchor, p.Positive}
		}
		say("pairs: %d Bible training pairs (World English Bible → King James, training books; %s)", len(out), opts.CacheDir)
		return out, nil
	}
	set, err := labelled.ReadPairs(opts.Pairs, 0)
	if err != nil {
		return nil, err
	}
	if set.Kind != labelled.Pairs {
		return nil, fmt.Errorf("pretrain: %s holds %s; the %s objective reads {\"anchor\", \"positive\"} rows", opts.Pairs, set.Kind, opts.Objective)
	}
	out := make([][2]string, len(set.Rows))
	for i, r := range set.Rows {
		out[i] = [2]string{r.Texts[0], r.Texts[1]}
	}
	say("pairs: %s (%d pairs)", opts.Pairs, len(out))
	return out, nil
}
