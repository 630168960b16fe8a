package checkpoint

import (
	"archive/zip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// torchArchive is the top folder of the archives WritePyTorch writes, the
// name torch.save gives it.
const torchArchive = "archive"

// torchAlign is the byte boundary at which WritePyTorch starts every zip
// entry's data, as torch.save does (so that a reader may map storages in
// place). torch.load does not need it.
const torchAlign = 64

// padExtraID is the id of the zip extra field that pads a local header to
// torchAlign; readers skip extra fields they do not know.
const padExtraID = 0x5a50 // "PZ"

// storageNames maps the dtypes WritePyTorch stores to torch's storage
// classes (the inverse of torchStorages for writableDTypes).
var storageNames = map[string]string{"F32": "FloatStorage", "F16": "HalfStorage", "BF16": "BFloat16Storage"}

// WritePyTorch writes entries to path as a torch.save zip archive (the
// format of torch >= 1.6, read by ParsePyTorch and by torch.load, with
// weights_only=True too), atomically: the pytorch_model.bin of a Hugging
// Face or sentence-transformers folder.
//
// The archive's folder is "archive". It holds data.pkl, a protocol-2 pickle
// of a collections.OrderedDict mapping each name, in the order of entries,
// to torch._utils._rebuild_tensor_v2(storage, 0, size, stride, False,
// OrderedDict()) with row-major strides; byteorder ("little"); one storage
// per tensor, data/<i> for entry i, whose persistent id is ('storage',
// torch.FloatStorage, "<i>", 'cpu', numel); and version ("3\n"). Entries
// are stored uncompressed, each one's data starting at a multiple of 64
// bytes as torch.save writes them.
//
// Each entry is stored as its DType: "F32" (or empty) as torch.FloatStorage,
// "F16" as torch.HalfStorage and "BF16" as torch.BFloat16Storage, rounded to
// nearest even by tensor.F32ToF16 and tensor.F32ToBF16; other dtypes are
// refused with ErrUnsupportedDType. Entries are validated (non-nil, unique
// non-empty valid UTF-8 names, non-negative shapes, len(Data) equal to the
// product of Shape) before anything is created. The file is written as
// WriteSafetensors writes its: on any error path is left as it was.
func WritePyTorch(path string, entries []*Entry) error {
	if err := checkWriteEntries(entries, path); err != nil {
		return err
	}
	return writeAtomic(path, func(w io.Writer) error { return writePyTorchTo(w, entries) })
}

// checkWriteEntries validates entries for WritePyTorch; file names the
// destination in errors.
func checkWriteEntries(entries []*Entry, file string) error {
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		if e == nil {
			return fmt.Errorf("checkpoint: %s: entry %d is nil", file, i)
		}
		switch {
		case e.Name == "":
			return fmt.Errorf("checkpoint: %s: entry %d has an empty name", file, i)
		case seen[e.Name]:
			return fmt.Errorf("checkpoint: %s: tensor %q appears twice", file, e.Name)
		case !utf8.ValidString(e.Name):
			return fmt.Errorf("checkpoint: %s: tensor name %q is not valid UTF-8", file, e.Name)
		}
		seen[e.Name] = true
		dt := dtypeOrF32(e.DType)
		if !writableDTypes[dt] {
			return fmt.Errorf("checkpoint: %s: tensor %q: cannot write %w %q (want F32, F16 or BF16)",
				file, e.Name, ErrUnsupportedDType, e.DType)
		}
		if len(e.Shape) > maxDims {
			return fmt.Errorf("checkpoint: %s: tensor %q: shape has %d dimensions, more than %d", file, e.Name, len(e.Shape), maxDims)
		}
		shape := make([]int64, len(e.Shape))
		for j, d := range e.Shape {
			shape[j] = int64(d)
		}
		n, err := numel(shape, dtypeSizes[dt])
		if err != nil {
			return fmt.Errorf("checkpoint: %s: tensor %q: %v", file, e.Name, err)
		}
		if int64(len(e.Data)) != n {
			return fmt.Errorf("checkpoint: %s: tensor %q: shape %v needs %d values, Data has %d",
				file, e.Name, e.Shape, n, len(e.Data))
		}
	}
	return nil
}

// writePyTorchTo writes the archive of the validated entries to w.
func writePyTorchTo(w io.Writer, entries []*Entry) error {
	cw := &countWriter{w: w}
	zw := zip.NewWriter(cw)
	put := func(name string, data []byte) error {
		// Flushing makes cw.n the offset at which the local header starts.
		if err := zw.Flush(); err != nil {
			return err
		}
		fh := &zip.FileHeader{
			Name:               torchArchive + "/" + name,
			Method:             zip.Store,
			CRC32:              crc32.ChecksumIEEE(data),
			CompressedSize64:   uint64(len(data)),
			UncompressedSize64: uint64(len(data)),
			ModifiedDate:       1<<5 | 1, // 1980-01-01, so that the bytes depend on entries only
		}
		fh.Extra = alignExtra(cw.n + 30 + int64(len(fh.Name)))
		fw, err := zw.CreateRaw(fh)
		if err != nil {
			return err
		}
		_, err = fw.Write(data)
		return err
	}
	if err := put("data.pkl", writeStatePickle(entries)); err != nil {
		return err
	}
	if err := put("byteorder", []byte("little")); err != nil {
		return err
	}
	var buf []byte
	for i, e := range entries {
		buf = encodeValues(buf[:0], dtypeOrF32(e.DType), e.Data)
		if err := put("data/"+strconv.Itoa(i), buf); err != nil {
			return err
		}
	}
	if err := put("version", []byte("3\n")); err != nil {
		return err
	}
	return zw.Close()
}

// alignExtra returns the extra field that makes data following a local
// header's fixed part, name and extra (which end at offset end without the
// extra) start at a multiple of torchAlign; nil when no padding is needed.
func alignExtra(end int64) []byte {
	pad := (torchAlign - end%torchAlign) % torchAlign
	if pad == 0 {
		return nil
	}
	if pad < 4 { // an extra field is at least its 4-byte id and length
		pad += torchAlign
	}
	extra := make([]byte, pad)
	binary.LittleEndian.PutUint16(extra, padExtraID)
	binary.LittleEndian.PutUint16(extra[2:], uint16(pad-4))
	return extra
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeStatePickle returns data.pkl for the validated entries: an OrderedDict
// built by REDUCE, filled by SETITEMS in batches of 1,000 pairs as Python's
// pickler does, each value a _rebuild_tensor_v2 call over a persistent
// storage. No memo is used, so every global is spelled out.
func writeStatePickle(entries []*Entry) []byte {
	var p pickleWriter
	p.op(0x80, 2) // PROTO 2
	p.global("collections", "OrderedDict")
	p.op(')', 'R') // EMPTY_TUPLE, REDUCE
	for start := 0; start < len(entries); start += 1000 {
		p.op('(') // MARK
		for i, e := range entries[start:min(start+1000, len(entries))] {
			shape := make([]int64, len(e.Shape))
			stride := make([]int64, len(e.Shape))
			n := int64(1)
			for j := len(e.Shape) - 1; j >= 0; j-- {
				shape[j], stride[j] = int64(e.Shape[j]), n
				n *= max(int64(e.Shape[j]), 1) // torch's contiguous strides skip zero sizes
			}
			p.str(e.Name)
			p.global("torch._utils", "_rebuild_tensor_v2")
			p.op('(') // MARK of the argument tuple
			p.op('(') // MARK of the persistent id
			p.str("storage")
			p.global("torch", storageNames[dtypeOrF32(e.DType)])
			p.str(strconv.Itoa(start + i))
			p.str("cpu")
			p.int(int64(len(e.Data)))
			p.op('t', 'Q') // TUPLE, BINPERSID
			p.int(0)       // storage_offset
			p.tuple(shape)
			p.tuple(stride)
			p.op(0x89) // NEWFALSE: requires_grad
			p.global("collections", "OrderedDict")
			p.op(')', 'R') // backward_hooks: OrderedDict()
			p.op('t', 'R') // TUPLE, REDUCE
		}
		p.op('u') // SETITEMS
	}
	p.op('.') // STOP
	return p.buf
}

// pickleWriter appends pickle opcodes to buf.
type pickleWriter struct{ buf []byte }

func (p *pickleWriter) op(codes ...byte) { p.buf = append(p.buf, codes...) }

// global writes GLOBAL module\nname\n.
func (p *pickleWriter) global(module, name string) {
	p.buf = append(p.buf, 'c')
	p.buf = append(p.buf, module...)
	p.buf = append(p.buf, '\n')
	p.buf = append(p.buf, name...)
	p.buf = append(p.buf, '\n')
}

// str writes s, valid UTF-8, as BINUNICODE.
func (p *pickleWriter) str(s string) {
	p.buf = append(p.buf, 'X')
	p.buf = binary.LittleEndian.AppendUint32(p.buf, uint32(len(s)))
	p.buf = append(p.buf, s...)
}

// int writes the non-negative v in the shortest of BININT1, BININT2,
// BININT and LONG1.
func (p *pickleWriter) int(v int64) {
	switch {
	case v < 1<<8:
		p.buf = append(p.buf, 'K', byte(v))
	case v < 1<<16:
		p.buf = append(p.buf, 'M')
		p.buf = binary.LittleEndian.AppendUint16(p.buf, uint16(v))
	case v <= math.MaxInt32:
		p.buf = append(p.buf, 'J')
		p.buf = binary.LittleEndian.AppendUint32(p.buf, uint32(v))
	default: // LONG1: little-endian two's complement, high bit clear
		var b []byte
		for u := uint64(v); u != 0; u >>= 8 {
			b = append(b, byte(u))
		}
		if b[len(b)-1]&0x80 != 0 {
			b = append(b, 0)
		}
		p.buf = append(p.buf, 0x8a, byte(len(b)))
		p.buf = append(p.buf, b...)
	}
}

// tuple writes a tuple of the non-negative ints vs.
func (p *pickleWriter) tuple(vs []int64) {
	switch len(vs) {
	case 0:
		p.op(')') // EMPTY_TUPLE
		return
	case 1, 2, 3:
	default:
		p.op('(') // MARK
	}
	for _, v := range vs {
		p.int(v)
	}
	switch len(vs) {
	case 1:
		p.op(0x85) // TUPLE1
	case 2:
		p.op(0x86) // TUPLE2
	case 3:
		p.op(0x87) // TUPLE3
	default:
		p.op('t') // TUPLE
	}
}
