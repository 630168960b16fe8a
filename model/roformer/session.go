package roformer

import "context"

// Session runs one model again and again without allocating once warm: it
// owns the workspace of the last batch shape and the output buffers, which
// each call reuses. The Output a call returns (its tensors included) is
// valid until the next call; copy what must outlive it. A Session is not
// safe for concurrent use: give each goroutine its own (they share the
// model's weights, which are read-only in inference).
type Session struct {
	m      *Model
	s      *State
	out    Output
	logits []float32
	lm     lmScratch
}

// NewSession returns a session over m.
func (m *Model) NewSession() *Session { return &Session{m: m} }

// Forward is Model.Forward with the session's buffers. Options that return
// hidden states or attentions allocate those, as Model.Forward does.
func (se *Session) Forward(ctx context.Context, b *Batch, labels *Labels, opts Options) (*Output, error) {
	return se.m.forward(ctx, se, b, labels, opts)
}
