package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/roformer-go/roformer/server"
)

func init() {
	register(&command{name: "serve", summary: "serve a model over HTTP: tokenize, embed (batched; TEI- and OpenAI-compatible routes), fill-mask (JSON)", run: cmdServe})
}

type serveOptions struct {
	model, addr string
	precision   string
	srv         server.Options
	threads     int
	// drainTimeout bounds the drain after SIGTERM (30 s when zero).
	drainTimeout time.Duration
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "--model DIR [--addr HOST:PORT]", stderr)
	var o serveOptions
	fs.StringVar(&o.model, "model", "", "model folder with config.json, weights and tokenizer files (required)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on (\":8080\" for every interface)")
	fs.IntVar(&o.srv.MaxInputs, "max-inputs", server.DefaultMaxInputs, "texts per request")
	fs.IntVar(&o.srv.MaxLength, "max-length", 0, "tokens per input with [CLS] and [SEP] (default: a sentence-transformers folder's max_seq_length, else the config's max_position_embeddings, at most that, and lowered to what --max-attention-work allows)")
	fs.Int64Var(&o.srv.MaxAttentionWork, "max-attention-work", server.DefaultMaxAttentionWork, "most max-length² × layers, the attention's work for one input, which holds the forward pass while it runs; a --max-length past it is refused")
	fs.Int64Var(&o.srv.MaxBodyBytes, "max-body", server.DefaultMaxBodyBytes, "bytes per request body")
	fs.DurationVar(&o.srv.BodyTimeout, "body-timeout", server.DefaultBodyTimeout, "time a client has to send a request's body once its headers are in; beyond: 408")
	fs.DurationVar(&o.srv.WriteTimeout, "write-timeout", server.DefaultWriteTimeout, "time each write of an answer may take (a client that does not read it is cut off then); waiting for the model is not counted")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM or Ctrl-C, how long requests in flight may run on (new ones get 503 meanwhile)")
	fs.StringVar(&o.srv.DefaultPromptName, "default-prompt-name", "", "one of a sentence-transformers folder's prompts to put before each text of the embedding routes when a request names none (prompt_name) (default: the folder's default_prompt_name)")
	fs.Func("default-prompt", `the text to put before each text of the embedding routes when a request names no prompt, instead of a named one ("" for none, which turns a folder's default_prompt_name off)`, func(v string) error { o.srv.DefaultPrompt = &v; return nil })
	fs.BoolVar(&o.srv.AutoTruncate, "auto-truncate", false, "truncate embedding inputs longer than --max-length instead of refusing them, also on routes whose requests cannot ask for it (POST /v1/embeddings)")
	fs.IntVar(&o.srv.MaxEmbedAllValues, "max-embed-all-values", server.DefaultMaxEmbedAllValues, "most values (tokens × hidden size) of one POST /embed_all answer; beyond: 413")
	fs.IntVar(&o.srv.MaxSparseBatchLogits, "max-sparse-batch-logits", server.DefaultMaxSparseBatchLogits, "most logits (positions × vocabulary) a forward pass of POST /embed_sparse holds at once: the masked-LM head runs on this / vocabulary positions at a time")
	fs.IntVar(&o.srv.MaxBatchTokens, "max-batch-tokens", server.DefaultMaxBatchTokens, "padded tokens (rows × longest row) per batched forward pass of the embedding endpoints")
	fs.IntVar(&o.srv.MaxBatchRequests, "max-batch-requests", server.DefaultMaxBatchRequests, "inputs per batched forward pass")
	fs.DurationVar(&o.srv.MaxBatchWait, "max-batch-wait", server.DefaultMaxBatchWait, "longest wait for requests on their way to join a batch (0: none)")
	fs.IntVar(&o.srv.MaxConcurrentRequests, "max-concurrent-requests", server.DefaultMaxConcurrentRequests, "requests admitted at once (each once its body is read, until it is answered); beyond: 429")
	fs.IntVar(&o.srv.MaxBeams, "max-beams", server.DefaultMaxBeams, "most num_beams of a POST /generate")
	fs.IntVar(&o.srv.MaxNewTokens, "max-new-tokens", server.DefaultMaxNewTokensLimit, "most max_new_tokens of a POST /generate")
	fs.Int64Var(&o.srv.MaxGenerateBytes, "max-generate-bytes", server.DefaultMaxGenerateBytes, "most memory one generation may take (its key/value cache and vocabulary-wide scores, as estimated before it starts)")
	fs.Int64Var(&o.srv.MaxBeamWork, "max-beam-work", server.DefaultMaxBeamWork, "most num_beams × vocabulary × (prompt + new tokens) of a beam search, which bounds its time")
	fs.IntVar(&o.srv.MaxMasks, "max-masks", server.DefaultMaxMasks, "most [MASK] tokens of one fill-mask request")
	fs.IntVar(&o.srv.MaxTopK, "max-top-k", server.DefaultMaxTopK, "most top_k of fill-mask and question answering")
	fs.Int64Var(&o.srv.MaxReadingBytes, "max-reading-bytes", server.DefaultMaxReadingBytes, "bytes the request bodies being read may hold at once, over all clients; beyond: 429")
	fs.Int64Var(&o.srv.MaxWritingBytes, "max-writing-bytes", server.DefaultMaxWritingBytes, "bytes the answers being written may hold at once, over all clients (each over 64 KiB is charged until its write ends, within --write-timeout); beyond: 429")
	fs.StringVar(&o.srv.Name, "served-model-name", "", "the model's name in the answers (/info, /v1/model, /v1/models, and \"model\" of /v1/embeddings and /v1/rerank; a request's \"model\" is not checked) (default: the model folder's name)")
	fs.StringVar(&o.srv.APIKey, "api-key", "", "require \"Authorization: Bearer KEY\" on every route but GET /health and /healthz (default: $ROFORMER_API_KEY; none when unset). The environment variable keeps the key out of the process list")
	cors := fs.String("cors-allow-origin", "", "comma-separated origins (scheme://host[:port]) whose web pages may call the server, or \"*\" for any (default: none, no CORS headers)")
	computeFlags(fs, &o.precision, &o.threads)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.srv.APIKey == "" {
		o.srv.APIKey = os.Getenv("ROFORMER_API_KEY")
	}
	for _, origin := range strings.Split(*cors, ",") {
		if origin = strings.TrimSpace(origin); origin != "" {
			o.srv.CORSAllowOrigins = append(o.srv.CORSAllowOrigins, origin)
		}
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case o.model == "":
		return usagef("--model is required")
	case o.srv.MaxInputs < 1 || o.srv.MaxBodyBytes < 1 || o.srv.MaxLength < 0:
		return usagef("--max-inputs and --max-body must be at least 1, --max-length at least 0")
	case o.srv.MaxBatchTokens < 1 || o.srv.MaxBatchRequests < 1 || o.srv.MaxConcurrentRequests < 1 || o.srv.MaxEmbedAllValues < 1 || o.srv.MaxSparseBatchLogits < 1:
		return usagef("--max-batch-tokens, --max-batch-requests, --max-concurrent-requests, --max-embed-all-values and --max-sparse-batch-logits must be at least 1")
	case o.srv.MaxBeams < 1 || o.srv.MaxNewTokens < 1 || o.srv.MaxGenerateBytes < 1 || o.srv.MaxBeamWork < 1 || o.srv.MaxMasks < 1 || o.srv.MaxTopK < 1:
		return usagef("--max-beams, --max-new-tokens, --max-generate-bytes, --max-beam-work, --max-masks and --max-top-k must be at least 1")
	case o.srv.MaxWritingBytes < 1 || o.srv.MaxAttentionWork < 1:
		return usagef("--max-writing-bytes and --max-attention-work must be at least 1")
	case o.srv.MaxReadingBytes < o.srv.MaxBodyBytes:
		return usagef("--max-reading-bytes %d must be at least --max-body %d", o.srv.MaxReadingBytes, o.srv.MaxBodyBytes)
	case o.srv.MaxBatchWait < 0:
		return usagef("--max-batch-wait %v must not be negative", o.srv.MaxBatchWait)
	case o.srv.BodyTimeout <= 0 || o.drainTimeout <= 0 || o.srv.WriteTimeout <= 0:
		return usagef("--body-timeout %v, --write-timeout %v and --drain-timeout %v must be positive", o.srv.BodyTimeout, o.srv.WriteTimeout, o.drainTimeout)
	}
	if o.srv.MaxBatchWait == 0 {
		o.srv.MaxBatchWait = -1 // server.Options: negative is no wait, 0 the default
	}
	if err := setupCompute(o.threads, stderr, true); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	return runServe(ctx, o, ln, stderr)
}

// loadServer loads the model; a test replaces it to hold the loading.
var loadServer = server.Load

// runServe listens at once and loads the model in the background: until it
// is loaded, GET /health and every model route answer 503 (so orchestrators
// can probe the server); when loading fails, runServe returns its error. It
// serves until ctx is cancelled (SIGINT, SIGTERM), then drains: new
// requests get 503 while the requests in flight finish (up to
// o.drainTimeout, then it closes them), and the listener closes after.
func runServe(ctx context.Context, o serveOptions, ln net.Listener, stderr io.Writer) error {
	o.srv.Log = log.New(stderr, "", log.LstdFlags)
	prec, err := parsePrecision(o.precision)
	if err != nil {
		ln.Close()
		return err
	}
	o.srv.Precision = prec
	// Listening on a loopback address only: refuse requests for other
	// host names (DNS rebinding).
	o.srv.LoopbackOnly = loopbackAddr(ln.Addr())
	if !o.srv.LoopbackOnly && o.srv.APIKey == "" {
		fmt.Fprintf(stderr, "warning: listening on %s, beyond this machine, without --api-key: whoever reaches the port can use the model\n", ln.Addr())
	}
	loading := server.NewLoading()
	// A client has 10 s to send a request's headers and --body-timeout for
	// its body: the handlers set that deadline themselves when they read
	// the body, so that a stalled one gets a 408 answer rather than a cut
	// connection. ReadTimeout is only the backstop for a body no handler
	// reads (net/http reads what is left of it after the answer). An idle
	// connection is closed after 2 minutes. Waiting for the model has no
	// deadline (a request may wait behind others); each write of the
	// answer has --write-timeout (the server sets it).
	hs := &http.Server{Handler: loading, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10*time.Second + o.srv.BodyTimeout,
		IdleTimeout: 2 * time.Minute, ErrorLog: o.srv.Log}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	fmt.Fprintf(stderr, "listening on http://%s, loading %s (GET /health answers 503 until it is ready)\n", ln.Addr(), o.model)
	type result struct {
		s   *server.Server
		err error
	}
	loaded := make(chan result, 1)
	go func() {
		s, err := loadResolved(o.model, func(dir string) (*server.Server, error) { return loadServer(dir, o.srv) })
		loaded <- result{s, err}
	}()
	select {
	case res := <-loaded:
		if res.err != nil {
			hs.Close()
			return res.err
		}
		s := res.s
		defer s.Close()
		loading.Ready(s)
		info := s.Info()
		fmt.Fprintf(stderr, "serving %s (%s, %d layers, hidden %d) on http://%s\n", o.model, info.Architecture, info.Layers, info.HiddenSize, ln.Addr())
		if info.SentenceTransformers != "" {
			fmt.Fprintf(stderr, "sentence-transformers folder: %s (the embedding routes make its vectors)\n", info.SentenceTransformers)
		}
		fmt.Fprintf(stderr, "endpoints: %s\n", strings.Join(info.Endpoints, ", "))
	case err := <-done:
		return err
	case <-ctx.Done():
		return shutdown(hs, nil, done, o.drainTimeout, stderr)
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	return shutdown(hs, loading.Server(), done, o.drainTimeout, stderr)
}

// loopbackAddr says whether a listener's address is a loopback one (not
// the unspecified address, which listens on every interface).
func loopbackAddr(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// shutdown stops hs, whose Serve reports to done. With a loaded server s it
// drains first: the listener stays open and new requests get 503 while the
// requests in flight run to their answers; then it closes the listener.
// Requests still running after timeout (30 s when zero) are cut off.
func shutdown(hs *http.Server, s *server.Server, done <-chan error, timeout time.Duration, stderr io.Writer) error {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if s != nil {
		fmt.Fprintf(stderr, "draining: %d requests in flight; new requests get 503\n", s.InFlight())
		if err := s.Drain(sctx); err != nil {
			hs.Close()
			return fmt.Errorf("requests still running after %v were cut off: %w", timeout, err)
		}
	}
	fmt.Fprintln(stderr, "shutting down")
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
		return fmt.Errorf("requests still running after %v were cut off: %w", timeout, err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
