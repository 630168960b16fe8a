package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"math/bits"
	"net/http"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/sentence"
	"github.com/roformer-go/roformer/tokenizer"
)

// Options bound what one request may ask for. The zero value of a field
// means its default.
type Options struct {
	// MaxBodyBytes bounds a request body; larger bodies get 413. Default 1 MiB.
	MaxBodyBytes int64
	// MaxInputs bounds the texts in one request. Default 64.
	MaxInputs int
	// MaxLength is the most tokens an input may have, [CLS] and [SEP]
	// included: embed truncates longer inputs (HF's longest_first),
	// fill-mask refuses them (truncation could drop the mask). Default: a
	// sentence-transformers folder's max_seq_length, else the model's
	// max_position_embeddings, and at most that in either case (with rotary
	// positions not a limit of the model, but of what one request may
	// cost; sentence-transformers takes max_seq_length as it is, and HF's
	// models fail on positions past their table); a default is lowered to
	// what MaxAttentionWork allows.
	MaxLength int
	// MaxAttentionWork bounds MaxLength² × num_hidden_layers, the
	// attention's work for one input of MaxLength tokens, which holds the
	// forward pass (one at a time) while it runs: a default MaxLength is
	// lowered to the longest that fits, and New refuses a MaxLength given
	// that does not. Default 2^28 (DefaultMaxAttentionWork): 4,096 tokens
	// on 16 layers, 4,729 on 12 (512 on 12 layers is 3.1 M).
	MaxAttentionWork int64
	// MaxTopK bounds fill-mask's and question answering's top_k. Default
	// 100.
	MaxTopK int
	// MaxMasks bounds the [MASK] tokens of one fill-mask request, its
	// inputs together: each gives top_k candidates, each with the whole
	// text filled in, so the answer grows as masks × top_k × length.
	// Default 16 (DefaultMaxMasks).
	MaxMasks int
	// MaxBeams bounds POST /generate's num_beams: beam search holds a
	// key/value cache per beam and scores beams × vocabulary candidates a
	// step. Default 8 (DefaultMaxBeams).
	MaxBeams int
	// MaxNewTokens bounds POST /generate's max_new_tokens (a request that
	// does not say gets min(DefaultMaxNewTokens, MaxNewTokens)). Default
	// 256 (DefaultMaxNewTokensLimit).
	MaxNewTokens int
	// MaxGenerateBytes bounds the memory of one generation as
	// roformer.Model.GenerateCost estimates it (the key/value cache of
	// every beam, beams × vocabulary scores of a step); beyond it a
	// request gets 422. Besides, beams × (prompt + new tokens) must be at
	// most MaxBatchTokens, the tokens one batched forward pass may hold.
	// Default 256 MiB (DefaultMaxGenerateBytes).
	MaxGenerateBytes int64
	// MaxBeamWork bounds a beam search's num_beams × vocabulary × (prompt
	// + new tokens) (roformer.GenerateCost's Work): each step scores
	// num_beams × vocabulary candidates (keeping the best 2·num_beams)
	// while the search holds the model, so this bounds its time (8 beams ×
	// 256 new tokens over a 2,005-token vocabulary: 0.4 s on 2 cores of a
	// tiny model, 7.5 s before the partial selection). Greedy decoding and sampling,
	// whose steps cost a forward pass and one pass over the vocabulary,
	// are bounded by MaxNewTokens and MaxGenerateBytes. Default 2^24
	// (DefaultMaxBeamWork).
	MaxBeamWork int64
	// MaxReadingBytes bounds the bytes that the bodies being read hold at
	// once, over all requests (a body's buffer grows as its bytes
	// arrive); a body that would pass it gets 429. Requests take their
	// admission slot only once their body is read, so this, not
	// MaxConcurrentRequests, bounds what slow senders hold. Default 64 MiB
	// (DefaultMaxReadingBytes), at least MaxBodyBytes.
	MaxReadingBytes int64
	// APIKey, when set, is required on every route but GET /health,
	// GET /healthz (the probes) and the page's static files (GET /,
	// /web/…), as "Authorization: Bearer KEY"; other requests get 401.
	// Default: none (no key asked).
	APIKey string
	// CORSAllowOrigins are the origins (scheme://host[:port], or "*" for
	// any) whose pages may read the answers: they get
	// Access-Control-Allow-Origin, and their preflight requests 204 with
	// the methods and headers allowed (Authorization, Content-Type).
	// Default: none, and no CORS headers at all.
	CORSAllowOrigins []string
	// LoopbackOnly refuses (403) requests whose Host is not a loopback
	// name or address (localhost, 127.0.0.0/8, [::1], any port): set it
	// when the server listens on a loopback address only, so that a web
	// page whose DNS name is rebound to 127.0.0.1 cannot reach it.
	// Default false; roformer serve sets it from its --addr.
	LoopbackOnly bool
	// Name is what /v1/model reports as the model's name.
	Name string
	// Precision of the linear layers' products (fp32 when empty); Load
	// fails when this machine cannot run it.
	Precision roformer.Precision
	// Sentence is the sentence-transformers configuration of the folder
	// (pipeline.Model.Sentence; nil for a plain model folder): its
	// pooling, Dense and Normalize modules, max_seq_length (the default
	// MaxLength), lowercasing and prompts make the vectors of the
	// embedding routes (server/sentence.go). Load sets it.
	Sentence *sentence.Folder
	// DefaultPromptName names the folder's prompt that the embedding
	// routes put before each text when a request names none (TEI's
	// --default-prompt-name; default: the folder's default_prompt_name).
	// DefaultPrompt, when not nil, is the text itself instead (TEI's
	// --default-prompt; "" for none, which turns a folder's
	// default_prompt_name off). At most one may be set.
	DefaultPromptName string
	DefaultPrompt     *string
	// AutoTruncate truncates inputs of the embedding routes that are
	// longer than MaxLength (as TEI's --auto-truncate) instead of refusing
	// them, also where the request did not ask for it (POST
	// /v1/embeddings, which has no "truncate"). Default false.
	AutoTruncate bool
	// MaxEmbedAllValues bounds the values of one POST /embed_all answer:
	// its tokens, inputs together, × the hidden size; beyond it a
	// request gets 413. Default 2^21 (DefaultMaxEmbedAllValues): 8 MiB of
	// float32, some 20 MB of JSON.
	MaxEmbedAllValues int
	// MaxSparseBatchLogits bounds the logits (positions × vocabulary) that
	// a batched forward pass holds at once for POST /embed_sparse, whose
	// rows need the masked-LM head at every position: the head runs on
	// MaxSparseBatchLogits / vocabulary of the batch's positions at a time
	// (at least one), each chunk folded into the rows' maxima before the
	// next (pipeline.SparsePool), and the rows batch with the others by
	// MaxBatchTokens. Default 2^21 (DefaultMaxSparseBatchLogits): 8 MiB of
	// float32, 69 positions of a 30,000-piece vocabulary (before the head
	// ran in chunks, 2^25 bounded a pass's whole logits).
	MaxSparseBatchLogits int
	// MaxBatchTokens bounds the padded tokens (rows × the longest row) of
	// one batched forward pass of the embedding endpoints; a longer row runs
	// alone. Default 16384.
	MaxBatchTokens int
	// MaxBatchRequests bounds the rows (inputs, from one request or more) of
	// one batched forward pass. Default 32.
	MaxBatchRequests int
	// MaxBatchWait is the longest the scheduler waits for more requests to
	// join a batch that is not full, and only while requests are on their
	// way (being read or tokenized). Default 2 ms; negative: never wait.
	MaxBatchWait time.Duration
	// MaxConcurrentRequests bounds the requests of the POST routes
	// (embedding, fill-mask, generation, the tasks, tokenize) admitted at
	// once: each takes a slot once its body is read and holds it until it
	// is answered (an embedding request until its rows have run); beyond
	// it they get 429 with Retry-After. Default 512.
	MaxConcurrentRequests int
	// BodyTimeout bounds the time a client has to send a request's body
	// once its headers are in; a body that stalls gets 408 and its
	// connection is closed. Default 10 s.
	BodyTimeout time.Duration
	// WriteTimeout bounds each write of an answer (a streamed answer's
	// events each have their own): a client that does not read its answer
	// holds the answer's buffer, and its admission slot, no longer than
	// this; the connection is then closed. Waiting for the model is not
	// bounded by it. Default 30 s (DefaultWriteTimeout).
	WriteTimeout time.Duration
	// MaxWritingBytes bounds the bytes that the answers being written hold
	// at once, over all requests (answer.go): an answer is encoded whole,
	// then written to a client that may read it slowly or not at all (for
	// up to WriteTimeout); an answer over SmallAnswerBytes is charged as it
	// is encoded, and one that would pass the budget gets 429 instead
	// (Overloaded, Retry-After), as a body past MaxReadingBytes does. An answer larger than the whole budget is
	// written only while no other holds any of it. Default 64 MiB
	// (DefaultMaxWritingBytes): three /embed_all answers of 2^21 values
	// (some 21 MB of JSON each).
	MaxWritingBytes int64
	// Log receives one line per request that failed on the server's side
	// (a panic, a forward pass error); nil discards them.
	Log *log.Logger
}

// The defaults of Options.MaxBodyBytes, Options.MaxInputs and
// Options.BodyTimeout.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultMaxInputs    = 64
	DefaultBodyTimeout  = 10 * time.Second
	DefaultWriteTimeout = 30 * time.Second
)

// The defaults of the other bounds of a request.
const (
	DefaultMaxMasks          = 16
	DefaultMaxBeams          = 8
	DefaultMaxNewTokensLimit = 256
	DefaultMaxGenerateBytes  = 256 << 20
	DefaultMaxBeamWork       = 1 << 24
	DefaultMaxReadingBytes   = 64 << 20
	DefaultMaxWritingBytes   = 64 << 20
	DefaultMaxAttentionWork  = 1 << 28
	DefaultMaxTopK           = 100
)

// The defaults of the batching options.
const (
	DefaultMaxBatchTokens        = 16384
	DefaultMaxEmbedAllValues     = 1 << 21
	DefaultMaxSparseBatchLogits  = 1 << 21
	DefaultMaxBatchRequests      = 32
	DefaultMaxBatchWait          = 2 * time.Millisecond
	DefaultMaxConcurrentRequests = 512
)

func (o *Options) defaults(cfg *roformer.Config) {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxInputs <= 0 {
		o.MaxInputs = DefaultMaxInputs
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxAttentionWork <= 0 {
		o.MaxAttentionWork = DefaultMaxAttentionWork
	}
	if o.MaxLength <= 0 {
		o.MaxLength = min(cfg.MaxPositionEmbeddings, maxLengthFor(o.MaxAttentionWork, cfg.NumHiddenLayers))
	}
	if o.MaxTopK <= 0 {
		o.MaxTopK = DefaultMaxTopK
	}
	if o.MaxMasks <= 0 {
		o.MaxMasks = DefaultMaxMasks
	}
	if o.MaxBeams <= 0 {
		o.MaxBeams = DefaultMaxBeams
	}
	if o.MaxNewTokens <= 0 {
		o.MaxNewTokens = DefaultMaxNewTokensLimit
	}
	if o.MaxGenerateBytes <= 0 {
		o.MaxGenerateBytes = DefaultMaxGenerateBytes
	}
	if o.MaxBeamWork <= 0 {
		o.MaxBeamWork = DefaultMaxBeamWork
	}
	if o.MaxReadingBytes <= 0 {
		o.MaxReadingBytes = DefaultMaxReadingBytes
	}
	o.MaxReadingBytes = max(o.MaxReadingBytes, o.MaxBodyBytes)
	if o.MaxWritingBytes <= 0 {
		o.MaxWritingBytes = DefaultMaxWritingBytes
	}
	if o.MaxSparseBatchLogits <= 0 {
		o.MaxSparseBatchLogits = DefaultMaxSparseBatchLogits
	}
	if o.MaxEmbedAllValues <= 0 {
		o.MaxEmbedAllValues = DefaultMaxEmbedAllValues
	}
	if o.MaxBatchTokens <= 0 {
		o.MaxBatchTokens = DefaultMaxBatchTokens
	}
	if o.MaxBatchRequests <= 0 {
		o.MaxBatchRequests = DefaultMaxBatchRequests
	}
	if o.MaxBatchWait == 0 {
		o.MaxBatchWait = DefaultMaxBatchWait
	}
	if o.MaxConcurrentRequests <= 0 {
		o.MaxConcurrentRequests = DefaultMaxConcurrentRequests
	}
	if o.Log == nil {
		o.Log = log.New(io.Discard, "", 0)
	}
}

// Server answers JSON requests with one model. It is an http.Handler; its
// methods are safe for concurrent use. Forward passes run one at a time
// (each already uses every worker the kernels have); embedding requests are
// batched together (see batch.go), fill-mask requests queue, and a request
// whose client has gone stops waiting.
type Server struct {
	model *roformer.Model
	// sess runs the scheduler's batches (batch.go's runBatch, on the one
	// scheduler goroutine, so one batch at a time): its workspace, cut for
	// each batch shape from one arena, stops growing once the largest batch
	// has run. The other forward passes (fill-mask, the task routes,
	// generation) use the model directly.
	sess   *roformer.Session
	tok    *tokenizer.Tokenizer
	opts   Options
	gate   chan struct{}
	mux    *http.ServeMux
	routes []route

	// Admission (guard.go): a slot per admitted request, a token per CPU
	// for the requests being decoded and tokenized, the bytes the bodies
	// being read hold, the API key's SHA-256 (nil: no key).
	slots   chan struct{}
	cpu     chan struct{}
	reading atomic.Int64
	writing atomic.Int64 // the bytes of the answers being written (answer.go)
	key     []byte
	// Batching (batch.go): the queue of tokenized embedding requests,
	// how many are admitted but not yet queued.
	queue          chan *embedJob
	preparing      atomic.Int64
	startScheduler sync.Once
	quit           chan struct{}
	closed         atomic.Bool
	// Test hooks: called by the scheduler before it forms each batch, and
	// after each forward pass with its rows and length.
	beforeBatch  func()
	afterForward func(rows, tokens int)
	// beforeGeneratePass is called by a generation before it waits for
	// the gate for its pass'th forward pass (0: the prompt's).
	beforeGeneratePass func(pass int)

	started   time.Time // when New made it (GET /v1/models' created)
	metrics   *metrics  // metrics.go
	flight    flight    // the requests in flight, and whether the server drains (drain.go)
	docsCache docsCache // GET /docs's answer, made once (openapi.go)
}

// New serves m with tok. Fill-mask needs the masked-LM head; tokenize and
// embed work with every head.
func New(m *roformer.Model, tok *tokenizer.Tokenizer, opts Options) (*Server, error) {
	if m == nil || tok == nil {
		return nil, errors.New("server: a model and a tokenizer are required")
	}
	if tok.VocabSize() > m.Config.VocabSize {
		return nil, fmt.Errorf("server: the tokenizer has %d tokens, the model only %d", tok.VocabSize(), m.Config.VocabSize)
	}
	given := opts.MaxLength > 0
	if st := opts.Sentence; st != nil && st.MaxSeqLength > 0 && !given {
		opts.MaxLength = min(st.MaxSeqLength, m.Config.MaxPositionEmbeddings) // as pipeline.Open clamps it
	}
	opts.defaults(&m.Config)
	if L, longest := m.Config.NumHiddenLayers, maxLengthFor(opts.MaxAttentionWork, m.Config.NumHiddenLayers); opts.MaxLength > longest {
		if given {
			return nil, fmt.Errorf("server: max length %d: %d² tokens × %d layers is past the bound on one input's attention work, %d (MaxAttentionWork, roformer serve's --max-attention-work); at most %d tokens on this model",
				opts.MaxLength, opts.MaxLength, L, opts.MaxAttentionWork, longest)
		}
		opts.MaxLength = longest
	}
	if opts.MaxLength < 3 {
		return nil, fmt.Errorf("server: max length %d leaves no room for a token between [CLS] and [SEP]", opts.MaxLength)
	}
	if m.Config.PositionEmbeddingType == roformer.PosLearned && opts.MaxLength > m.Config.MaxPositionEmbeddings {
		return nil, fmt.Errorf("server: max length %d is past the model's learned position table (max_position_embeddings %d)",
			opts.MaxLength, m.Config.MaxPositionEmbeddings)
	}
	s := &Server{model: m, sess: m.NewSession(), tok: tok, opts: opts, gate: make(chan struct{}, 1), mux: http.NewServeMux(),
		slots: make(chan struct{}, opts.MaxConcurrentRequests), cpu: make(chan struct{}, runtime.GOMAXPROCS(0)),
		queue: make(chan *embedJob, 2*opts.MaxConcurrentRequests), quit: make(chan struct{}), metrics: newMetrics(), started: time.Now()}
	s.metrics.reg.MustRegister(newWeightCollector(m))
	if opts.APIKey != "" {
		k := sha256.Sum256([]byte(opts.APIKey))
		s.key = k[:]
	}
	if err := s.checkSentence(); err != nil {
		return nil, err
	}
	lm := func() bool { return m.LM != nil }
	s.routes = []route{ // in the order GET /v1/model lists them; req and resp: the bodies' types, for GET /docs (openapi.go)
		{method: "GET", path: "/healthz", h: s.healthz, summary: "liveness: ok, or draining", resp: ty[map[string]string]()},
		{method: "GET", path: "/v1/model", h: s.info, summary: "the model's sizes, the limits and the routes that answer for it", resp: ty[ModelInfo]()},
		{method: "POST", path: "/v1/tokenize", h: s.tokenize, summary: "ids, token types and byte offsets", req: ty[TokenizeRequest](), resp: tokenizeAnswer},
		{method: "POST", path: "/v1/embed", h: s.embed, batched: true, summary: "pooled embeddings", req: ty[EmbedRequest](), resp: ty[EmbedResponse]()},
		{method: "GET", path: "/health", h: s.health, shape: shapeTEI, summary: "TEI's readiness (200, no body)"},
		{method: "GET", path: "/info", h: s.teiInfo, shape: shapeTEI, summary: "TEI's model information", resp: ty[TEIInfo]()},
		{method: "POST", path: "/embed", h: s.teiEmbed, shape: shapeTEI, batched: true, summary: "TEI's embeddings", req: ty[TEIEmbedRequest](), resp: ty[[][]float32]()},
		{method: "POST", path: "/embed_all", h: s.teiEmbedAll, shape: shapeTEI, batched: true, // tei_tokens.go
			summary: "TEI's per-token vectors", req: ty[TEIEmbedAllRequest](), resp: ty[[][][]float32]()},
		{method: "POST", path: "/embed_sparse", h: s.teiEmbedSparse, shape: shapeTEI, batched: true, answers: lm,
			needs:   "a masked-LM model (" + roformer.HeadMaskedLM.HFClass() + ") for SPLADE",
			summary: "TEI's SPLADE vectors, from the masked-LM head", req: ty[TEIEmbedAllRequest](), resp: ty[[][]TEISparseValue]()},
		{method: "POST", path: "/v1/embeddings", h: s.openAIEmbeddings, shape: shapeOpenAI, batched: true,
			summary: "OpenAI's embeddings", req: ty[OpenAIEmbeddingsRequest](), resp: ty[OpenAIEmbeddingsResponse]()},
		{method: "GET", path: "/v1/models", h: s.openAIModels, shape: shapeOpenAI, summary: "OpenAI's list of models: the served one", resp: ty[OpenAIModelList]()}, // models.go
		{method: "GET", path: "/metrics", h: s.serveMetrics, summary: "Prometheus metrics (text/plain)"},
		{method: "POST", path: "/v1/fill-mask", h: s.fillMask, answers: lm, needs: "a masked-LM model",
			summary: "the most probable tokens for each [MASK]", req: ty[FillMaskRequest](), resp: ty[FillMaskResponse]()},
		{method: "POST", path: "/predict", h: s.teiPredict, shape: shapeTEI, batched: true, answers: s.classifier, // tei.go
			needs:   "a sequence-classification model (" + roformer.HeadSequenceCls.HFClass() + ")",
			summary: "TEI's classification: one input's labels best first, or a batch's", req: ty[TEIPredictRequest](), resp: ty[oneOf[[]TEIPrediction, [][]TEIPrediction]]()},
		{method: "POST", path: "/rerank", h: s.teiRerank, shape: shapeTEI, batched: true, answers: s.reranker,
			needs:   "a re-ranker: a sequence-classification model with one label (a cross-encoder)",
			summary: "TEI's reranking: the texts best first", req: ty[TEIRerankRequest](), resp: ty[[]TEIRank]()},
		{method: "POST", path: "/v1/rerank", h: s.rerank, shape: shapeOpenAI, batched: true, answers: s.reranker, // rerank.go
			needs:   "a re-ranker: a sequence-classification model with one label (a cross-encoder)",
			summary: "Jina's and Cohere's reranking: the documents best first", req: ty[RerankRequest](), resp: ty[RerankResponse]()},
		{method: "POST", path: "/v2/rerank", h: s.rerank, shape: shapeOpenAI, batched: true, answers: s.reranker,
			needs:   "a re-ranker: a sequence-classification model with one label (a cross-encoder)",
			summary: "POST /v1/rerank at Cohere v2's path", req: ty[RerankRequest](), resp: ty[RerankResponse]()},
		{method: "POST", path: "/similarity", h: s.teiSimilarity, shape: shapeTEI, batched: true,
			summary: "TEI's similarity (the folder's similarity_fn_name, else cosine) of the source sentence with each sentence", req: ty[TEISimilarityRequest](), resp: ty[[]float64]()},
		{method: "POST", path: "/", h: s.root, shape: shapeTEI, batched: true, summary: "the model's task, chosen by the body and the model (root.go)"},
		{method: "POST", path: "/invocations", h: s.root, shape: shapeTEI, batched: true, summary: "POST / at SageMaker's path"},
		{method: "POST", path: "/tokenize", h: s.teiTokenize, shape: shapeTEI, summary: "TEI's tokens with offsets", req: ty[TEITokenizeRequest](), resp: ty[[][]TEIToken]()},
		{method: "POST", path: "/decode", h: s.teiDecode, shape: shapeTEI, summary: "TEI's ids to text", req: ty[TEIDecodeRequest](), resp: ty[[]string]()},
		{method: "POST", path: "/generate", h: s.generate, shape: shapeTEI, answers: s.generator, // generate.go
			needs:   "a generator: a causal-LM model, or RoFormer-Sim (a masked-LM model with a pooler and is_decoder)",
			summary: "TGI's text generation (with stream: server-sent StreamEvents)", req: ty[GenerateRequest](), resp: ty[GenerateResponse]()},
		{method: "POST", path: "/v1/token-classification", h: s.tokenClassification, shape: shapeTEI, answers: s.tokenClassifier, // tokencls.go
			needs:   "a token-classification model (" + roformer.HeadTokenCls.HFClass() + ")",
			summary: "Hugging Face's token-classification pipeline", req: ty[TokenClassificationRequest](), resp: ty[oneOf[[]pipeline.Entity, [][]pipeline.Entity]]()},
		{method: "POST", path: "/v1/question-answering", h: s.questionAnswering, shape: shapeTEI, answers: s.questionAnswerer, // qa.go
			needs:   "a question-answering model (" + roformer.HeadQA.HFClass() + ")",
			summary: "Hugging Face's question-answering pipeline", req: ty[oneOf[QuestionAnsweringRequest, []QuestionAnsweringRequest]](), resp: qaAnswer},
		{method: "GET", path: "/docs", h: s.docs, summary: "this OpenAPI document"}, // openapi.go
		{method: "GET", path: "/api-doc/openapi.json", h: s.docs, summary: "this OpenAPI document, at TEI's path"},
	}
	// Only the routes that answer for this model are served (and listed
	// by GET /v1/model and /info); the others are unknown, with a 404 that
	// says what model they need.
	methods, absent := map[string]string{}, map[string]route{}
	for _, e := range s.routes {
		if e.answers != nil && !e.answers() {
			absent[e.path] = e
			continue
		}
		s.mux.HandleFunc(e.method+" "+muxPattern(e.path), s.handle(e))
		methods[e.path] = e.method
	}
	s.registerWeb() // GET /: the page (web.go)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if m, ok := methods[r.URL.Path]; ok {
			w.Header().Set("Allow", m)
			writeError(w, http.StatusMethodNotAllowed, "%s %s: this endpoint takes %s", r.Method, r.URL.Path, m)
			return
		}
		if e, ok := absent[r.URL.Path]; ok {
			e.shape.write(w, errorf(http.StatusNotFound, "Backend", "", "no endpoint %s %s for this model: %s %s needs %s; this one is %s (see GET /info for the routes it answers)",
				r.Method, r.URL.Path, e.method, e.path, e.needs, s.model.Head.HFClass()))
			return
		}
		writeError(w, http.StatusNotFound, "no endpoint %s %s (see GET /v1/model)", r.Method, r.URL.Path)
	})
	return s, nil
}

// maxLengthFor is the longest T with T² × layers ≤ work (layers ≥ 1).
func maxLengthFor(work int64, layers int) int {
	layers = max(layers, 1)
	fits := func(t int) bool {
		hi, lo := bits.Mul64(uint64(t)*uint64(t), uint64(layers)) // t < 2^32: t² does not overflow
		return hi == 0 && lo <= uint64(work)
	}
	t := int(math.Sqrt(float64(work) / float64(layers)))
	for t > 0 && !fits(t) {
		t--
	}
	for fits(t + 1) {
		t++
	}
	return t
}

// Load serves the model folder dir: config.json, the weights and the
// tokenizer files, as `roformer pretrain` and `roformer finetune` write them
// and as Hugging Face saves them, opened with pipeline.Open. The head is
// the first of the config's architectures that this toolkit knows
// (RoFormerModel when none is). What loading allocated and dropped (the
// quantizer's and packer's buffers) is returned to the system before it
// returns (debug.FreeOSMemory), so that a replica at rest holds its model
// and little else.
func Load(dir string, opts Options) (*Server, error) {
	m, err := pipeline.Open(dir, pipeline.OpenOptions{Precision: opts.Precision})
	if err != nil {
		return nil, err
	}
	debug.FreeOSMemory()
	if opts.Name == "" {
		opts.Name = filepath.Base(filepath.Clean(dir))
	}
	opts.Sentence = m.Sentence
	return New(m.Model, m.Tokenizer, opts)
}

// ServeHTTP answers one request. The Host rule, CORS and the API key come
// first (guard.go). A panic while answering becomes a 500 with a JSON
// error, and is logged. Every request is counted and timed (metrics.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	entered := s.flight.enter() // false: draining (drain.go)
	if entered {
		defer s.flight.leave()
	}
	s.instrument(w, r, func(w http.ResponseWriter, r *http.Request) {
		if !s.guard(w, r) {
			return
		}
		if !entered && !passesDrain(r) {
			_, r.Pattern = s.mux.Handler(r) // counted under its route
			refuseDraining(w, r)
			return
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.opts.Log.Printf("server: %s %s: panic: %v", r.Method, r.URL.Path, v)
				writeError(w, http.StatusInternalServerError, "internal error: %v", v)
			}
		}()
		s.mux.ServeHTTP(w, r)
	})
}

// ModelInfo is what GET /v1/model returns.
type ModelInfo struct {
	Name         string `json:"name"`
	Architecture string `json:"architecture"`
	Head         string `json:"head"`
	Precision    string `json:"precision"` // of the linear layers' products: fp32, bf16 or int8
	// BatchInvariant says whether a text's outputs are the same bits alone
	// and in any batch (roformer.Model.BatchInvariant: products on go-asm,
	// by serve --batch-invariant or the probe's choice, in fp32 or int8).
	BatchInvariant bool     `json:"batch_invariant"`
	HiddenSize     int      `json:"hidden_size"`
	Layers         int      `json:"num_hidden_layers"`
	VocabSize      int      `json:"vocab_size"`
	MaxLength      int      `json:"max_length"`
	MaxInputs      int      `json:"max_inputs"`
	Endpoints      []string `json:"endpoints"`
	// SentenceTransformers describes a sentence-transformers folder's
	// modules (sentence.Folder.String); absent for a plain folder.
	SentenceTransformers string `json:"sentence_transformers,omitempty"`
}

// Info describes the model and the endpoints that answer for it.
func (s *Server) Info() ModelInfo {
	c := &s.model.Config
	mi := ModelInfo{Name: s.opts.Name, Architecture: s.model.Head.HFClass(), Head: string(s.model.Head), Precision: string(s.model.Precision()),
		HiddenSize: c.HiddenSize, Layers: c.NumHiddenLayers, VocabSize: c.VocabSize,
		MaxLength: s.opts.MaxLength, MaxInputs: s.opts.MaxInputs,
		BatchInvariant: s.model.BatchInvariant()}
	if st := s.opts.Sentence; st != nil {
		mi.SentenceTransformers = st.String()
	}
	for _, e := range s.served() {
		mi.Endpoints = append(mi.Endpoints, e.method+" "+e.path)
	}
	return mi
}

// route is one endpoint: its handler and, when not every model serves it,
// whether the loaded one does and what it needs (only the routes that
// answer are served, and GET /v1/model and GET /info list them).
type route struct {
	method, path string
	h            http.HandlerFunc
	answers      func() bool
	needs        string       // what answers checks, for the 404 of a model without it
	shape        errShape     // how the route writes its errors (guard.go)
	batched      bool         // its rows go through the batch scheduler (batch.go)
	summary      string       // one line, for GET /docs
	req, resp    reflect.Type // the JSON bodies' types (nil: none), for GET /docs (openapi.go)
}

// served are the routes that answer for the loaded model.
func (s *Server) served() []route {
	var out []route
	for _, e := range s.routes {
		if e.answers == nil || e.answers() {
			out = append(out, e)
		}
	}
	return out
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.Draining() {
		writeJSON(w, http.StatusOK, map[string]string{"status": "draining"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Info())
}

// Input is one text, or a pair of texts, of a request's "inputs". In JSON it
// is a string, or an object {"text": …, "text_pair": …}.
type Input struct {
	Text     string  `json:"text"`
	TextPair *string `json:"text_pair,omitempty"`
}

// Inputs is a request's "inputs": one Input or an array of them.
type Inputs []Input

// UnmarshalJSON accepts "text", {"text": …}, or an array of either.
func (in *Inputs) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		raw = []json.RawMessage{b}
	}
	out := make(Inputs, len(raw))
	for i, r := range raw {
		var obj struct {
			Text     *string `json:"text"`
			TextPair *string `json:"text_pair"`
		}
		if bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
			return fmt.Errorf("input %d is null; want a string or {\"text\": …, \"text_pair\": …}", i)
		}
		if err := json.Unmarshal(r, &out[i].Text); err == nil {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&obj); err != nil {
			return fmt.Errorf("input %d: want a string or {\"text\": …, \"text_pair\": …}: %v", i, err)
		}
		if obj.Text == nil {
			return fmt.Errorf("input %d has no \"text\"", i)
		}
		out[i] = Input{Text: *obj.Text, TextPair: obj.TextPair}
	}
	*in = out
	return nil
}

// read decodes the request body into req and checks its inputs (*in, a
// field of req) against the limits; pairs says whether the endpoint takes
// text pairs. On failure it answers the request and returns false.
func (s *Server) read(w http.ResponseWriter, r *http.Request, req any, in *Inputs, pairs bool) bool {
	if !s.decode(w, r, req) {
		return false
	}
	var err error
	switch {
	case len(*in) == 0:
		err = errors.New(`"inputs" is missing or empty`)
	case len(*in) > s.opts.MaxInputs:
		err = fmt.Errorf(`%d inputs in one request; the limit is %d`, len(*in), s.opts.MaxInputs)
	}
	for i, x := range *in {
		if err == nil && x.TextPair != nil && !pairs {
			err = fmt.Errorf("input %d: this endpoint takes single texts, not pairs", i)
		}
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return false
	}
	return true
}

// TokenizeRequest is the body of POST /v1/tokenize.
type TokenizeRequest struct {
	Inputs Inputs `json:"inputs"`
}

// TokenizeResult is one input's tokens, ids and byte offsets, as the
// tokenizer encodes it for the model (with [CLS] and [SEP], not truncated).
type TokenizeResult struct {
	Tokens  []string `json:"tokens"`
	IDs     []int    `json:"input_ids"`
	TypeIDs []int    `json:"token_type_ids"`
	Offsets [][2]int `json:"offsets"`
}

func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var req TokenizeRequest
	if !s.read(w, r, &req, &req.Inputs, true) {
		return
	}
	out := make([]TokenizeResult, len(req.Inputs))
	tokens := 0
	for i, x := range req.Inputs {
		// The tokens past the answer's limit are counted, not kept.
		enc, err := s.encode(x, tokenizer.EncodeOptions{Truncation: tokenizer.TruncateNone, Limit: max(s.maxAnswerTokens()-tokens, 1)})
		if n, ok := tooLong(err); ok {
			enc, err = &tokenizer.Encoding{IDs: make([]int, n)}, nil
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "input %d: %v", i, err)
			return
		}
		if tokens += len(enc.IDs); tokens > s.maxAnswerTokens() {
			writeError(w, http.StatusBadRequest, "%d tokens in the first %d inputs; the limit is %d a request (max inputs %d × max length %d)",
				tokens, i+1, s.maxAnswerTokens(), s.opts.MaxInputs, s.opts.MaxLength)
			return
		}
		out[i] = TokenizeResult{Tokens: enc.Tokens, IDs: enc.IDs, TypeIDs: enc.TypeIDs, Offsets: enc.Offsets}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}

// maxAnswerTokens bounds the tokens of a tokenize answer: as many as the
// largest request of the model routes, MaxInputs inputs of MaxLength.
func (s *Server) maxAnswerTokens() int {
	if s.opts.MaxLength > math.MaxInt/s.opts.MaxInputs {
		return math.MaxInt
	}
	return s.opts.MaxInputs * s.opts.MaxLength
}

// tooLong returns the length of the input that err refuses for passing
// tokenizer.EncodeOptions.Limit: the routes ask the tokenizer to count the
// tokens past their limit rather than keep them, so a long text costs the
// limit's memory, not its own.
func tooLong(err error) (int, bool) {
	var le *tokenizer.LengthError
	if errors.As(err, &le) {
		return le.Tokens, true
	}
	return 0, false
}

func (s *Server) encode(x Input, opts tokenizer.EncodeOptions) (*tokenizer.Encoding, error) {
	if x.TextPair != nil {
		return s.tok.EncodePair(x.Text, *x.TextPair, opts)
	}
	return s.tok.Encode(x.Text, opts)
}

// EmbedRequest is the body of POST /v1/embed.
type EmbedRequest struct {
	Inputs Inputs `json:"inputs"`
	// Pooling: "cls" (the [CLS] position of the last hidden state; the
	// default of a plain model without a pooler), "mean" (the mean over
	// the input's tokens, special tokens included, padding excluded),
	// another of sentence-transformers' modes ("max",
	// "mean_sqrt_len_tokens", "weightedmean", "lasttoken", several joined
	// by "+"), or "pooler" (the model's pooler on [CLS]; the default of a
	// model that has one, RoFormer-Sim, whose similarity vectors these
	// are). A sentence-transformers folder's default is its own pooling,
	// followed by its Dense and Normalize modules (which another pooling
	// keeps).
	Pooling string `json:"pooling,omitempty"`
	// PromptName names one of a sentence-transformers folder's prompts
	// (default: the server's default prompt, else the folder's).
	PromptName *string `json:"prompt_name,omitempty"`
	// Normalize scales each vector to unit length.
	Normalize bool `json:"normalize,omitempty"`
}

// EmbedResponse holds one vector per input, and how many inputs were
// truncated to the server's max length.
type EmbedResponse struct {
	Embeddings [][]float32 `json:"embeddings"`
	Dim        int         `json:"dim"`
	Truncated  int         `json:"truncated"`
}

func (s *Server) embed(w http.ResponseWriter, r *http.Request) {
	var req EmbedRequest
	if !s.read(w, r, &req, &req.Inputs, true) {
		return
	}
	// The request's pooling, else the folder's (a sentence-transformers
	// folder), else the pooler's (RoFormer-Sim), else [CLS].
	pooling, err := pipeline.ParsePooling(req.Pooling)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if pooling == pipeline.PoolDefault && s.opts.Sentence == nil && s.model.Encoder.Pooler == nil {
		pooling = pipeline.PoolCLS
	}
	eo, e := s.vectorOptions(pooling, req.PromptName)
	if e != nil {
		writeError(w, http.StatusBadRequest, "%s", e.msg)
		return
	}
	skip, err := pipeline.PromptSkip(s.tok, eo)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	// Each input is encoded whole, and again with HF's longest_first
	// truncation only when it is too long; the batch is padded to its
	// longest row (padding is masked out).
	rows := make([]embedRow, len(req.Inputs))
	truncated := 0
	for i, x := range req.Inputs {
		noteChars(r.Context(), x.Text)
		if x.TextPair != nil {
			if eo.PromptText() != "" {
				writeError(w, http.StatusBadRequest, "input %d: %v", i, pipeline.ErrPromptPair)
				return
			}
			p := eo.PairText(*x.TextPair)
			x.TextPair = &p
		}
		x.Text = eo.Text(x.Text)
		enc, err := s.encode(x, tokenizer.EncodeOptions{MaxLength: s.opts.MaxLength, Truncation: tokenizer.TruncateLongestFirst})
		if err == nil && enc.Truncated {
			truncated++
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "input %d: %v", i, err)
			return
		}
		rows[i] = embedRow{ids: tokenizer.Int32s(enc.IDs), types: tokenizer.Int32s(enc.TypeIDs), pool: poolVector, vz: eo.Vectorizer(), skip: skip}
		if x.TextPair != nil {
			noteChars(r.Context(), *x.TextPair)
		}
	}
	if err := s.submit(r.Context(), rows); err != nil {
		s.embedFailed(w, r, err)
		return
	}
	res := EmbedResponse{Embeddings: make([][]float32, len(rows)), Dim: eo.Vectorizer().Dim(s.model.Config.HiddenSize), Truncated: truncated}
	for i, row := range rows {
		if req.Normalize {
			pipeline.Normalize(row.vec)
		}
		res.Embeddings[i] = row.vec
	}
	writeJSON(w, http.StatusOK, res)
}

// embedFailed answers a /v1 embedding request whose rows did not run.
func (s *Server) embedFailed(w http.ResponseWriter, r *http.Request, err error) {
	status := embedStatus(r.Context(), err)
	if status == http.StatusInternalServerError {
		s.opts.Log.Printf("server: %s %s: %v", r.Method, r.URL.Path, err)
	}
	if status == http.StatusServiceUnavailable && r.Context().Err() != nil {
		writeError(w, status, "request cancelled while waiting: %v", r.Context().Err())
		return
	}
	writeError(w, status, "%v", err)
}

// FillMaskRequest is the body of POST /v1/fill-mask.
type FillMaskRequest struct {
	Inputs Inputs `json:"inputs"`
	TopK   int    `json:"top_k,omitempty"` // candidates per mask; default 5
}

// FillMaskResponse holds, per input, per [MASK] in order, the top-k
// candidates with HF's fill-mask pipeline fields.
type FillMaskResponse struct {
	Results [][][]pipeline.Prediction `json:"results"`
}

func (s *Server) fillMask(w http.ResponseWriter, r *http.Request) {
	var req FillMaskRequest
	if !s.read(w, r, &req, &req.Inputs, false) {
		return
	}
	if req.TopK == 0 {
		req.TopK = 5
	}
	if req.TopK < 1 || req.TopK > s.opts.MaxTopK {
		writeError(w, http.StatusBadRequest, "top_k %d: want 1 to %d", req.TopK, s.opts.MaxTopK)
		return
	}
	masks := 0
	for i, x := range req.Inputs {
		enc, err := s.tok.Encode(x.Text, tokenizer.EncodeOptions{Truncation: tokenizer.TruncateNone, Limit: s.opts.MaxLength})
		if n, ok := tooLong(err); ok {
			writeError(w, http.StatusBadRequest, "input %d has %d tokens; the limit is %d", i, n, s.opts.MaxLength)
			return
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "input %d: %v", i, err)
			return
		}
		n := 0
		for _, id := range enc.IDs {
			if id == s.tok.MaskID() {
				n++
			}
		}
		if n == 0 {
			writeError(w, http.StatusBadRequest, "input %d has no [MASK] token", i)
			return
		}
		if masks += n; masks > s.opts.MaxMasks {
			writeError(w, http.StatusBadRequest, "%d [MASK] tokens in the first %d inputs; the limit is %d a request (max masks)", masks, i+1, s.opts.MaxMasks)
			return
		}
	}
	res := FillMaskResponse{Results: make([][][]pipeline.Prediction, len(req.Inputs))}
	for i, x := range req.Inputs {
		if !s.run(w, r, func(ctx context.Context) error {
			var err error
			res.Results[i], err = pipeline.FillMask(ctx, s.model, s.tok, x.Text, req.TopK)
			return err
		}) {
			return
		}
	}
	writeJSON(w, http.StatusOK, res)
}

// run runs fn, the request's forward passes, once no other request's are
// running. It answers the request itself when it fails (false): 503 when the
// client went away while waiting, 500 when fn fails.
func (s *Server) run(w http.ResponseWriter, r *http.Request, fn func(context.Context) error) bool {
	ctx := r.Context()
	s.yieldCPU(stateOf(ctx))
	select {
	case s.gate <- struct{}{}:
	case <-ctx.Done():
		writeError(w, http.StatusServiceUnavailable, "request cancelled while waiting: %v", ctx.Err())
		return false
	}
	err := func() error {
		defer func() { <-s.gate }() // released even if fn panics
		return fn(ctx)
	}()
	if err != nil {
		if ctx.Err() != nil {
			writeError(w, http.StatusServiceUnavailable, "request cancelled: %v", ctx.Err())
			return false
		}
		s.opts.Log.Printf("server: %s %s: %v", r.Method, r.URL.Path, err)
		writeError(w, http.StatusInternalServerError, "%v", err)
		return false
	}
	return true
}

// decode reads the JSON body (read by handle, guard.go) into v; on failure
// it answers 400 and returns false. Unknown fields are errors, so a misspelt option is not
// silently ignored.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(bodyOf(r)))
	defer s.bodyDone(stateOf(r.Context()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "request body: %v", err)
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "request body: more than one JSON value, or data after it")
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}
