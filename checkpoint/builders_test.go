package checkpoint

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/roformer-go/roformer/tensor"
)

// This file builds small checkpoint files by hand for the tests and fuzz
// seeds: raw safetensors bytes, pickles opcode by opcode, torch zip archives.

// stBytes assembles a safetensors file from a header text and a data section,
// without any validation.
func stBytes(header string, body []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	out = append(out, header...)
	return append(out, body...)
}

// f32Bytes encodes values as little-endian float32.
func f32Bytes(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// pk writes a pickle opcode by opcode (opcodes as in Python's pickletools).
type pk struct{ bytes.Buffer }

func (p *pk) op(b ...byte) *pk { p.Write(b); return p }

func (p *pk) global(module, name string) *pk {
	p.WriteByte('c')
	p.WriteString(module + "\n" + name + "\n")
	return p
}

// str pushes a str with BINUNICODE.
func (p *pk) str(s string) *pk {
	p.WriteByte('X')
	p.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(s))))
	p.WriteString(s)
	return p
}

// int pushes an int with BININT (4-byte signed).
func (p *pk) int(n int) *pk {
	p.WriteByte('J')
	p.Write(binary.LittleEndian.AppendUint32(nil, uint32(int32(n))))
	return p
}

// ints pushes a tuple of ints with MARK ... TUPLE.
func (p *pk) ints(ns []int) *pk {
	p.WriteByte('(')
	for _, n := range ns {
		p.int(n)
	}
	p.WriteByte('t')
	return p
}

// ptTensor describes one state_dict entry for statePickle.
type ptTensor struct {
	name, key, storage string // storage: "FloatStorage", "HalfStorage", ...
	numel, offset      int
	shape, stride      []int // nil stride means contiguous
}

func contiguousStride(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// tensorCall pushes _rebuild_tensor_v2(storage, offset, size, stride, False,
// OrderedDict()) and reduces it, the way torch 1.13 pickles a tensor.
func (p *pk) tensorCall(t ptTensor) *pk {
	stride := t.stride
	if stride == nil {
		stride = contiguousStride(t.shape)
	}
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.op('(') // args tuple
	p.op('(').str("storage").global("torch", t.storage).str(t.key).str("cpu").int(t.numel).op('t', 'Q')
	p.int(t.offset).ints(t.shape).ints(stride)
	p.op(0x89) // NEWFALSE
	p.global("collections", "OrderedDict").op(')', 'R')
	p.op('t', 'R')
	return p
}

// statePickle builds a protocol-2 pickle of OrderedDict(name -> tensor).
func statePickle(ts []ptTensor) []byte {
	var p pk
	p.op(0x80, 2).global("collections", "OrderedDict").op(')', 'R', '(')
	for _, t := range ts {
		p.str(t.name).tensorCall(t)
	}
	p.op('u', '.')
	return p.Bytes()
}

// zipEntry is one file of a test archive.
type zipEntry struct {
	name string
	data []byte
}

// zipBytes writes entries into a zip archive, stored uncompressed like
// torch.save does.
func zipBytes(t testing.TB, entries []zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// torchZip builds a torch.save archive under folder top from a pickle and
// storage bytes by key.
func torchZip(t testing.TB, top string, pkl []byte, storages map[string][]byte) []byte {
	t.Helper()
	entries := []zipEntry{{top + "/data.pkl", pkl}}
	for k, b := range storages {
		entries = append(entries, zipEntry{top + "/data/" + k, b})
	}
	entries = append(entries, zipEntry{top + "/version", []byte("3\n")})
	return zipBytes(t, entries)
}

// encodeAs encodes float32 values in a storage dtype.
func encodeAs(dtype string, vals []float32) []byte {
	var b []byte
	le := binary.LittleEndian
	for _, v := range vals {
		switch dtype {
		case "F32":
			b = le.AppendUint32(b, math.Float32bits(v))
		case "F16":
			b = le.AppendUint16(b, tensor.F32ToF16(v))
		case "BF16":
			b = le.AppendUint16(b, tensor.F32ToBF16(v))
		case "F64":
			b = le.AppendUint64(b, math.Float64bits(float64(v)))
		case "I64":
			b = le.AppendUint64(b, uint64(int64(v)))
		default:
			panic("encodeAs: " + dtype)
		}
	}
	return b
}

// smallTorchZip is a valid two-tensor archive: "a" [2 3] and "b" [3], where
// "tied" shares a's storage.
func smallTorchZip(t testing.TB) []byte {
	pkl := statePickle([]ptTensor{
		{name: "a", key: "0", storage: "FloatStorage", numel: 6, shape: []int{2, 3}},
		{name: "b", key: "1", storage: "FloatStorage", numel: 3, shape: []int{3}},
		{name: "tied", key: "0", storage: "FloatStorage", numel: 6, shape: []int{2, 3}},
	})
	return torchZip(t, "archive", pkl, map[string][]byte{
		"0": f32Bytes(1, 2, 3, 4, 5, 6),
		"1": f32Bytes(-1, 0.5, 7),
	})
}
