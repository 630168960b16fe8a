package server

import (
	"net/http"
	"sync/atomic"
)

// Loading is an http.Handler for a server whose model is still loading, so
// that it can listen (and orchestrators probe it) before the model is
// ready: until Ready hands it the Server, GET /health and every model
// route answer 503 {"error": "model is loading", "error_type": "Unhealthy"}
// (TEI's readiness answer), while GET /healthz, the liveness probe,
// answers 200 {"status": "loading"}. Once ready, every request goes to
// the Server.
//
//	l := server.NewLoading()
//	go http.Serve(ln, l)
//	s, err := server.Load(dir, opts)
//	…
//	l.Ready(s)
type Loading struct {
	s atomic.Pointer[Server]
}

// NewLoading returns a handler that answers 503 until Ready.
func NewLoading() *Loading { return &Loading{} }

// Ready hands over s: from now on, s answers every request.
func (l *Loading) Ready(s *Server) { l.s.Store(s) }

// Server is the server handed to Ready, or nil while loading.
func (l *Loading) Server() *Server { return l.s.Load() }

// ServeHTTP answers r with the server once it is ready, and 503 before.
func (l *Loading) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s := l.s.Load(); s != nil {
		s.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "loading"})
		return
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, TEIError{Error: "model is loading", ErrorType: "Unhealthy"})
}
