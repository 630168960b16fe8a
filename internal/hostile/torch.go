// Torch archives. These generators build files the way an attacker would
// build them to make a reader take far more memory
// or time than the file's size justifies. Each generator returns the file's
// bytes; tests write them out and check that the readers refuse them with a
// clear error and within their memory bound.
//
// The torch archives here are syntactically what torch.save writes (a zip
// with archive/data.pkl, archive/data/<key> and archive/version, a
// protocol-2 pickle of an OrderedDict of _rebuild_tensor_v2 calls), so a
// reader that only checked syntax would accept them. The writer is
// standalone (archive/zip and a few pickle opcodes), independent of the
// checkpoint package it attacks.

package hostile

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
)

// CompressedStorageBin returns a torch .bin whose one storage entry,
// archive/data/0, is deflate-compressed zeros declaring declaredBytes bytes
// (rounded down to a multiple of 4): a FloatStorage of declaredBytes/4
// elements viewed by one tensor "w". Zeros deflate about 1,000 to 1, so
// CompressedStorageBin(1<<28) is a 261 KB file that asks a reader for a
// 256 MiB storage and 1 GiB of float32. torch.save stores entries
// uncompressed; a reader should refuse such a ratio before inflating.
func CompressedStorageBin(declaredBytes int64) []byte {
	numel := declaredBytes / 4
	var p pickler
	p.header()
	p.key("w")
	p.tensor(numel, 0, []int64{numel}, []int64{1})
	p.op(0x75, '.') // SETITEMS, STOP
	return archive([]entry{
		{"archive/data.pkl", p.Bytes(), zip.Store, 0},
		{"archive/data/0", nil, zip.Deflate, numel * 4},
		{"archive/version", []byte("3\n"), zip.Store, 0},
	})
}

// SharedViewsBin returns a torch .bin with views tensors, "v0", "v1", ...,
// each a full contiguous view of one FloatStorage of storageBytes bytes
// (rounded down to a multiple of 4) of zeros, deflated like everything in
// the archive. SharedViewsBin(200, 4<<20) is a 5 KB file; a reader that
// copies the storage for each view takes views × storageBytes (800 MiB)
// instead of storageBytes. The pickle memoizes what the views repeat, so
// each view costs about 25 bytes of pickle.
func SharedViewsBin(views int, storageBytes int) []byte {
	return sharedViews(views, storageBytes, zip.Deflate)
}

// StoredSharedViewsBin is SharedViewsBin with every entry stored, as
// torch.save writes them: a legal checkpoint (tied weights taken to the
// extreme) that a reader must load in memory of about one storage,
// however many views name it. StoredSharedViewsBin(3000, 4<<20) is a
// 4.3 MB file; a copy per view would be 12 GB.
func StoredSharedViewsBin(views int, storageBytes int) []byte {
	return sharedViews(views, storageBytes, zip.Store)
}

func sharedViews(views int, storageBytes int, method uint16) []byte {
	numel := int64(storageBytes / 4)
	var p pickler
	p.header()
	for i := range views {
		p.key(fmt.Sprintf("v%d", i))
		p.tensor(numel, 0, []int64{numel}, []int64{1})
		if (i+1)%1000 == 0 && i+1 < views { // pickle's batch size
			p.op(0x75, '(')
		}
	}
	p.op(0x75, '.')
	return archive([]entry{
		{"archive/data.pkl", p.Bytes(), method, 0},
		{"archive/data/0", nil, method, numel * 4},
		{"archive/version", []byte("3\n"), zip.Store, 0},
	})
}

// StridedViewsBin returns a torch .bin with views tensors, prefix+"0",
// prefix+"1", …,
// each the transpose of one stored side × side FloatStorage (stride
// (1, side)): legal, but a strided view must be copied out, so the file
// (about side² × 4 bytes plus 40 a view) makes a reader allocate views ×
// side² × 4 bytes, within one file's budget when views × side² × 4 is
// under 128 MiB.
func StridedViewsBin(prefix string, views, side int) []byte {
	numel, n := int64(side*side), int64(side)
	var p pickler
	p.header()
	for i := range views {
		p.key(fmt.Sprintf("%s%d", prefix, i))
		p.tensor(numel, 0, []int64{n, n}, []int64{1, n})
		if (i+1)%1000 == 0 && i+1 < views {
			p.op(0x75, '(')
		}
	}
	p.op(0x75, '.')
	return archive([]entry{
		{"archive/data.pkl", p.Bytes(), zip.Store, 0},
		{"archive/data/0", nil, zip.Store, numel * 4},
		{"archive/version", []byte("3\n"), zip.Store, 0},
	})
}

// DupBombBin returns a torch .bin whose data.pkl is PROTO 2, EMPTY_LIST,
// dups DUP opcodes and STOP, deflated. Each DUP pushes one more reference
// on the unpickler's stack (16 bytes in Go, plus slice growth); 64 Mi DUPs
// deflate to a 64 KB file and 255 Mi to 260 KB, which take gigabytes in a
// VM that runs them all. The pickle names no global, so an allowlist alone
// does not stop it.
func DupBombBin(dups int) []byte {
	return archive([]entry{
		{"archive/data.pkl", nil, zip.Deflate, -int64(dups)},
		{"archive/version", []byte("3\n"), zip.Store, 0},
	})
}

// entry is one zip member: data, or when data is nil, generated content of
// gen bytes (gen > 0: zeros; gen < 0: the DUP-bomb pickle with -gen DUPs).
type entry struct {
	name   string
	data   []byte
	method uint16
	gen    int64
}

// archive writes the entries into a zip archive.
func archive(entries []entry) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: e.method})
		if err != nil {
			panic(err) // writing to a bytes.Buffer cannot fail
		}
		switch {
		case e.data != nil:
			w.Write(e.data)
		case e.gen > 0:
			writeRepeated(w, 0, e.gen)
		case e.gen < 0:
			w.Write([]byte{0x80, 2, ']'}) // PROTO 2, EMPTY_LIST
			writeRepeated(w, '2', -e.gen) // DUP
			w.Write([]byte{'.'})          // STOP
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// writeRepeated writes n copies of b in 1 MiB chunks.
func writeRepeated(w interface{ Write([]byte) (int, error) }, b byte, n int64) {
	chunk := bytes.Repeat([]byte{b}, 1<<20)
	for n > 0 {
		k := min(n, int64(len(chunk)))
		w.Write(chunk[:k])
		n -= k
	}
}

// pickler writes the few pickle opcodes a state_dict needs (Python's
// Lib/pickletools.py documents them).
type pickler struct {
	bytes.Buffer
	memo map[string]byte // BINPUT slots of repeated objects
}

// put memoizes the object on top of the stack under k in the next slot.
func (p *pickler) put(k string) {
	if p.memo == nil {
		p.memo = map[string]byte{}
	}
	s := byte(len(p.memo))
	p.op('q', s)
	p.memo[k] = s
}

func (p *pickler) op(b ...byte) { p.Write(b) }

// header starts OrderedDict() and a MARK for SETITEMS.
func (p *pickler) header() {
	p.op(0x80, 2) // PROTO 2
	p.global("collections", "OrderedDict")
	p.op(')', 'R', '(') // EMPTY_TUPLE, REDUCE, MARK
}

// global pushes module.name, memoized the first time and fetched with
// BINGET after.
func (p *pickler) global(module, name string) {
	k := module + "." + name
	if s, ok := p.memo[k]; ok {
		p.op('h', s)
		return
	}
	p.WriteString("c" + module + "\n" + name + "\n")
	p.put(k)
}

// key pushes a state_dict key with SHORT_BINUNICODE.
func (p *pickler) key(s string) {
	p.op(0x8c, byte(len(s)))
	p.WriteString(s)
}

// tensor pushes _rebuild_tensor_v2(storage "0", offset, size, stride, False,
// OrderedDict()) for a FloatStorage of numel elements, memoizing the
// persistent id, size and stride so that repeated views stay small.
func (p *pickler) tensor(numel, offset int64, size, stride []int64) {
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.op('(') // MARK of the argument tuple
	if s, ok := p.memo["pid"]; ok {
		p.op('h', s)
	} else {
		p.op('(')
		p.key("storage")
		p.global("torch", "FloatStorage")
		p.key("0")
		p.key("cpu")
		p.int(numel)
		p.op('t')
		p.put("pid")
	}
	p.op('Q') // BINPERSID
	p.int(offset)
	p.tuple("size", size)
	p.tuple("stride", stride)
	p.op(0x89) // NEWFALSE
	p.global("collections", "OrderedDict")
	p.op(')', 'R', 't', 'R')
}

// tuple pushes a tuple of ints, memoized under name and value.
func (p *pickler) tuple(name string, v []int64) {
	k := fmt.Sprintf("%s%v", name, v)
	if s, ok := p.memo[k]; ok {
		p.op('h', s)
		return
	}
	p.op('(')
	for _, x := range v {
		p.int(x)
	}
	p.op('t')
	p.put(k)
}

// int pushes n with BININT (4-byte signed) or LONG1 (8 bytes) beyond it.
func (p *pickler) int(n int64) {
	if n == int64(int32(n)) {
		p.op('J')
		p.Write(binary.LittleEndian.AppendUint32(nil, uint32(int32(n))))
		return
	}
	p.op(0x8a, 8)
	p.Write(binary.LittleEndian.AppendUint64(nil, uint64(n)))
}
