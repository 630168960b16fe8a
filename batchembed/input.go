package batchembed

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/roformer-go/roformer/internal/lines"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tokenizer"
)

// Input is one line of an input file.
type Input struct {
	pipeline.EmbedInput
	// ID is the line's "id", compacted JSON (a string or a number), or nil.
	ID json.RawMessage
}

// ParseLine reads one input line: {"text": …} with optional "text_pair"
// and "id", or a JSON string. Surrounding white space (a CR too) is ignored.
func ParseLine(line []byte) (Input, error) {
	line = bytes.TrimSpace(line)
	switch {
	case len(line) == 0:
		return Input{}, errors.New(`the line is empty (want {"text": …} or a JSON string)`)
	case line[0] == '"':
		var s string
		if err := json.Unmarshal(line, &s); err != nil {
			return Input{}, fmt.Errorf("not a JSON string: %w", err)
		}
		return Input{EmbedInput: pipeline.EmbedInput{Text: s}}, nil
	case line[0] != '{':
		return Input{}, errors.New(`want a JSON object {"text": …} or a JSON string`)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return Input{}, fmt.Errorf("not a JSON object: %w", err)
	}
	var in Input
	raw, ok := fields["text"]
	if !ok {
		return Input{}, errors.New(`no "text"`)
	}
	if err := json.Unmarshal(raw, &in.Text); err != nil || raw[0] != '"' {
		return Input{}, fmt.Errorf(`"text" is %s, want a string`, kind(raw))
	}
	if raw, ok := fields["text_pair"]; ok && string(raw) != "null" {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || raw[0] != '"' {
			return Input{}, fmt.Errorf(`"text_pair" is %s, want a string`, kind(raw))
		}
		in.TextPair = &s
	}
	if raw, ok := fields["id"]; ok && string(raw) != "null" {
		if raw[0] != '"' && raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return Input{}, fmt.Errorf(`"id" is %s, want a string or a number`, kind(raw))
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return Input{}, fmt.Errorf(`"id": %w`, err)
		}
		in.ID = b.Bytes()
	}
	return in, nil
}

// kind names the JSON type of raw (valid JSON) for an error message.
func kind(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// inputInfo is what a pass over the input found.
type inputInfo struct {
	bytes     int64
	sha256    string
	lines     int
	tokens    int     // of every line, [CLS] and [SEP] included
	truncated int     // lines cut to the max length
	starts    []int64 // the byte offset of each part's first line
}

// scan reads the whole input: it checks every line (it parses and encodes
// each, so an input too long for o is found before any work), hashes the
// bytes and notes where each part of window lines starts. A line is at
// most maxLineBytes (see Options.MaxLineBytes) and valid UTF-8.
func scan(path string, tok *tokenizer.Tokenizer, o pipeline.EmbedOptions, window, maxLineBytes int) (inputInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return inputInfo{}, fmt.Errorf("batchembed: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	lr := lines.NewReader(io.TeeReader(f, h), path, maxLineBytes)
	var info inputInfo
	for {
		start := lr.Offset()
		line, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return inputInfo{}, fmt.Errorf("batchembed: %w", err)
		}
		if info.lines%window == 0 {
			info.starts = append(info.starts, start)
		}
		in, err := ParseLine(line)
		if err == nil {
			var row pipeline.EmbedRow
			row, err = pipeline.EncodeEmbedInput(tok, in.EmbedInput, o)
			info.tokens += len(row.IDs)
			if row.Truncated {
				info.truncated++
			}
		}
		if err != nil {
			return inputInfo{}, fmt.Errorf("batchembed: %s:%d: %w", path, lr.Line(), err)
		}
		info.lines++
	}
	info.bytes = lr.Offset()
	info.sha256 = hex.EncodeToString(h.Sum(nil))
	return info, nil
}

// countLines returns the number of lines of a file (a last line without
// its end of line counts).
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("batchembed: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	n, last := 0, byte('\n')
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte("\n"))
		if k > 0 {
			last = buf[k-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("batchembed: reading %s: %w", path, err)
		}
	}
	if last != '\n' {
		n++
	}
	return n, nil
}

// readPart returns the n lines of the input that start at byte off, parsed.
func readPart(path string, off int64, n, maxLineBytes int) ([]Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("batchembed: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, fmt.Errorf("batchembed: %s: %w", path, err)
	}
	lr := lines.NewReader(f, path, maxLineBytes)
	ins := make([]Input, n)
	for i := range ins {
		line, err := lr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("batchembed: %s ended %d lines into the part at byte %d, before its %d lines: did the file change during the run?", path, i, off, n)
		}
		if err != nil {
			return nil, fmt.Errorf("batchembed: the part at byte %d: %w (did the file change during the run?)", off, err)
		}
		if ins[i], err = ParseLine(line); err != nil {
			return nil, fmt.Errorf("batchembed: %s, the part at byte %d, its line %d: %w (did the file change during the run?)", path, off, i+1, err)
		}
	}
	return ins, nil
}
