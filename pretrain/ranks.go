package pretrain

import (
	"errors"
	"fmt"

	"github.com/roformer-go/roformer/distributed"
)

// Data-parallel training (Loop.Group with more than one rank).
//
// Every rank holds the whole model and runs the same loop. Step s of a run
// with N ranks and accumulation A consumes A·N micro-batches, the ones a
// single process with accumulation A·N consumes at that step: every rank
// draws all A·N from its own copy of the loader, in the same order, and
// keeps micro-batches r·A … r·A+A−1 (rank r); the masks come from the
// loader's generator and the dropout streams from Batch.Seed, so they are
// those of the single process too. The step itself is train.DataParallel's:
// each rank averages the gradients of its A micro-batches, the gradient
// allreduce (Stepper.Reduce, bucketed by distributed.Reducer) averages them
// over the ranks, and every rank then clips and applies the same AdamW
// update: the parameters stay identical without ever being sent. The loss
// of the step is averaged over the ranks with one more (float64) allreduce,
// which also carries each rank's vote to stop, so that an interruption
// (SIGINT, SIGTERM) stops every rank at the same step boundary. Evaluation
// batches are shared out round-robin and their sums added up. The loader's position and masking generator are therefore the
// same on every rank, and a checkpoint's one loader state is every rank's;
// a model with random state of its own (StatefulModel) has each rank's
// state gathered into State.RankModelStates. Rank 0 alone writes the run
// folder (checkpoints, metrics, plot, final model); before each checkpoint
// the ranks compare a SHA-256 of their parameters and loader state, so a
// drift between ranks is an error rather than a silent divergence.

// parallel reports whether the run has more than one rank.
func (t *trainer) parallel() bool { return t.g.Size() > 1 }

// leader reports whether this rank writes the run folder.
func (t *trainer) leader() bool { return t.g.Rank() == 0 }

// agree is distributed.Agree.
func agree(g distributed.Comm, err error) error { return distributed.Agree(g, err) }

// checkRanks checks, at a step boundary, that every rank has rank 0's
// parameters and loader state (loader: its MarshalBinary).
func (t *trainer) checkRanks(loader []byte) error {
	if !t.parallel() {
		return nil
	}
	if err := t.dp.CheckParams(fmt.Sprintf("at step %d", t.step)); err != nil {
		return err
	}
	return t.dp.CheckSame(fmt.Sprintf("data position and masking state at step %d", t.step), loader)
}

// errOtherRank is the cause of an interruption that another rank saw.
var errOtherRank = errors.New("another rank was interrupted")

// resumeAccum returns the accumulation that ranks new ranks need to go on
// with the global batch of a run saved by old ranks with accumulation
// accum, or an error when they cannot.
func resumeAccum(ckpt string, old, accum, ranks int, perRankState bool) (int, error) {
	if old == ranks {
		return accum, nil
	}
	micro := old * accum
	switch {
	case perRankState:
		return 0, fmt.Errorf("pretrain: checkpoint %s was saved by %d ranks whose model keeps random state of its own per rank; resume it with %d ranks, not %d", ckpt, old, old, ranks)
	case micro%ranks != 0:
		return 0, fmt.Errorf("pretrain: checkpoint %s was saved by %d ranks × accumulation %d = %d micro-batches a step; %d ranks cannot share them evenly: resume with a number of ranks that divides %d", ckpt, old, accum, micro, ranks, micro)
	}
	return micro / ranks, nil
}
