package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
)

// What comes before a route's own code, so that only the caller meant
// reaches the model, and every request has a bound on what it holds:
//
//   - the Host rule (Options.LoopbackOnly): a server that listens on a
//     loopback address answers only requests for a loopback name or
//     address, so that a web page whose DNS name is rebound to 127.0.0.1
//     cannot drive it (403);
//   - CORS (Options.CORSAllowOrigins): no CORS headers at all by default,
//     so browsers keep other origins' pages from reading the answers; the
//     listed origins get them, and their preflight requests an answer;
//   - the API key (Options.APIKey): "Authorization: Bearer KEY" on every
//     route but the probes (GET /health, /healthz) and the page's static
//     files (GET /, /web/…), compared in constant time (401 otherwise);
//   - on every POST route: a JSON body only (Content-Type
//     application/json, 415 otherwise: the types a browser may send
//     cross-site without a preflight, text/plain among them, are refused);
//     the body read whole within the size limit, the body timeout and the
//     budget of bytes being read at once (413, 408, 429; body.go); then,
//     and only then, one of Options.MaxConcurrentRequests admission slots
//     (429 when none is free), held until the answer, or handed to the
//     batch scheduler with the request's rows (batch.go); and, while the
//     request is decoded and tokenized, one of the CPU tokens (one per
//     CPU), given back as soon as the request waits for the model or
//     starts its answer, so that the tokenizing requests, and the memory
//     they hold, are bounded too. A client that sends its body slowly
//     holds neither a slot nor a token.

// errShape is how a route writes its errors.
type errShape int

const (
	shapeV1     errShape = iota // {"error": "…"}
	shapeTEI                    // TEI's {"error", "error_type"}
	shapeOpenAI                 // OpenAI's {"error": {"message", "type", "param", "code"}}
)

// write answers e in shape sh.
func (sh errShape) write(w http.ResponseWriter, e *apiError) {
	switch sh {
	case shapeTEI:
		writeTEIError(w, e)
	case shapeOpenAI:
		writeOpenAIError(w, e)
	default:
		if e.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, e.status, "%s", e.msg)
	}
}

// reqState is what the server keeps of one request while it answers it:
// its timing (metrics.go), its body once read, the share of the body
// budget that the body holds, and its admission slot and CPU token.
type reqState struct {
	timing
	body     []byte
	reserved int64    // bytes of Options.MaxReadingBytes held by the body
	shape    errShape // how the route writes its errors (a 429 for an answer past Options.MaxWritingBytes: answer.go)
	slot     bool     // holds an admission slot
	batched  bool     // ... counted in preparing (batch.go) until it is queued
	handed   bool     // the slot went to the scheduler with the request's rows
	cpu      bool     // holds a CPU token
}

type stateKey struct{}

func stateOf(ctx context.Context) *reqState {
	st, _ := ctx.Value(stateKey{}).(*reqState)
	return st
}

// handle wraps the handler of route e. A GET route runs as it is; a POST
// route checks the content type, reads the body, takes an admission slot
// and a CPU token, then runs e.h, and gives back what the request still
// holds once it returns.
func (s *Server) handle(e route) http.HandlerFunc {
	if e.method != http.MethodPost {
		return func(w http.ResponseWriter, r *http.Request) {
			if st := stateOf(r.Context()); st != nil {
				st.shape = e.shape
			}
			e.h(w, r)
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		st := stateOf(r.Context())
		if st == nil { // not through ServeHTTP (a test calling the mux)
			st = &reqState{}
			r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
		}
		st.shape = e.shape
		if err := jsonContentType(r.Header.Get("Content-Type")); err != nil {
			e.shape.write(w, errorf(http.StatusUnsupportedMediaType, "Validation", "", "%v", err))
			return
		}
		defer s.release(st)
		body, ae := s.readBody(w, r, st)
		if ae != nil {
			if ae.status == http.StatusBadRequest && e.shape == shapeTEI { // the body broke off: TEI's 422 for a body it cannot read
				ae.status = http.StatusUnprocessableEntity
			}
			e.shape.write(w, ae)
			return
		}
		if ae := checkUTF8(body); ae != nil { // utf8.go
			if e.shape == shapeOpenAI {
				ae.status = http.StatusBadRequest
			}
			e.shape.write(w, ae)
			return
		}
		st.body = body
		markRead(r)
		if !s.admit(e.batched) {
			e.shape.write(w, errorf(http.StatusTooManyRequests, "Overloaded", "", "%v", errOverloaded))
			return
		}
		st.slot, st.batched = true, e.batched
		select {
		case s.cpu <- struct{}{}:
			st.cpu = true
		case <-r.Context().Done():
			e.shape.write(w, errorf(http.StatusServiceUnavailable, "Unhealthy", "", "request cancelled while waiting: %v", r.Context().Err()))
			return
		}
		e.h(w, r)
	}
}

// release gives back what a request still holds: its body's share of the
// budget, its CPU token, and its slot unless the scheduler has it.
func (s *Server) release(st *reqState) {
	s.bodyDone(st)
	s.yieldCPU(st)
	if st.slot && !st.handed {
		st.slot = false
		if st.batched {
			s.preparing.Add(-1)
		}
		<-s.slots
	}
}

// yieldCPU gives back the request's CPU token, if it holds one: it is
// about to wait for the model, or to answer.
func (s *Server) yieldCPU(st *reqState) {
	if st != nil && st.cpu {
		st.cpu = false
		<-s.cpu
	}
}

// bodyOf is the body that handle read for r.
func bodyOf(r *http.Request) []byte {
	if st := stateOf(r.Context()); st != nil {
		return st.body
	}
	return nil
}

// jsonContentType says why ct is not application/json (with at most a
// charset parameter, UTF-8: RFC 8259 JSON between systems is UTF-8).
func jsonContentType(ct string) error {
	if ct == "application/json" {
		return nil
	}
	const want = "POST bodies must be JSON, sent with Content-Type: application/json"
	if ct == "" {
		return fmt.Errorf("no Content-Type: %s", want)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("Content-Type %q: %s", ct, want)
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return fmt.Errorf("Content-Type %q: the only parameter taken is charset=utf-8", ct)
		}
	}
	return nil
}

// guard applies the rules that come before every route: the Host rule,
// CORS and the API key. When it refuses the request, or answers it (a
// preflight), it returns false.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.LoopbackOnly && !loopbackHost(r.Host) {
		writeTEIError(w, errorf(http.StatusForbidden, "Validation", "",
			"Host %q is not a loopback name or address: this server listens on a loopback address and answers only requests for localhost, 127.0.0.1 or [::1] (so that a page whose DNS name points at 127.0.0.1 cannot reach it); bind to another address to serve other names", r.Host))
		return false
	}
	if len(s.opts.CORSAllowOrigins) > 0 {
		if !s.cors(w, r) {
			return false
		}
	}
	if s.key != nil && !openRoute(r) {
		if !s.keyMatches(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="roformer"`)
			msg := "this server needs an API key: send it as Authorization: Bearer KEY"
			if r.Header.Get("Authorization") != "" {
				msg = "the Authorization header does not hold this server's API key (Authorization: Bearer KEY)"
			}
			writeTEIError(w, errorf(http.StatusUnauthorized, "Unauthorized", "", "%s", msg))
			return false
		}
	}
	return true
}

// openRoute says whether r needs no API key: the probes and the page's
// static files (the page asks for the key itself, web/app.js).
func openRoute(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	return p == "/health" || p == "/healthz" || p == "/" || strings.HasPrefix(p, "/web/")
}

// keyMatches compares the bearer token of an Authorization header with the
// key in constant time: both are hashed first, so that neither the
// comparison nor the lengths tell how much of a guess was right.
func (s *Server) keyMatches(auth string) bool {
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		token = ""
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], s.key) == 1 && ok
}

// cors adds the CORS headers for an allowed origin and answers a
// preflight (OPTIONS with Access-Control-Request-Method): 204 with the
// methods and headers allowed for a listed origin, 403 for another. It
// returns false when it has answered.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	star := slices.Contains(s.opts.CORSAllowOrigins, "*")
	h := w.Header()
	if !star {
		h.Add("Vary", "Origin")
	}
	allowed := origin != "" && (star || slices.Contains(s.opts.CORSAllowOrigins, origin))
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if allowed {
		if star {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
		}
	}
	if !preflight {
		return true
	}
	if !allowed {
		writeTEIError(w, errorf(http.StatusForbidden, "Validation", "", "origin %q is not allowed (the server's CORS origins: %s)", origin, strings.Join(s.opts.CORSAllowOrigins, ", ")))
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return false
}

// loopbackHost says whether a Host header names this machine's loopback
// interface: localhost, an address of 127.0.0.0/8 or ::1, with or without
// a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
