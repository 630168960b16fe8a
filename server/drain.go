package server

import (
	"context"
	"net/http"
	"sync"
)

// Draining: a graceful stop that keeps the listener open. Drain marks the
// server as stopping; from then on every new request (a new connection, or
// the next request of a kept-alive one) is answered at once with 503 and
// Connection: close, in its route's error shape, instead of meeting a
// closed port (connection refused), while the requests already in flight
// run to their answers. GET /health, the readiness probe, answers 503
// {"error", "error_type": "Unhealthy"} so that a load balancer takes the
// server out of rotation; GET /healthz (liveness) and GET /metrics still
// answer 200. Once Drain returns (nothing in flight, or its context ended),
// the caller shuts the listener down (http.Server.Shutdown) and calls
// Close:
//
//	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
//	defer cancel()
//	_ = s.Drain(ctx)      // new requests: 503; in flight: answered
//	_ = hs.Shutdown(ctx)  // the listener closes, idle connections too
//	s.Close()

// flight counts the requests in flight and says when draining has begun.
type flight struct {
	mu       sync.Mutex
	n        int           // requests being answered (not the ones refused while draining)
	draining bool          // Drain was called
	idle     chan struct{} // closed once draining with n == 0
}

// enter counts a new request in, or returns false when the server drains.
func (f *flight) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining {
		return false
	}
	f.n++
	return true
}

// leave counts a request out.
func (f *flight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n--; f.n == 0 && f.draining {
		close(f.idle)
	}
}

// Drain stops the server taking new requests (they get 503 at once, the
// listener stays open) and waits until the requests in flight have been
// answered, or ctx ends (then it returns ctx's error, and the requests
// still running keep running). Calling it again waits again.
func (s *Server) Drain(ctx context.Context) error {
	f := &s.flight
	f.mu.Lock()
	if !f.draining {
		f.draining = true
		f.idle = make(chan struct{})
		if f.n == 0 {
			close(f.idle)
		}
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Draining says whether Drain has been called.
func (s *Server) Draining() bool {
	s.flight.mu.Lock()
	defer s.flight.mu.Unlock()
	return s.flight.draining
}

// InFlight is the number of requests being answered.
func (s *Server) InFlight() int {
	s.flight.mu.Lock()
	defer s.flight.mu.Unlock()
	return s.flight.n
}

// passesDrain says whether r is answered while draining: the liveness
// probe and the metrics (neither starts work on the model).
func passesDrain(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return r.URL.Path == "/healthz" || r.URL.Path == "/metrics"
}

// refuseDraining answers a request that came while draining: 503 with
// Retry-After and Connection: close, in the error shape of its route.
func refuseDraining(w http.ResponseWriter, r *http.Request) {
	const msg = "the server is shutting down: it takes no new requests"
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Connection", "close")
	e := errorf(http.StatusServiceUnavailable, "Unhealthy", "", msg)
	switch p := r.URL.Path; {
	case p == "/v1/embeddings":
		writeOpenAIError(w, e)
	case p == "/v1/model" || p == "/v1/tokenize" || p == "/v1/embed" || p == "/v1/fill-mask":
		writeError(w, e.status, "%s", msg)
	default: // TEI's routes, /generate, the /v1 task routes and the page
		writeTEIError(w, e)
	}
}
