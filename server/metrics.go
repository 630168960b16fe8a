package server

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/roformer-go/roformer/model/roformer"
)

// Metrics and timing. Every Server has its own Prometheus registry (not the
// global default one), served at GET /metrics, so several servers in one
// process, and tests, do not collide. The names follow Hugging Face
// text-embeddings-inference (TEI):
//
//	te_request_count{route,status}            counter: answered requests
//	te_request_duration{route,status}         histogram (s): arrival to answer
//	te_tokenization_duration                  histogram (s): per answered model request
//	te_queue_duration                         histogram (s): per answered model request
//	te_inference_duration                     histogram (s): per answered model request
//	te_queue_size                             gauge: inputs queued, not yet in a forward pass
//	te_batch_next_size                        histogram: inputs per forward pass
//	te_batch_next_tokens                      histogram: tokens per forward pass (without padding)
//
//	roformer_model_weight_bytes{form,precision} gauge: the model's weights by form (roformer.WeightMemory:
//	                                          float32, mapped, stored, prepared), at each scrape
//
// plus the Go runtime's and the process's collectors (go_*, process_*;
// process_resident_memory_bytes is the RSS).
// route is the route's pattern without its method ("/embed"), or "other"
// for requests no route took; status is the answer's code.
//
// A request whose inputs go through the batch scheduler (submit) also gets
// TEI's timing headers on its 200 answer, in whole milliseconds:
// x-compute-time (tokenization + queue + inference), x-compute-characters,
// x-compute-tokens, x-total-time (from the end of reading the body to the
// answer), x-tokenization-time (validation and tokenization: from the end
// of reading the body until the inputs are queued), x-queue-time and
// x-inference-time (the forward passes of the batches its inputs ran in).
// A route fills them by calling s.submit with the request's context (and
// noteChars with its texts); the headers and the three histograms then
// follow with no more code.

type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	tokenization prometheus.Histogram
	queue        prometheus.Histogram
	inference    prometheus.Histogram
	queueSize    prometheus.Gauge
	batchSize    prometheus.Histogram
	batchTokens  prometheus.Histogram
}

// durationBuckets: 0.25 ms to about 8 s.
var durationBuckets = prometheus.ExponentialBuckets(0.00025, 2, 16)

func newMetrics() *metrics {
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "te_request_count",
			Help: "Requests answered, by route and status."}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "te_request_duration",
			Help: "Seconds from a request's arrival to its answer, by route and status.", Buckets: durationBuckets}, []string{"route", "status"}),
		tokenization: hist("te_tokenization_duration", "Seconds spent validating and tokenizing a request's inputs.", durationBuckets),
		queue:        hist("te_queue_duration", "Seconds a request's inputs waited for their first batch.", durationBuckets),
		inference:    hist("te_inference_duration", "Seconds of the forward passes a request's inputs ran in.", durationBuckets),
		queueSize: prometheus.NewGauge(prometheus.GaugeOpts{Name: "te_queue_size",
			Help: "Inputs queued for a batch and not yet in a forward pass (raised on enqueue, lowered as they are batched or dropped)."}),
		batchSize:   hist("te_batch_next_size", "Inputs (rows) per batched forward pass.", prometheus.ExponentialBuckets(1, 2, 11)),
		batchTokens: hist("te_batch_next_tokens", "Tokens (without padding) per batched forward pass.", prometheus.ExponentialBuckets(4, 2, 16)),
	}
	m.reg.MustRegister(m.requests, m.duration, m.tokenization, m.queue, m.inference, m.queueSize, m.batchSize, m.batchTokens,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the server's Prometheus registry (what GET /metrics
// serves), for a caller that adds its own collectors or serves it elsewhere.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// timing is what one request took, for TEI's headers and the histograms.
// The handler's goroutine alone touches it: submit copies the scheduler's
// times in once the job is done.
type timing struct {
	arrived                        time.Time // the request's arrival
	start                          time.Time // the end of reading its body (arrived when not marked)
	submitted                      bool      // its inputs went through the scheduler and ran
	tokenization, queue, inference time.Duration
	chars, tokens                  int
}

func timingOf(ctx context.Context) *timing {
	if st := stateOf(ctx); st != nil {
		return &st.timing
	}
	return nil
}

// markRead notes that the request's body has been read: the times of
// TEI's headers start there.
func markRead(r *http.Request) {
	if t := timingOf(r.Context()); t != nil {
		t.start = time.Now()
	}
}

// noteChars counts the characters of a request's texts for the
// x-compute-characters header.
func noteChars(ctx context.Context, texts ...string) {
	if t := timingOf(ctx); t != nil {
		for _, x := range texts {
			t.chars += len([]rune(x))
		}
	}
}

// queued notes that a request's rows (tokens in all) are handed to the
// scheduler: tokenization ends.
func (t *timing) queued(tokens int) {
	if t == nil {
		return
	}
	t.tokenization += time.Since(t.start)
	t.tokens += tokens
}

// ran adds the scheduler's times of a finished job.
func (t *timing) ran(j *embedJob) {
	if t == nil {
		return
	}
	t.submitted = true
	t.queue += j.queueTime
	t.inference += j.inferTime
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// setHeaders writes TEI's timing headers.
func (t *timing) setHeaders(h http.Header) {
	h.Set("x-compute-time", ms(t.tokenization+t.queue+t.inference))
	h.Set("x-compute-characters", strconv.Itoa(t.chars))
	h.Set("x-compute-tokens", strconv.Itoa(t.tokens))
	h.Set("x-total-time", ms(time.Since(t.start)))
	h.Set("x-tokenization-time", ms(t.tokenization))
	h.Set("x-queue-time", ms(t.queue))
	h.Set("x-inference-time", ms(t.inference))
}

// recorder notes the status of an answer and, when it is a 200 of a request
// whose inputs ran, writes the timing headers before it.
type recorder struct {
	http.ResponseWriter
	s      *Server
	t      *timing
	st     *reqState
	status int
	rc     *http.ResponseController // for the write deadlines, made on the first write
}

// WriteHeader also gives back the request's CPU token (guard.go): its
// answer is ready, and the client may read it slowly.
func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.s.yieldCPU(w.st)
		w.status = code
		if code == http.StatusOK && w.t.submitted {
			w.t.setHeaders(w.Header())
			w.s.metrics.tokenization.Observe(w.t.tokenization.Seconds())
			w.s.metrics.queue.Observe(w.t.queue.Seconds())
			w.s.metrics.inference.Observe(w.t.inference.Seconds())
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write writes b within Options.WriteTimeout (where the connection can
// have deadlines), so that a client that does not read cannot hold the
// answer, nor the request's slot, for longer.
func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.rc == nil {
		w.rc = http.NewResponseController(w.ResponseWriter)
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.s.opts.WriteTimeout))
	return w.ResponseWriter.Write(b)
}

// Flush lets a streaming answer (server-sent events) through.
func (w *recorder) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack keeps http.Hijacker working through the recorder.
func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap is for http.ResponseController.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument answers r with next, timing it and counting it by route
// (r.Pattern once the mux has matched it) and status.
func (s *Server) instrument(w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter, *http.Request)) {
	now := time.Now()
	st := &reqState{timing: timing{arrived: now, start: now}}
	rec := &recorder{ResponseWriter: w, s: s, t: &st.timing, st: st}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	defer func() {
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		route := "other"
		if p := r.Pattern; p != "" && p != "/" {
			if _, path, ok := strings.Cut(p, " "); ok {
				p = path
			}
			route = p
		}
		code := strconv.Itoa(status)
		s.metrics.requests.WithLabelValues(route, code).Inc()
		s.metrics.duration.WithLabelValues(route, code).Observe(time.Since(now).Seconds())
	}()
	next(rec, r)
}

// weightCollector reports roformer_model_weight_bytes for a model, read at
// each scrape (oneDNN makes a layer's weights in another layout the first
// time a batch of another shape asks for one).
type weightCollector struct {
	m    *roformer.Model
	desc *prometheus.Desc
}

func newWeightCollector(m *roformer.Model) *weightCollector {
	return &weightCollector{m: m, desc: prometheus.NewDesc("roformer_model_weight_bytes",
		"Bytes of the model's weights by form: float32 (own memory), mapped (float32 where it lies in the mapped file; resident where read), stored (int8 codes and BF16 bytes as a quantized folder stores them), prepared (the layers' copies in the precision they run in).",
		[]string{"form", "precision"}, nil)}
}

func (c *weightCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *weightCollector) Collect(ch chan<- prometheus.Metric) {
	w, p := c.m.WeightMemory(), string(c.m.Precision())
	for _, f := range []struct {
		form string
		n    int64
	}{{"float32", w.Float32}, {"mapped", w.Mapped}, {"stored", w.Stored}, {"prepared", w.Prepared}} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(f.n), f.form, p)
	}
}
