package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/roformer-go/roformer/internal/boundedfile"
	"github.com/roformer-go/roformer/tensor"
)

// Entry is one stored tensor, converted to float32.
//
// DType names the element type as it was stored, in safetensors spelling
// ("F32", "F16", "BF16", "F64", "I64", ...); Data always holds float32 values
// in row-major (C) order, len(Data) == product of Shape (1 for a scalar).
// Entries read from a torch archive that view one storage (tied weights)
// share its memory: their Data are capacity-limited subslices of one slice,
// so a caller that modifies Data in place and needs them independent
// copies first.
type Entry struct {
	Name  string
	DType string
	Shape []int
	Data  []float32
	// Raw holds the stored little-endian bytes in a File that MapDir
	// read, and is nil otherwise. There Data is nil for a tensor that is
	// not float32 (or not aligned for it) until Float32 decodes it.
	// WriteSafetensors writes Raw as it is for an entry without Data.
	Raw []byte
}

// File is the set of tensors read from one checkpoint, possibly sharded.
//
// Format is "safetensors" or "pytorch". Metadata holds the safetensors
// "__metadata__" map, or the "metadata" object of a sharded index (non-string
// values as their JSON text); it is never nil. Names lists the keys of Tensors
// in sorted order.
type File struct {
	Path     string
	Format   string
	Metadata map[string]string
	Tensors  map[string]*Entry
	Names    []string

	maps [][]byte // the files MapDir mapped
}

// Format names used in File.Format.
const (
	FormatSafetensors = "safetensors"
	FormatPyTorch     = "pytorch"
)

// Sentinel errors that callers may test with errors.Is.
var (
	// ErrFormat marks a file that is malformed: truncated, inconsistent
	// offsets or sizes, bad JSON, a pickle that is not a state_dict.
	ErrFormat = errors.New("malformed checkpoint")
	// ErrUnsupportedDType marks a well-formed tensor whose element type this
	// package does not convert (for example F8_E4M3 or an unknown name).
	ErrUnsupportedDType = errors.New("unsupported dtype")
	// ErrUnsafe marks a pickle that asks for a global outside the allowlist.
	ErrUnsafe = errors.New("unsafe pickle")
)

// formatErr builds "checkpoint: FILE: MESSAGE" wrapping ErrFormat.
func formatErr(file, format string, args ...any) error {
	return fmt.Errorf("checkpoint: %s: %s: %w", file, fmt.Sprintf(format, args...), ErrFormat)
}

// dtypeSizes maps every safetensors dtype this package converts to its size in
// bytes. Integer and bool tensors are converted exactly or refused (see
// decode); F8 and other exotic types are not listed and are refused.
var dtypeSizes = map[string]int{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1,
	"U64": 8, "U32": 4, "U16": 2, "U8": 1,
	"BOOL": 1,
}

// supportedDTypes is the sorted list used in error messages.
func supportedDTypes() []string {
	names := make([]string, 0, len(dtypeSizes))
	for k := range dtypeSizes {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// maxInt is the largest element or byte count this package accepts.
const maxInt = math.MaxInt64

// numel returns the product of shape, refusing negative dimensions and
// products (or byte sizes, with itemsize) that overflow int64.
func numel(shape []int64, itemsize int) (n int64, err error) {
	n = 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d in shape %v", d, shape)
		}
		if d == 0 {
			n = 0
		}
	}
	if n == 0 {
		return 0, nil
	}
	for _, d := range shape {
		if n > maxInt/d {
			return 0, fmt.Errorf("shape %v has more than %d elements", shape, int64(maxInt))
		}
		n *= d
	}
	if n > maxInt/int64(itemsize) {
		return 0, fmt.Errorf("shape %v with %d-byte elements needs more than %d bytes", shape, itemsize, int64(maxInt))
	}
	return n, nil
}

// decode converts n little-endian elements of dtype from raw into float32.
// Floating types are converted exactly (F64 rounds to nearest); integer and
// bool types are converted only when every value is exactly representable in
// float32, otherwise an error names the first offending index and value.
func decode(dtype string, raw []byte, n int) ([]float32, error) {
	size := dtypeSizes[dtype]
	if size == 0 {
		return nil, fmt.Errorf("%w %s", ErrUnsupportedDType, dtype)
	}
	if int64(len(raw)) != int64(n)*int64(size) {
		return nil, fmt.Errorf("have %d bytes for %d %s elements, need %d", len(raw), n, dtype, int64(n)*int64(size))
	}
	out := make([]float32, n)
	if err := decodeInto(out, dtype, raw, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// decodeChunk is the number of bytes decodeFrom reads at a time.
const decodeChunk = 1 << 16

// decodeFrom fills out with len(out) little-endian elements of dtype read
// from r, decodeChunk bytes at a time, so that the raw bytes are never held
// whole beside their float32 values. The caller has checked that r holds
// exactly len(out) elements; a short read is an error. scratch, when
// non-nil, holds a buffer reused across calls.
func decodeFrom(out []float32, dtype string, r io.Reader, scratch *[]byte) error {
	size := dtypeSizes[dtype]
	if size == 0 {
		return fmt.Errorf("%w %s", ErrUnsupportedDType, dtype)
	}
	per := decodeChunk / size
	var buf []byte
	if scratch != nil {
		buf = *scratch
	}
	if need := min(len(out), per) * size; len(buf) < need {
		if scratch != nil { // a full-size buffer, kept for the next call
			buf = make([]byte, per*size)
			*scratch = buf
		} else {
			buf = make([]byte, need)
		}
	}
	for base := 0; base < len(out); base += per {
		k := min(per, len(out)-base)
		raw := buf[:k*size]
		if n, err := io.ReadFull(r, raw); err != nil {
			return fmt.Errorf("read %d of %d bytes: %w", int64(base)*int64(size)+int64(n), int64(len(out))*int64(size), err)
		}
		if err := decodeInto(out[base:base+k], dtype, raw, base); err != nil {
			return valueError{err}
		}
	}
	return nil
}

// decodeInto converts len(out) elements of dtype from raw (exactly
// len(out)*size bytes) into out; base is the index of out[0] in the whole
// tensor, used in error messages.
func decodeInto(out []float32, dtype string, raw []byte, base int) error {
	le := binary.LittleEndian
	switch dtype {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
	case "F16":
		for i := range out {
			out[i] = tensor.F16ToF32(le.Uint16(raw[2*i:]))
		}
	case "BF16":
		for i := range out {
			out[i] = tensor.BF16ToF32(le.Uint16(raw[2*i:]))
		}
	case "F64":
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(raw[8*i:])))
		}
	case "BOOL":
		for i := range out {
			switch raw[i] {
			case 0:
				out[i] = 0
			case 1:
				out[i] = 1
			default:
				return fmt.Errorf("BOOL value %d at index %d is not 0 or 1", raw[i], base+i)
			}
		}
	case "U8", "I8", "U16", "I16":
		// Every 8- and 16-bit integer is exact in float32.
		for i := range out {
			switch dtype {
			case "U8":
				out[i] = float32(raw[i])
			case "I8":
				out[i] = float32(int8(raw[i]))
			case "U16":
				out[i] = float32(le.Uint16(raw[2*i:]))
			case "I16":
				out[i] = float32(int16(le.Uint16(raw[2*i:])))
			}
		}
	case "I32", "I64":
		for i := range out {
			var v int64
			if dtype == "I32" {
				v = int64(int32(le.Uint32(raw[4*i:])))
			} else {
				v = int64(le.Uint64(raw[8*i:]))
			}
			f := float32(v)
			if f >= 0x1p63 || f < -0x1p63 || int64(f) != v {
				return fmt.Errorf("%s value %d at index %d is not exactly representable as float32", dtype, v, base+i)
			}
			out[i] = f
		}
	case "U32", "U64":
		for i := range out {
			var v uint64
			if dtype == "U32" {
				v = uint64(le.Uint32(raw[4*i:]))
			} else {
				v = le.Uint64(raw[8*i:])
			}
			f := float32(v)
			if f >= 0x1p64 || uint64(f) != v {
				return fmt.Errorf("%s value %d at index %d is not exactly representable as float32", dtype, v, base+i)
			}
			out[i] = f
		}
	default:
		return fmt.Errorf("%w %s", ErrUnsupportedDType, dtype)
	}
	return nil
}

// Memory budget. A reader allocates at most memoryBudget(size) bytes for a
// file of size bytes: the float32 values it returns (each stored element
// decoded once, plus the copies that non-contiguous views need) and, for
// torch archives, the pickle machine's own allocations. Four bytes per byte
// of file is what a file of 1-byte elements (U8, I8, BOOL) needs once
// converted to float32; an F32 checkpoint uses a quarter of it, F16 or BF16
// half. The constant leaves room for small files and the pickle machine.
const (
	budgetPerByte = 4
	budgetBase    = 128 << 20
)

// memoryBudget returns the most bytes a reader of this package allocates
// for a checkpoint file of size bytes: 4 × size + 128 MiB. A file that
// would need more (a view copied thousands of times, a zip entry that
// decompresses far beyond its size) is refused with an error that names the
// tensor and the numbers. It does not count a file's bytes that the caller
// already holds (ParseSafetensors, ParsePyTorch).
func memoryBudget(size int64) int64 {
	if size < 0 {
		size = 0
	}
	if size > (math.MaxInt64-budgetBase)/budgetPerByte {
		return math.MaxInt64
	}
	return budgetPerByte*size + budgetBase
}

// budget tracks the bytes a reader still may allocate.
type budget struct {
	limit, used int64
}

func newBudget(fileSize int64) *budget { return &budget{limit: memoryBudget(fileSize)} }

// take reserves n bytes and reports whether they fit.
func (b *budget) take(n int64) bool {
	if n < 0 || n > b.limit-b.used {
		return false
	}
	b.used += n
	return true
}

// refuse is the error for an allocation of n bytes, named by what, that
// take refused.
func (b *budget) refuse(n int64, what string) error {
	return fmt.Errorf("%s needs %d bytes, but only %d of the %d-byte memory budget (4 × file size + 128 MiB) remain",
		what, n, b.limit-b.used, b.limit)
}

// TensorMap returns the file's tensors by name as model binders take them
// (roformer's Model.Bind): each *tensor.Tensor shares its Entry's Shape and
// Data, nothing is copied. It is the one conversion from a checkpoint to
// what a binder reads.
func (f *File) TensorMap() map[string]*tensor.Tensor {
	m := make(map[string]*tensor.Tensor, len(f.Tensors))
	for name, e := range f.Tensors {
		m[name] = &tensor.Tensor{Shape: e.Shape, Data: e.Data}
	}
	return m
}

// newFile returns an empty File with non-nil maps.
func newFile(path, format string) *File {
	return &File{Path: path, Format: format, Metadata: map[string]string{}, Tensors: map[string]*Entry{}}
}

// sortNames fills f.Names from f.Tensors.
func (f *File) sortNames() {
	f.Names = f.Names[:0]
	for name := range f.Tensors {
		f.Names = append(f.Names, name)
	}
	sort.Strings(f.Names)
}

// intShape converts a validated int64 shape to []int.
func intShape(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

// readSized opens the file at path and parses it with parse, which reads
// it in place through an io.ReaderAt of the file's size (never whole into
// memory): the opening of ReadPyTorch and ReadSafetensors. A path that
// is not a regular file (a named pipe, a device, a directory) is refused
// before it is opened (boundedfile.Open).
func readSized(path string, parse func(r io.ReaderAt, size int64, name string) (*File, error)) (*File, error) {
	fh, st, err := boundedfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer fh.Close()
	return parse(fh, st.Size(), path)
}
