package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/roformer-go/roformer/tensor"
)

// MaxSafetensorsHeader is the largest JSON header ParseSafetensors accepts, in
// bytes. The safetensors library uses the same 100 MB bound.
const MaxSafetensorsHeader = 100 << 20

// metadataKey is the reserved header key holding the string-to-string map.
const metadataKey = "__metadata__"

// ReadSafetensors reads a .safetensors file; see ParseSafetensors. The
// header is read, checked and then each tensor is decoded from the file in
// chunks, so the file is never held in memory beside its float32 values.
// A path that is not a regular file after symlinks are followed (a named
// pipe, a device, a directory) is refused before it is opened, with an
// error naming it (a *boundedfile.NotRegularError).
func ReadSafetensors(path string) (*File, error) {
	return readSized(path, parseSafetensors)
}

// stHeaderEntry is one tensor's record in a safetensors header. Pointers tell
// a missing field from a zero one.
type stHeaderEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// stTensor is a validated header entry.
type stTensor struct {
	name       string
	dtype      string
	shape      []int64
	n          int64
	begin, end int64
}

// ParseSafetensors decodes a safetensors file held in data; name is used as
// File.Path and in error messages.
//
// Layout (huggingface/safetensors, docs "Format"): an 8-byte little-endian
// unsigned header length N, N bytes of UTF-8 JSON, then the data section.
// The JSON object maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]}, offsets in bytes relative to the data section, plus an
// optional "__metadata__" map of strings. Like the reference implementation,
// the tensors must tile the data section exactly: no overlaps, no gaps, no
// trailing bytes. Every violation returns an error wrapping ErrFormat (or
// ErrUnsupportedDType) that names the file, the tensor and the numbers.
func ParseSafetensors(data []byte, name string) (*File, error) {
	return parseSafetensors(bytes.NewReader(data), int64(len(data)), name)
}

// parseSafetensors reads the size-byte safetensors file r within the
// memory budget of its size.
func parseSafetensors(r io.ReaderAt, size int64, name string) (*File, error) {
	return parseSafetensorsWithin(r, size, name, newBudget(size), nil)
}

// parseSafetensorsWithin reads the size-byte safetensors file r, its
// allocations taken from bud (the shards of one checkpoint share one
// budget). mem, when not nil, is r's bytes mapped into memory: the
// entries then point into it (see MapDir) instead of being decoded.
func parseSafetensorsWithin(r io.ReaderAt, size int64, name string, bud *budget, mem []byte) (*File, error) {
	if size < 8 {
		return nil, formatErr(name, "file is %d bytes, too short for the 8-byte header length (truncated?)", size)
	}
	var lenbuf [8]byte
	if _, err := r.ReadAt(lenbuf[:], 0); err != nil {
		return nil, formatErr(name, "reading the header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(lenbuf[:])
	rest := uint64(size - 8)
	if n > MaxSafetensorsHeader {
		return nil, formatErr(name, "header length %d is larger than the %d-byte limit", n, MaxSafetensorsHeader)
	}
	if n > rest {
		return nil, formatErr(name, "header length %d is larger than the %d bytes that follow it (truncated?)", n, rest)
	}
	header := make([]byte, n)
	if _, err := r.ReadAt(header, 8); err != nil {
		return nil, formatErr(name, "reading the %d-byte header: %v", n, err)
	}
	bodyOff := 8 + int64(n)
	bodyLen := size - bodyOff

	if !utf8.Valid(header) {
		return nil, formatErr(name, "JSON header (%d bytes) is not valid UTF-8", len(header))
	}
	meta, entries, err := parseSTHeader(header, name, bud)
	if err != nil {
		return nil, err
	}
	tensors := make([]stTensor, 0, len(entries))
	for _, e := range entries {
		t, err := validateSTEntry(e.name, e.raw, bodyLen, name)
		if err != nil {
			return nil, err
		}
		tensors = append(tensors, t)
	}
	if err := checkTiling(tensors, bodyLen, name); err != nil {
		return nil, err
	}

	// The tensors tile the data section, so their float32 values take at
	// most 4 bytes per stored byte, within the budget unless the header
	// has used it.
	f := newFile(name, FormatSafetensors)
	f.Metadata = meta
	if mem != nil {
		f.maps = append(f.maps, mem)
		for _, t := range tensors {
			f.Tensors[t.name] = mappedEntry(t, mem[bodyOff+t.begin:bodyOff+t.end:bodyOff+t.end])
		}
		f.sortNames()
		return f, nil
	}
	var scratch []byte
	for _, t := range tensors {
		if !bud.take(4 * t.n) {
			return nil, formatErr(name, "tensor %q: %v", t.name, bud.refuse(4*t.n, fmt.Sprintf("converting %d %s elements to float32", t.n, t.dtype)))
		}
		vals := make([]float32, t.n)
		if t.n == 0 {
			f.Tensors[t.name] = &Entry{Name: t.name, DType: t.dtype, Shape: intShape(t.shape), Data: vals}
			continue
		}
		if err := decodeFrom(vals, t.dtype, io.NewSectionReader(r, bodyOff+t.begin, t.end-t.begin), &scratch); err != nil {
			var ve valueError
			if errors.As(err, &ve) {
				return nil, fmt.Errorf("checkpoint: %s: tensor %q: %w", name, t.name, err)
			}
			return nil, formatErr(name, "tensor %q: data_offsets [%d, %d]: %v", t.name, t.begin, t.end, err)
		}
		f.Tensors[t.name] = &Entry{Name: t.name, DType: t.dtype, Shape: intShape(t.shape), Data: vals}
	}
	f.sortNames()
	return f, nil
}

type rawEntry struct {
	name string
	raw  json.RawMessage
}

// stEntryCost is what one header record costs to parse and hold, in bytes:
// the decoder's garbage, the validated record, its Entry and map slots
// (measured at about 1,300 by TestHostileSafetensors). A header of empty
// tensors costs about 25 bytes per byte of header, so the records are
// charged to the memory budget as they are read.
const stEntryCost = 2048

// parseSTHeader splits the JSON header into the metadata map and the tensor
// records, refusing duplicate keys (encoding/json would keep the last one)
// and more records than the budget bud pays for.
func parseSTHeader(header []byte, file string, bud *budget) (map[string]string, []rawEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	jsonErr := func(err error) error {
		return formatErr(file, "invalid JSON header (%d bytes): %v", len(header), err)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, jsonErr(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, formatErr(file, "JSON header is not an object (starts with %v)", tok)
	}
	meta := map[string]string{}
	seen := map[string]bool{}
	var entries []rawEntry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, jsonErr(err)
		}
		key, _ := tok.(string) // object keys are always strings
		if key == "" {
			return nil, nil, formatErr(file, "header has a tensor with an empty name")
		}
		if seen[key] {
			return nil, nil, formatErr(file, "header has key %q twice", key)
		}
		seen[key] = true
		if !bud.take(stEntryCost) {
			return nil, nil, formatErr(file, "header record %d (%q): %v", len(seen), clip(key),
				bud.refuse(stEntryCost, fmt.Sprintf("a header of %d bytes listing more than %d tensors", len(header), len(seen)-1)))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, jsonErr(err)
		}
		if key == metadataKey {
			var m map[string]string
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, nil, formatErr(file, "%s must map strings to strings: %v", metadataKey, err)
			}
			for k, v := range m {
				meta[k] = v
			}
			continue
		}
		entries = append(entries, rawEntry{key, raw})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, nil, jsonErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, formatErr(file, "invalid JSON header: data after the closing brace")
	}
	return meta, entries, nil
}

// validateSTEntry checks one header record against the data section length.
func validateSTEntry(tname string, raw json.RawMessage, bodyLen int64, file string) (stTensor, error) {
	bad := func(format string, args ...any) (stTensor, error) {
		return stTensor{}, formatErr(file, "tensor %q: %s", tname, fmt.Sprintf(format, args...))
	}
	var h stHeaderEntry
	if err := json.Unmarshal(raw, &h); err != nil {
		return bad("bad header record %s: %v", clip(string(raw)), err)
	}
	switch {
	case h.DType == nil:
		return bad("header record has no dtype")
	case h.Shape == nil:
		return bad("header record has no shape")
	case h.DataOffsets == nil:
		return bad("header record has no data_offsets")
	}
	t := stTensor{name: tname, dtype: *h.DType, shape: *h.Shape}
	if len(t.shape) > maxDims {
		return bad("shape has %d dimensions, more than %d", len(t.shape), maxDims)
	}
	size := dtypeSizes[t.dtype]
	if size == 0 {
		return stTensor{}, fmt.Errorf("checkpoint: %s: tensor %q: %w %q (supported: %s)",
			file, tname, ErrUnsupportedDType, t.dtype, strings.Join(supportedDTypes(), ", "))
	}
	n, err := numel(t.shape, size)
	if err != nil {
		return bad("%v", err)
	}
	t.n = n
	off := *h.DataOffsets
	if len(off) != 2 {
		return bad("data_offsets %v must hold exactly [begin, end]", off)
	}
	t.begin, t.end = off[0], off[1]
	switch {
	case t.begin < 0 || t.end < 0:
		return bad("data_offsets %v are negative", off)
	case t.end < t.begin:
		return bad("data_offsets [%d, %d] end before they begin", t.begin, t.end)
	case t.end > bodyLen:
		return bad("data_offsets [%d, %d] run past the %d-byte data section (truncated?)", t.begin, t.end, bodyLen)
	case t.end-t.begin != n*int64(size):
		return bad("data_offsets [%d, %d] hold %d bytes, shape %v %s needs %d",
			t.begin, t.end, t.end-t.begin, t.shape, t.dtype, n*int64(size))
	}
	return t, nil
}

// checkTiling verifies that the tensors cover [0, bodyLen) exactly once.
func checkTiling(ts []stTensor, bodyLen int64, file string) error {
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ta, tb := ts[order[a]], ts[order[b]]
		if ta.begin != tb.begin {
			return ta.begin < tb.begin
		}
		if ta.end != tb.end {
			return ta.end < tb.end
		}
		return ta.name < tb.name
	})
	var pos int64
	prev := -1
	for _, i := range order {
		t := ts[i]
		if t.begin < pos {
			p := ts[prev]
			return formatErr(file, "tensor %q data_offsets [%d, %d] overlap tensor %q [%d, %d]",
				t.name, t.begin, t.end, p.name, p.begin, p.end)
		}
		if t.begin > pos {
			return formatErr(file, "tensor %q data_offsets [%d, %d] leave a gap of %d bytes after offset %d",
				t.name, t.begin, t.end, t.begin-pos, pos)
		}
		if t.end > t.begin || prev < 0 {
			prev = i
		}
		pos = t.end
	}
	if pos != bodyLen {
		return formatErr(file, "tensors cover %d bytes but the data section holds %d", pos, bodyLen)
	}
	return nil
}

// clip shortens s for an error message.
func clip(s string) string { return clipN(s, 80) }

// clipN shortens s to at most max bytes plus an ellipsis.
func clipN(s string, max int) string {
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// writableDTypes are the element types WriteSafetensors can store.
var writableDTypes = map[string]bool{"F32": true, "F16": true, "BF16": true}

// safetensorsWritable are the dtypes WriteSafetensors writes: the
// floating ones, and I8 for the codes of quantized weights (each value an
// integer in [-128, 127]).
var safetensorsWritable = map[string]bool{"F32": true, "F16": true, "BF16": true, "I8": true}

// WriteSafetensors writes entries to path in the safetensors format (see
// ParseSafetensors), atomically.
//
// Each entry is stored as its DType: "F32" (or empty), "F16", "BF16" or
// "I8"; F16 and BF16 values are rounded to nearest even by tensor.F32ToF16
// and tensor.F32ToBF16, I8 values must be integers in [-128, 127]. An entry
// without Data is written from Raw, its little-endian bytes in DType, as
// they are. Tensors are written wider dtypes first, then in name order
// (each starts aligned for its dtype), contiguously;
// metadata becomes "__metadata__" (omitted when empty). The JSON header is
// padded with spaces so that the data section starts at a multiple of 8.
//
// The file is written to a temporary file in the same directory, synced,
// renamed over path and the directory synced. On any error path is left as it
// was and the temporary file is removed. Entries are validated (unique
// non-empty names, non-negative shapes, len(Data), or Raw's bytes, equal to
// the product of Shape) before anything is created.
func WriteSafetensors(path string, entries []*Entry, metadata map[string]string) error {
	header, sorted, err := safetensorsHeader(entries, metadata, path)
	if err != nil {
		return err
	}
	return writeAtomic(path, func(w io.Writer) error { return writeSafetensorsTo(w, header, sorted) })
}

// writeSafetensorsTo writes the length prefix, the header and the data of
// the sorted, validated entries.
func writeSafetensorsTo(w io.Writer, header []byte, sorted []*Entry) error {
	var lenbuf [8]byte
	binary.LittleEndian.PutUint64(lenbuf[:], uint64(len(header)))
	if _, err := w.Write(lenbuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(header); err != nil {
		return err
	}
	var buf []byte
	for _, e := range sorted {
		if e.Data == nil {
			if _, err := w.Write(e.Raw); err != nil {
				return err
			}
			continue
		}
		buf = encodeValues(buf[:0], dtypeOrF32(e.DType), e.Data)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

func dtypeOrF32(d string) string {
	if d == "" {
		return "F32"
	}
	return d
}

// safetensorsHeader validates entries and returns the padded JSON header and
// the entries in sorted order.
func safetensorsHeader(entries []*Entry, metadata map[string]string, file string) ([]byte, []*Entry, error) {
	sorted := make([]*Entry, 0, len(entries))
	seen := map[string]bool{}
	for i, e := range entries {
		if e == nil {
			return nil, nil, fmt.Errorf("checkpoint: %s: entry %d is nil", file, i)
		}
		switch {
		case e.Name == "":
			return nil, nil, fmt.Errorf("checkpoint: %s: entry %d has an empty name", file, i)
		case e.Name == metadataKey:
			return nil, nil, fmt.Errorf("checkpoint: %s: tensor name %q is reserved", file, e.Name)
		case seen[e.Name]:
			return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q appears twice", file, e.Name)
		case !utf8.ValidString(e.Name):
			return nil, nil, fmt.Errorf("checkpoint: %s: tensor name %q is not valid UTF-8", file, e.Name)
		}
		seen[e.Name] = true
		dt := dtypeOrF32(e.DType)
		if !safetensorsWritable[dt] {
			return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: cannot write %w %q (want F32, F16, BF16 or I8)",
				file, e.Name, ErrUnsupportedDType, e.DType)
		}
		shape := make([]int64, len(e.Shape))
		for j, d := range e.Shape {
			shape[j] = int64(d)
		}
		n, err := numel(shape, dtypeSizes[dt])
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: %v", file, e.Name, err)
		}
		if e.Data == nil && e.Raw != nil {
			// Written as stored: the bytes must be the shape's.
			if int64(len(e.Raw)) != n*int64(dtypeSizes[dt]) {
				return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: %s shape %v needs %d bytes, Raw has %d",
					file, e.Name, dt, e.Shape, n*int64(dtypeSizes[dt]), len(e.Raw))
			}
			sorted = append(sorted, e)
			continue
		}
		if dt == "I8" {
			for i, v := range e.Data {
				if v != float32(int8(v)) || v < -128 || v > 127 {
					return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: I8 value %v at index %d is not an integer in [-128, 127]", file, e.Name, v, i)
				}
			}
		}
		if int64(len(e.Data)) != n {
			return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: shape %v needs %d values, Data has %d",
				file, e.Name, e.Shape, n, len(e.Data))
		}
		sorted = append(sorted, e)
	}
	// Wider elements first, then by name (as the safetensors library
	// orders them): each tensor then starts aligned for its dtype.
	sort.Slice(sorted, func(a, b int) bool {
		da, db := dtypeSizes[dtypeOrF32(sorted[a].DType)], dtypeSizes[dtypeOrF32(sorted[b].DType)]
		if da != db {
			return da > db
		}
		return sorted[a].Name < sorted[b].Name
	})
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, nil, fmt.Errorf("checkpoint: %s: metadata %q: %q is not valid UTF-8", file, k, v)
		}
	}

	var h bytes.Buffer
	h.WriteByte('{')
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		writeJSONString(&h, metadataKey)
		h.WriteString(":{")
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			writeJSONString(&h, k)
			h.WriteByte(':')
			writeJSONString(&h, metadata[k])
		}
		h.WriteByte('}')
	}
	var off int64
	for i, e := range sorted {
		if i > 0 || len(metadata) > 0 {
			h.WriteByte(',')
		}
		dt := dtypeOrF32(e.DType)
		size := int64(len(e.Data)) * int64(dtypeSizes[dt])
		if e.Data == nil {
			size = int64(len(e.Raw))
		}
		writeJSONString(&h, e.Name)
		fmt.Fprintf(&h, `:{"dtype":%q,"shape":[`, dt)
		for j, d := range e.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			fmt.Fprintf(&h, "%d", d)
		}
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, off, off+size)
		off += size
	}
	h.WriteByte('}')
	for (8+h.Len())%8 != 0 {
		h.WriteByte(' ')
	}
	return h.Bytes(), sorted, nil
}

// writeJSONString writes s as a JSON string without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes; bytes.Buffer never fails
	b.Truncate(b.Len() - 1)
}

// encodeValues appends data encoded as little-endian dtype to buf.
func encodeValues(buf []byte, dtype string, data []float32) []byte {
	le := binary.LittleEndian
	for _, v := range data {
		switch dtype {
		case "F16":
			buf = le.AppendUint16(buf, tensor.F32ToF16(v))
		case "BF16":
			buf = le.AppendUint16(buf, tensor.F32ToBF16(v))
		case "I8":
			buf = append(buf, byte(int8(v)))
		default:
			buf = le.AppendUint32(buf, math.Float32bits(v))
		}
	}
	return buf
}
