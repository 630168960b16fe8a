// Package server serves a RoFormer model over HTTP, with JSON in and out.
//
// Endpoints (a GET of /v1/model lists those that answer for the loaded
// model):
//
//	GET  /healthz        {"status": "ok"}
//	GET  /v1/model       name, head, sizes, limits, endpoints
//	POST /v1/tokenize    {"inputs": [...]}                      → tokens, ids, offsets
//	POST /v1/embed       {"inputs": [...], "pooling": "cls"|"mean", "normalize": bool}
//	POST /v1/fill-mask   {"inputs": [...], "top_k": 5}          (masked-LM models)
//
// An input is a string, or {"text": …, "text_pair": …} where pairs make
// sense (tokenize, embed). Every error is a JSON object {"error": "…"} with status 400 (bad
// request: the message names the input and the numbers), 404 (no such
// endpoint, or not for this model), 413 (body too large), 503 (the client
// went away while waiting) or 500. Limits (body size, inputs per request,
// tokens per input, top_k) are Options.
//
// Forward passes run one at a time, each on all the kernels' workers; the
// server does not batch requests together.
//
// Classification is not served yet: its prediction code lives in package
// finetune, with the training code, and this package stays clear of
// training (optim, train, data).
package server
