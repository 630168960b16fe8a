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
// and, as Hugging Face text-embeddings-inference (TEI) and OpenAI answer
// them (compat.go):
//
//	GET  /health         200
//	GET  /info           TEI's model_id, model_dtype, pooling, limits
//	POST /embed          {"inputs": "…"|[...], "normalize": true, "truncate": false,
//	                      "truncation_direction": "Right"|"Left", "dimensions": n} → [[float]]
//	POST /embed_all      {"inputs", "truncate", "truncation_direction"} → [[[float]]] per token (tei_tokens.go)
//	POST /embed_sparse   the same → [[{"index", "value"}]], SPLADE (masked-LM models)
//	POST /v1/embeddings  {"input": "…"|[...], "model": "…", "encoding_format": "float"|"base64",
//	                      "dimensions": n} → {"object": "list", "data": [...], "model", "usage"}
//
// An input is a string, or {"text": …, "text_pair": …} where pairs make
// sense (tokenize, embed); /embed, /embed_all and /embed_sparse also take
// token ids (inputs.go). A body that is not UTF-8 is refused (utf8.go). Every error of the /v1 routes is a JSON object {"error": "…"} with status 400 (bad
// request: the message names the input and the numbers), 404 (no such
// endpoint, or not for this model), 408 (the body stalled past
// Options.BodyTimeout), 413 (body too large), 503 (the client went away
// while waiting, or the server drains), 429 (too many requests queued, with
// Retry-After) or 500; the TEI routes answer {"error", "error_type"} with
// 400/404/408/413/422/424/429/503 and TEI's error_type values, /v1/embeddings OpenAI's {"error":
// {"message", "type", "param", "code"}}. Limits (body size, inputs per
// request, tokens per input, top_k, masks, beams, new tokens, a
// generation's memory, the queue, the bytes of the bodies being read and
// of the answers being written, one input's attention work) are Options;
// each is checked before anything is allocated for the request (the
// answers' bytes as they are encoded: answer.go).
//
// Only the caller meant (guard.go): a POST body must be application/json
// (415), a request must carry Options.APIKey when one is set (401, TEI's
// shape, error_type "Unauthorized"; not for GET /health, /healthz and the
// page's files), its Host must be a loopback name when Options.LoopbackOnly
// is set (403), and CORS headers go only to Options.CORSAllowOrigins.
// Only the routes that answer for the loaded model are served; the others
// are 404 as unknown routes are.
//
// Forward passes run one at a time, each on all the kernels' workers. The
// embedding routes batch concurrent requests into one forward pass by a
// token budget (see batch.go); fill-mask requests run one after another.
//
// Server.Drain stops a server gracefully without closing its port: new
// requests get 503 while those in flight finish (drain.go).
//
// The task routes (sequence and token classification, question answering,
// generation) take their prediction code from package pipeline; this
// package stays clear of training (optim, train, data).
package server
