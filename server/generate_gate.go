package server

import (
	"context"

	"github.com/roformer-go/roformer/generate"
)

// gatedDecoder is a generation's decoder taking the gate of the forward
// passes (server.go's run, batch.go's scheduler) for each of its passes, the
// prompt's (Prefill) and each new token's (Step), and giving it back
// between them: the embedding batches and the other requests' forwards run
// between a generation's steps, and generations interleave with each other,
// in the order they wait (a channel's waiting senders go first in line). A
// pass that waits stops when ctx is done (ctx's error) or the server closes
// (errClosed). The key/value cache and the logits a pass returns belong to
// the generation (model/roformer's Decoder), so nothing of it is shared
// with the passes between.
type gatedDecoder struct {
	generate.Decoder
	s      *Server
	passes int // passes started, for the test hook
}

// pass runs fn holding the gate.
func (g *gatedDecoder) pass(ctx context.Context, fn func() ([]float32, error)) ([]float32, error) {
	if g.s.beforeGeneratePass != nil {
		g.s.beforeGeneratePass(g.passes)
	}
	g.passes++
	select {
	case g.s.gate <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-g.s.quit:
		return nil, errClosed
	}
	defer func() { <-g.s.gate }() // released even if the pass panics
	return fn()
}

// Prefill is the decoder's Prefill, holding the gate.
func (g *gatedDecoder) Prefill(ctx context.Context, prompts [][]int32, room generate.Room) ([]float32, error) {
	return g.pass(ctx, func() ([]float32, error) { return g.Decoder.Prefill(ctx, prompts, room) })
}

// Step is the decoder's Step, holding the gate.
func (g *gatedDecoder) Step(ctx context.Context, tokens []int32) ([]float32, error) {
	return g.pass(ctx, func() ([]float32, error) { return g.Decoder.Step(ctx, tokens) })
}
