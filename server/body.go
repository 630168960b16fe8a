package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// readBody reads r's body whole: at most Options.MaxBodyBytes (beyond: 413)
// within Options.BodyTimeout of the handler's start (beyond: 408, as a
// request-timeout layer answers a client that stalls; TEI's error_type has
// no value for it, so it is "Validation", the type of the other errors of
// a request's body). The deadline is on the connection's reads, so a
// stalled client holds neither a goroutine nor a slot past it; it is
// lifted once the body is in, so that it cannot end a long answer (a
// queue, a stream). Reading the whole body before decoding it is what tells a body
// that stalls from one that is not JSON. Under an http.Handler that cannot
// set read deadlines (httptest.ResponseRecorder) there is no timeout.
//
// The buffer grows with what has arrived (doubling from 4 KiB, never past
// the announced length or the limit), and each growth is charged to
// Options.MaxReadingBytes, the bytes that the bodies being read hold at
// once over all requests: a body that would pass it gets 429 at once
// (Overloaded, Retry-After), so that clients that send bodies slowly, and
// hold no admission slot while they do, cannot hold more memory than that
// budget, and pay for what they hold with bytes they send. The charge goes
// back once the body is decoded (bodyDone) or the request is answered.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, st *reqState) ([]byte, *apiError) {
	rc := http.NewResponseController(w)
	timed := rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) == nil
	if timed {
		// The write deadline of the connection's previous answer
		// (recorder.Write) must not cut net/http's "100 Continue".
		_ = rc.SetWriteDeadline(time.Time{})
	}
	limit := s.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, errorf(http.StatusRequestEntityTooLarge, "Validation", "", "request body over %d bytes", limit)
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	// The most the buffer may need: the announced length, else the
	// limit; one byte more, so that io.EOF is seen without growing.
	need := limit + 1
	if r.ContentLength >= 0 {
		need = r.ContentLength + 1
	}
	var b []byte
	var err error
	for {
		if len(b) == cap(b) {
			// Neither reader gives more than need-1 bytes, so the
			// buffer is full only below need.
			n := min(max(2*int64(cap(b)), 4096), need)
			if !s.reserve(st, n-int64(cap(b))) {
				w.Header().Set("Connection", "close")
				return nil, errorf(http.StatusTooManyRequests, "Overloaded", "",
					"the server is busy reading other requests' bodies (%d bytes at once at most); try again", s.opts.MaxReadingBytes)
			}
			nb := make([]byte, len(b), n)
			copy(nb, b)
			b = nb
		}
		var k int
		k, err = body.Read(b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		if timed {
			_ = rc.SetReadDeadline(time.Time{})
		}
		return b, nil
	case errors.As(err, &tooBig):
		return nil, errorf(http.StatusRequestEntityTooLarge, "Validation", "", "request body over %d bytes", tooBig.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return nil, errorf(http.StatusRequestTimeout, "Validation", "",
			"request body: %d bytes arrived within %v (the body timeout), then nothing", len(b), s.opts.BodyTimeout)
	}
	return nil, errorf(http.StatusBadRequest, "Validation", "", "request body: %v", fmt.Errorf("reading: %w", err))
}

// reserve charges n bytes of a body's buffer to the reading budget, or
// returns false when the budget has not that much left.
func (s *Server) reserve(st *reqState, n int64) bool {
	if s.reading.Add(n) > s.opts.MaxReadingBytes {
		s.reading.Add(-n)
		return false
	}
	st.reserved += n
	return true
}

// bodyDone gives back the body's charge: it has been decoded (what the
// request keeps of it is then the decoded value, bounded by its slot), or
// the request is answered.
func (s *Server) bodyDone(st *reqState) {
	if st != nil && st.reserved > 0 {
		s.reading.Add(-st.reserved)
		st.reserved = 0
	}
}
