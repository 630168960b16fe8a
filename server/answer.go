package server

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"
)

// Answers and the bytes they hold. An answer is encoded whole before its
// status is written (writeJSON), so that a value JSON cannot hold (a NaN
// from a broken model) becomes a 500 rather than a 200 cut short; it is
// then written within one Options.WriteTimeout. A client that does not
// read holds the answer's bytes until that deadline ends its connection,
// so the bytes of every answer over SmallAnswerBytes are charged, as they
// are encoded and until the answer is written, to Options.MaxWritingBytes,
// the bytes that the answers being written hold at once over all requests:
// an answer that would pass it stops encoding and gets 429 (the route's
// error shape, Overloaded, Retry-After) in its place. Clients that ask for
// large answers and do not read them thus hold at most that budget,
// however many they are; they hold no admission slot meanwhile (the
// scheduler gives it back once the rows have run), and the other answers,
// small ones above all (/health, an /embed of a few vectors), go through.
//
// An answer that is a list (every large one: /embed_all's tokens,
// /embed_sparse's vectors, /embed's, /tokenize's) is encoded item by item
// into chunks of its exact size, so that what it holds is what it charges:
// encoding/json would grow one buffer by doubling (up to twice the answer)
// and keep it in its pool afterwards. Streaming every answer through a
// bounded buffer would hold less for each, but not a stated total: the
// value itself would wait on the client then (the float32 vectors of an
// /embed_all, 40% of their JSON), and the 500 for an unencodable value
// would be lost.

// SmallAnswerBytes is the size up to which an answer is not charged to
// Options.MaxWritingBytes: the connection's kernel buffers take that much
// at once, and the answers a server must give while it is busy (/health,
// /info, an /embed of a few vectors) are smaller.
const SmallAnswerBytes = 64 << 10

// answerChunk is the size of the chunks the items of a list are gathered
// in (an item larger than it has a chunk of its own).
const answerChunk = 256 << 10

var errOverBudget = errors.New("over the budget of answers being written")

// writeJSON encodes v and writes it with status (see above). When v cannot
// be encoded the answer is a 500 naming why; when it would pass
// Options.MaxWritingBytes, a 429.
func writeJSON(w http.ResponseWriter, status int, v any) {
	rec, _ := w.(*recorder)
	a := &encoded{rec: rec}
	err := a.encode(v)
	defer a.release()
	switch {
	case errors.Is(err, errOverBudget):
		a.release()
		s := rec.s
		rec.st.shape.write(w, errorf(http.StatusTooManyRequests, "Overloaded", "",
			"the server is busy writing other answers to clients that read them slowly (%d bytes at once at most, --max-writing-bytes); this one has more than %d bytes; try again",
			s.opts.MaxWritingBytes, a.size))
		return
	case err != nil:
		a.release()
		a = &encoded{}
		status = http.StatusInternalServerError
		_ = a.encode(map[string]string{"error": fmt.Sprintf("encoding the answer: %v", err)})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var write func([]byte) (int, error) = w.Write
	if rec != nil {
		// One deadline for the whole answer, as for one write.
		write = rec.ResponseWriter.Write
		if rec.rc == nil {
			rec.rc = http.NewResponseController(rec.ResponseWriter)
		}
		_ = rec.rc.SetWriteDeadline(time.Now().Add(rec.s.opts.WriteTimeout))
	}
	for i, c := range a.chunks {
		a.chunks[i] = nil // written: the collector may have it
		if _, err := write(c); err != nil {
			return // the client is gone, or did not read within the deadline
		}
	}
}

// encoded is an answer encoded: its chunks, their size, and the share of
// Options.MaxWritingBytes they hold (rec nil: not charged).
type encoded struct {
	rec     *recorder
	chunks  [][]byte
	size    int64 // bytes encoded
	held    int64 // capacity of the chunks
	charged int64
	scratch bytes.Buffer
	enc     *json.Encoder
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// encode encodes v as json.Encoder does (HTML not escaped, a newline at
// the end), a list item by item.
func (a *encoded) encode(v any) error {
	a.enc = json.NewEncoder(&a.scratch)
	a.enc.SetEscapeHTML(false)
	defer func() { a.scratch, a.enc = bytes.Buffer{}, nil }() // not held while the answer is written
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rv.IsNil() || rv.Type().Elem().Kind() == reflect.Uint8 || marshals(rv.Type()) || marshals(rv.Type().Elem()) {
		return a.add(v, false)
	}
	if err := a.raw("["); err != nil {
		return err
	}
	for i := range rv.Len() {
		if i > 0 {
			if err := a.raw(","); err != nil {
				return err
			}
		}
		if err := a.add(rv.Index(i).Interface(), true); err != nil {
			return err
		}
	}
	return a.raw("]\n")
}

// marshals says whether t or *t encodes itself (then it is encoded whole,
// as encoding/json would call it).
func marshals(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(marshalerType) || t.Implements(textMarshalerType) || p.Implements(marshalerType) || p.Implements(textMarshalerType)
}

// add appends x's encoding: an item of a list without the encoder's
// newline, copied into the chunks; a whole answer as the encoder's buffer.
func (a *encoded) add(x any, item bool) error {
	a.scratch.Reset()
	if err := a.enc.Encode(x); err != nil {
		return err
	}
	b := a.scratch.Bytes()
	if item {
		return a.append(b[:len(b)-1])
	}
	a.chunks = append(a.chunks, b)
	a.size, a.held = int64(len(b)), int64(cap(b))
	a.scratch = bytes.Buffer{}
	return a.charge()
}

func (a *encoded) raw(s string) error { return a.append([]byte(s)) }

// append copies b into the last chunk, or a new one, and charges what the
// chunks hold.
func (a *encoded) append(b []byte) error {
	n := len(a.chunks)
	if n == 0 || len(a.chunks[n-1])+len(b) > cap(a.chunks[n-1]) {
		c := make([]byte, 0, max(len(b), min(answerChunk, 2*int(a.size)+len(b))))
		a.chunks = append(a.chunks, c)
		a.held += int64(cap(c))
		n++
	}
	a.chunks[n-1] = append(a.chunks[n-1], b...)
	a.size += int64(len(b))
	return a.charge()
}

// charge takes the chunks' share of Options.MaxWritingBytes once they hold
// more than SmallAnswerBytes: what they hold, the budget at most, so that
// an answer larger than the budget goes when it is alone.
func (a *encoded) charge() error {
	if a.rec == nil || a.held <= SmallAnswerBytes {
		return nil
	}
	s := a.rec.s
	want := min(a.held, s.opts.MaxWritingBytes)
	if d := want - a.charged; d > 0 {
		if s.writing.Add(d) > s.opts.MaxWritingBytes {
			s.writing.Add(-d)
			return errOverBudget
		}
		a.charged = want
	}
	return nil
}

// release gives the answer's share back.
func (a *encoded) release() {
	if a.charged > 0 {
		a.rec.s.writing.Add(-a.charged)
		a.charged = 0
	}
}
