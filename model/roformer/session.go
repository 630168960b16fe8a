package roformer

import "context"

// Session runs one model again and again without allocating once warm: it
// owns the workspace of the last batch shape and the output buffers, which
// each call reuses. The Output a call returns (its tensors included) is
// valid until the next call; copy what must outlive it. A Session is not
// safe for concurrent use: give each goroutine its own (they share the
// model's weights, which are read-only in inference).
//
// The workspace of every shape is cut from one arena, which grows only
// when a shape needs more than any before it: once a session has run its
// largest batch (B·T tokens), batches of every other shape allocate no
// activation buffer. The arena holds that batch's workspace (NewState's,
// 7·H + I float32s a token when E = H) for the session's life.
type Session struct {
	m        *Model
	s        *State // &st once a call has run
	st       State
	ar       arena
	perToken int // the floats of a 1 × 1 inference state; 0 until the first call
	out      Output
	logits   []float32
	lm       lmScratch
}

// NewSession returns a session over m.
func (m *Model) NewSession() *Session { return &Session{m: m} }

// Forward is Model.Forward with the session's buffers. Options that return
// hidden states or attentions allocate those, as Model.Forward does.
func (se *Session) Forward(ctx context.Context, b *Batch, labels *Labels, opts Options) (*Output, error) {
	return se.m.forward(ctx, se, b, labels, opts)
}

// state returns the session's inference state for B rows of T tokens: the
// last one when the shape is the same, else the same State recut from the
// arena, which first grows to B·T times a token's workspace when it holds
// less, keeping its input buffers (reused by capacity).
func (se *Session) state(B, T int) *State {
	if s := se.s; s != nil && s.B == B && s.T == T {
		return s
	}
	se.s, se.out = nil, Output{} // the last call's tensors are the old state's
	if se.perToken == 0 {
		var probe arena // empty: counts what a 1 × 1 state takes
		se.m.newState(1, 1, false, &probe)
		se.perToken = probe.off
	}
	var kept State
	kept.keepInputs(&se.st)
	clear(se.st.layers)
	se.st = State{layers: se.st.layers} // the old activations go back to the arena (and an outgrown slab to the collector)
	se.ar.reserve(B * T * se.perToken)
	se.ar.reset()
	se.m.cutState(&se.st, B, T, false, &se.ar)
	se.st.keepInputs(&kept)
	se.s = &se.st
	return se.s
}
