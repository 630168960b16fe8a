package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// Request bodies must be UTF-8. encoding/json would replace an invalid
// byte of a string with U+FFFD without a word, and the token offsets of
// the answers would then point into text the client did not send; so
// handle (guard.go) checks the whole body with utf8.Valid, once, before
// any route decodes it, and refuses a body that is not UTF-8 with 422
// (400 on /v1/embeddings, whose errors are all 400) naming the byte
// offset and the JSON field whose string holds it.

// checkUTF8 returns nil when body is valid UTF-8, else the error that
// names the first invalid byte's offset and field.
func checkUTF8(body []byte) *apiError {
	if utf8.Valid(body) {
		return nil
	}
	off := 0
	for off < len(body) {
		r, n := utf8.DecodeRune(body[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	field := utf8Field(body, off)
	return errorf(http.StatusUnprocessableEntity, "Validation", field,
		"request body: invalid UTF-8 at byte %d (in %s); send text as UTF-8", off, describeField(field))
}

func describeField(field string) string {
	if field == "" {
		return "no JSON string"
	}
	return strconv.Quote(field)
}

// utf8Field returns the path of the JSON value whose string holds byte
// off of body ("inputs[1]", "parameters.stop[0]"; the key's own path
// when the byte is in an object's key; "$" for a top-level string), or ""
// when it is in no string the decoder reaches.
func utf8Field(body []byte, off int) string {
	type frame struct {
		obj     bool
		wantKey bool
		key     string
		idx     int
	}
	var stack []frame
	path := func() string {
		var b bytes.Buffer
		for _, f := range stack {
			if f.obj {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.idx)
			}
		}
		if b.Len() == 0 {
			return "$"
		}
		return b.String()
	}
	consumed := func() {
		if len(stack) == 0 {
			return
		}
		if top := &stack[len(stack)-1]; top.obj {
			top.wantKey = true
		} else {
			top.idx++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		end := dec.InputOffset()
		str, isStr := tok.(string)
		isKey := isStr && len(stack) > 0 && stack[len(stack)-1].obj && stack[len(stack)-1].wantKey
		if isStr && end > int64(off) && start <= int64(off) {
			if isKey {
				stack[len(stack)-1].key = str
			}
			return path()
		}
		switch {
		case (tok == json.Delim('{') || tok == json.Delim('[')) && len(stack) >= maxFieldDepth:
			return "" // too deep to name a field; the offset is named
		case tok == json.Delim('{'):
			stack = append(stack, frame{obj: true, wantKey: true})
		case tok == json.Delim('['):
			stack = append(stack, frame{})
		case tok == json.Delim('}') || tok == json.Delim(']'):
			stack = stack[:len(stack)-1]
			consumed()
		case isKey:
			stack[len(stack)-1].key, stack[len(stack)-1].wantKey = str, false
		default:
			consumed()
		}
		if end > int64(off) {
			return ""
		}
	}
}

// maxFieldDepth bounds the nesting utf8Field follows to name the field of
// an invalid byte: past it only the offset is named, so that a body of
// nested brackets costs no more than its bytes to refuse.
const maxFieldDepth = 64
