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
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	rc := http.NewResponseController(w)
	timed := rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) == nil
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
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
