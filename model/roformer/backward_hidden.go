package roformer

import (
	"context"
	"fmt"
)

// TrainEncode is the first half of ForwardBackward without a head: it runs
// the encoder on b in training mode (dropout as opts says) and returns the
// last hidden state x [B·T, H], which lives in s until s is used again. A
// loss computed on x by the caller (pooled sentence vectors, for
// contrastive fine-tuning) is then back-propagated with BackwardHidden(s,
// dx). Several states may be encoded before any is back-propagated, so a
// loss can couple the rows of several batches. s must come from
// NewState(b.B, b.T, true).
func (m *Model) TrainEncode(ctx context.Context, s *State, b *Batch, opts StepOptions) ([]float32, error) {
	if !s.train || s.B != b.B || s.T != b.T {
		return nil, fmt.Errorf("roformer: training state is for %d×%d (train %v), batch is %d×%d", s.B, s.T, s.train, b.B, b.T)
	}
	if m.lowp != nil {
		if m.lowp.prec != PrecisionFP32 {
			return nil, fmt.Errorf("roformer: the model is prepared for %s inference; training needs float32 (SetPrecision(\"\"))", m.lowp.prec)
		}
		m.lowp = nil
	}
	if err := b.Validate(&m.Config); err != nil {
		return nil, err
	}
	if opts.RowOffset < 0 {
		return nil, fmt.Errorf("roformer: row offset %d: want at least 0", opts.RowOffset)
	}
	s.setDropout(opts) // kept for BackwardHidden, which clears it
	if err := m.setTrainInputs(s, b, opts); err != nil {
		s.clearDropout()
		return nil, err
	}
	x, err := m.encode(ctx, s, nil)
	if err != nil {
		s.clearDropout()
		return nil, err
	}
	return x, nil
}

// BackwardHidden back-propagates dx [B·T, H], the gradient of a loss with
// respect to the hidden state TrainEncode last returned for s, through the
// encoder, ADDING each parameter's gradient into Param.Grad (the head's
// parameters get none). It is the encoder half of ForwardBackward.
func (m *Model) BackwardHidden(ctx context.Context, s *State, dx []float32) error {
	defer s.clearDropout()
	if n := s.B * s.T * m.Config.HiddenSize; !s.train || len(dx) != n {
		return fmt.Errorf("roformer: BackwardHidden: %d gradient values for a %d×%d training state of hidden size %d (train %v)", len(dx), s.B, s.T, m.Config.HiddenSize, s.train)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.ensureGrads()
	g := m.grads(s)
	copy(g.dx, dx)
	m.encoderBackward(s, g.dx)
	return nil
}
