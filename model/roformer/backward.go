package roformer

// gradBuffers holds the activation gradients of a backward pass.
type gradBuffers struct{}
