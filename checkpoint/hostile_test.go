package checkpoint

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// This file attacks the readers with inputs built to cost memory: pickles
// that make the VM allocate, views that multiply a storage, zip entries that
// expand or overlap. Each case asserts a clear error (or, for legitimate
// shared views, the right values) and measures the bytes allocated while
// reading, which must stay within the memory budget the package documents.

// allocated runs f and returns the bytes it allocated (runtime TotalAlloc,
// an upper bound on its peak heap growth).
func allocated(f func()) uint64 {
	runtime.GC()
	return allocatedNoGC(f)
}

// allocatedNoGC is allocated without the collection first (for fuzzing).
func allocatedNoGC(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// repeatOps returns head, n copies of body, then tail.
func repeatOps(head []byte, body []byte, n int, tail []byte) []byte {
	out := make([]byte, 0, len(head)+n*len(body)+len(tail))
	out = append(out, head...)
	for range n {
		out = append(out, body...)
	}
	return append(out, tail...)
}

// costPickles are pickles whose operations make gopickle allocate much
// more than their size; scanPickle must estimate at least what the VM then
// allocates.
func costPickles() map[string][]byte {
	le := binary.LittleEndian
	out := map[string][]byte{
		"MARK POP_MARK":       repeatOps([]byte{0x80, 2}, []byte{'(', '1'}, 100000, []byte{']', '.'}),
		"empty tuples listed": repeatOps([]byte{0x80, 2, ']'}, []byte{'(', 't', 'a'}, 100000, []byte{'.'}),
		"empty dicts listed":  repeatOps([]byte{0x80, 2, ']'}, []byte{'}', 'a'}, 100000, []byte{'.'}),
		"empty sets listed":   repeatOps([]byte{0x80, 4, ']'}, []byte{0x8f, 'a'}, 50000, []byte{'.'}),
		"DUP":                 repeatOps([]byte{0x80, 2, ']'}, []byte{'2'}, 500000, []byte{'.'}),
		"DUP APPEND":          repeatOps([]byte{0x80, 2, ']'}, []byte{'2', 'a'}, 200000, []byte{'.'}),
		"MEMOIZE":             repeatOps([]byte{0x80, 4, ']'}, []byte{0x94}, 200000, []byte{'.'}),
		"BININT stacked":      repeatOps([]byte{0x80, 2, '('}, []byte{'J', 0, 1, 0, 0}, 100000, []byte{'l', '.'}),
		"BINFLOAT stacked":    repeatOps([]byte{0x80, 2, '('}, []byte{'G', 1, 2, 3, 4, 5, 6, 7, 8}, 50000, []byte{'l', '.'}),
		"LONG1 stacked":       repeatOps([]byte{0x80, 2, '('}, append([]byte{0x8a, 64}, bytes.Repeat([]byte{7}, 64)...), 5000, []byte{'l', '.'}),
		"INT lines":           repeatOps([]byte{0x80, 2, '('}, []byte("I123456789012\n"), 50000, []byte{'l', '.'}),
		"short strings":       repeatOps([]byte{0x80, 4, '('}, []byte{0x8c, 1, 'x'}, 100000, []byte{'l', '.'}),
		"OrderedDicts":        repeatOps([]byte("\x80\x02ccollections\nOrderedDict\nq\x00)q\x01]"), []byte{'h', 0, 'h', 1, 'R', 'a'}, 50000, []byte{'.'}),
		"dict via SETITEMS":   repeatOps([]byte{0x80, 4, '}', '('}, []byte{'J', 1, 2, 3, 4, 'N'}, 100000, []byte{'u', '.'}),
		"dict via DICT":       repeatOps([]byte{0x80, 4, '('}, []byte{'J', 1, 2, 3, 4, 'N'}, 100000, []byte{'d', '.'}),
		"OrderedDict SETITEM": repeatOps([]byte("\x80\x02ccollections\nOrderedDict\n)R"), []byte{'J', 1, 2, 3, 4, 'N', 's'}, 100000, []byte{'.'}),
		"frozenset":           repeatOps([]byte{0x80, 4, '('}, []byte{'J', 1, 2, 3, 4}, 100000, []byte{0x91, '.'}),
		"tuples of 3":         repeatOps([]byte{0x80, 2, ']'}, []byte{'N', 'N', 'N', 0x87, 'a'}, 100000, []byte{'.'}),
		"nested lists":        repeatOps(repeatOps([]byte{0x80, 2}, []byte{']'}, 200000, nil), []byte{'a'}, 199999, []byte{'.'}),
	}
	// BUILD copies a dict's entries into an OrderedDict's attributes; doing
	// it for many OrderedDicts from one big dict is quadratic.
	var p pk
	p.op(0x80, 2, '}', '(')
	for i := range 2000 {
		p.str(fmt.Sprintf("k%d", i)).op('N')
	}
	p.op('u', 'q', 0).global("collections", "OrderedDict").op('q', 1, '0', ']')
	for range 200 {
		p.op('h', 1, ')', 'R', 'h', 0, 'b', 'a')
	}
	p.op('.')
	out["BUILD of one dict many times"] = slices.Clone(p.Bytes())
	// _rebuild_tensor_v2 copies its size and stride tuples: 64-dimension
	// views from the memo, many times.
	p.Reset()
	p.op(0x80, 2).global("torch._utils", "_rebuild_tensor_v2").op('q', 0, '0')
	p.global("collections", "OrderedDict").op('q', 1, '0')
	p.op('(').str("storage").global("torch", "FloatStorage").str("0").str("cpu").int(4).op('t', 'q', 2, '0')
	p.ints(slices.Repeat([]int{1}, 64)).op('q', 3, '0')
	p.op(']')
	for range 20000 {
		p.op('h', 0, '(', 'h', 2, 'Q', 'K', 0, 'h', 3, 'h', 3, 0x89, 'h', 1, ')', 'R', 't', 'R', 'a')
	}
	p.op('.')
	out["64-dim views"] = slices.Clone(p.Bytes())
	// gopickle's errors format the offending object with %#v: a big list
	// or dict is printed element by element.
	out["REDUCE on a big list"] = repeatOps([]byte{0x80, 2, ']', '('}, []byte{'N'}, 200000, []byte{'e', ')', 'R', '.'})
	out["BUILD on a big dict"] = repeatOps([]byte{0x80, 2, '}', '('}, []byte{'N', 'N'}, 100000, []byte{'u', '}', 'b', '.'})
	out["OBJ of a big tuple"] = repeatOps([]byte{0x80, 2, '(', '('}, []byte{'N'}, 200000, []byte{'t', 'o', '.'})
	// A FRAME is copied by the VM.
	body := repeatOps([]byte{']'}, []byte{'N', 'a'}, 100000, []byte{'.'})
	out["FRAME"] = append(append([]byte{0x80, 4, 0x95}, le.AppendUint64(nil, uint64(len(body)))...), body...)
	// Long strings are read, then converted.
	out["BINUNICODE"] = append(append([]byte{0x80, 2, 'X'}, le.AppendUint32(nil, 4<<20)...), append(bytes.Repeat([]byte{'a'}, 4<<20), '.')...)
	out["BINBYTES"] = append(append([]byte{0x80, 3, 'B'}, le.AppendUint32(nil, 4<<20)...), append(bytes.Repeat([]byte{'a'}, 4<<20), '.')...)
	return out
}

// TestPickleCostModel checks scanPickle's estimate against what the VM
// really allocates, for pickles chosen to make it allocate.
func TestPickleCostModel(t *testing.T) {
	for name, pkl := range costPickles() {
		t.Run(name, func(t *testing.T) {
			cost, err := scanPickle(pkl, "c.bin", "a/data.pkl", 1<<40)
			if err != nil {
				t.Fatal(err)
			}
			bud := &budget{limit: 1 << 40}
			var perr error
			got := allocated(func() { _, perr = parseStateDictPickle(pkl, "c.bin", "a/data.pkl", bud) })
			if perr == nil {
				t.Fatal("a pickle that is not a state_dict was accepted")
			}
			t.Logf("%d-byte pickle: estimate %d bytes (%.0f/byte), VM allocated %d (%.0f/byte)",
				len(pkl), cost, float64(cost)/float64(len(pkl)), got, float64(got)/float64(len(pkl)))
			// The scan's own memo set and error formatting are small.
			if got > uint64(cost)+64<<10 {
				t.Errorf("VM allocated %d bytes, more than the estimate %d", got, cost)
			}
		})
	}
}

// allocBound is what a read of a size-byte file may allocate in these
// tests: the memory budget (4 × size + 128 MiB), plus the zip directory and
// the small structures outside it (8 bytes per file byte and 1 MiB), and
// never more than issue 22's target of 300 MB + 4 × size.
func allocBound(size int) uint64 {
	return min(uint64(memoryBudget(int64(size)))+8*uint64(size)+1<<20, 300e6+4*uint64(size))
}

// zipDeflated is zipBytes with every entry deflated.
func zipDeflated(t testing.TB, entries []zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Deflate})
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

// aliasZip writes the entries stored, then a central directory that lists
// each of them and, for every alias name, another record pointing at the
// local header and data of entry target: one block of bytes listed as many
// files (the "overlapping files" zip bomb).
func aliasZip(entries []zipEntry, target string, aliases []string) []byte {
	le := binary.LittleEndian
	var buf bytes.Buffer
	type rec struct {
		name      string
		crc, size uint32
		off       uint32
	}
	var recs []rec
	offs := map[string]rec{}
	for _, e := range entries {
		r := rec{e.name, crc32.ChecksumIEEE(e.data), uint32(len(e.data)), uint32(buf.Len())}
		h := le.AppendUint32(nil, 0x04034b50)
		h = le.AppendUint16(h, 20) // version needed
		h = le.AppendUint16(h, 0)  // flags
		h = le.AppendUint16(h, 0)  // stored
		h = le.AppendUint32(h, 0)  // time, date
		h = le.AppendUint32(h, r.crc)
		h = le.AppendUint32(h, r.size)
		h = le.AppendUint32(h, r.size)
		h = le.AppendUint16(h, uint16(len(e.name)))
		h = le.AppendUint16(h, 0)
		buf.Write(h)
		buf.WriteString(e.name)
		buf.Write(e.data)
		recs = append(recs, r)
		offs[e.name] = r
	}
	for _, a := range aliases {
		r := offs[target]
		r.name = a
		recs = append(recs, r)
	}
	cdOff := buf.Len()
	for _, r := range recs {
		h := le.AppendUint32(nil, 0x02014b50)
		h = le.AppendUint16(h, 20) // made by
		h = le.AppendUint16(h, 20) // needed
		h = le.AppendUint16(h, 0)
		h = le.AppendUint16(h, 0)
		h = le.AppendUint32(h, 0)
		h = le.AppendUint32(h, r.crc)
		h = le.AppendUint32(h, r.size)
		h = le.AppendUint32(h, r.size)
		h = le.AppendUint16(h, uint16(len(r.name)))
		h = le.AppendUint16(h, 0) // extra
		h = le.AppendUint16(h, 0) // comment
		h = le.AppendUint16(h, 0) // disk
		h = le.AppendUint16(h, 0) // internal attributes
		h = le.AppendUint32(h, 0) // external attributes
		h = le.AppendUint32(h, r.off)
		buf.Write(h)
		buf.WriteString(r.name)
	}
	cdLen := buf.Len() - cdOff
	h := le.AppendUint32(nil, 0x06054b50)
	h = le.AppendUint32(h, 0)
	h = le.AppendUint16(h, uint16(len(recs)))
	h = le.AppendUint16(h, uint16(len(recs)))
	h = le.AppendUint32(h, uint32(cdLen))
	h = le.AppendUint32(h, uint32(cdOff))
	h = le.AppendUint16(h, 0)
	buf.Write(h)
	return buf.Bytes()
}

// viewsPickle is a state_dict of n tensors "v0".."v{n-1}", all views
// (offset, shape, stride) of FloatStorage "0" of numel elements.
func viewsPickle(n, numel, offset int, shape, stride []int) []byte {
	ts := make([]ptTensor, n)
	for i := range ts {
		ts[i] = ptTensor{name: fmt.Sprintf("v%d", i), key: "0", storage: "FloatStorage", numel: numel, offset: offset, shape: shape, stride: stride}
	}
	return statePickle(ts)
}

// TestHostileTorch runs ParsePyTorch on archives built to exhaust memory.
// Each must fail with an error naming the file and the numbers, allocating
// no more than allocBound.
func TestHostileTorch(t *testing.T) {
	le := binary.LittleEndian
	const mb = 1 << 20
	ramp := make([]float32, mb) // a 4 MB storage
	for i := range ramp {
		ramp[i] = float32(i % 1000)
	}
	raw4 := f32Bytes(ramp...)
	one := func(pt ptTensor) []byte {
		pt.name, pt.key, pt.storage = "w", "0", "FloatStorage"
		return statePickle([]ptTensor{pt})
	}
	four := map[string][]byte{"0": f32Bytes(1, 2, 3, 4)}
	cases := []struct {
		name string
		data func(t *testing.T) []byte
		want []string
	}{
		{"2 Mi DUPs stored", func(t *testing.T) []byte {
			return torchZip(t, "a", repeatOps([]byte{0x80, 2, ']'}, []byte{'2'}, 2<<20, []byte{'.'}), nil)
		}, []string{"a/data.pkl: byte 1048578: DUP: the stack holds more than 1048576 items"}},
		{"memo bomb: 3 Mi LONG_BINPUT keys", func(t *testing.T) []byte {
			var b bytes.Buffer
			b.Write([]byte{0x80, 2, ']'})
			for i := range 3 << 20 {
				b.WriteByte('r')
				b.Write(le.AppendUint32(nil, uint32(i)))
			}
			b.WriteByte('.')
			return torchZip(t, "a", b.Bytes(), nil)
		}, []string{"a/data.pkl: byte", "LONG_BINPUT would allocate about", "memory budget"}},
		{"GET of a key never PUT", func(t *testing.T) []byte {
			return torchZip(t, "a", []byte{0x80, 2, ']', 'q', 0, 'h', 7, '.'}, nil)
		}, []string{"byte 5: BINGET of memo key 7, which was never PUT"}},
		{"BUILD of a big dict onto many OrderedDicts", func(t *testing.T) []byte {
			var p pk
			p.op(0x80, 2, '}', '(')
			for i := range 20000 {
				p.str(fmt.Sprintf("k%d", i)).op('N')
			}
			p.op('u', 'q', 0).global("collections", "OrderedDict").op('q', 1, '0', ']')
			for range 20000 {
				p.op('h', 1, ')', 'R', 'h', 0, 'b', 'a')
			}
			p.op('.')
			return torchZip(t, "a", p.Bytes(), nil)
		}, []string{"BUILD would allocate about", "memory budget"}},
		{"BINUNICODE length past the end", func(t *testing.T) []byte {
			return torchZip(t, "a", append([]byte{0x80, 2, 'X'}, le.AppendUint32(nil, 0xffffff)...), nil)
		}, []string{"byte 2: BINUNICODE data needs 16777215 bytes, only 0 remain"}},
		{"LONG4 of 1 MB", func(t *testing.T) []byte {
			return torchZip(t, "a", append(append([]byte{0x80, 2, 0x8b}, le.AppendUint32(nil, 1<<20)...), append(make([]byte, 1<<20), '.')...), nil)
		}, []string{"LONG4 of 1048576 bytes, more than 64"}},
		{"nested lists 200k deep", func(t *testing.T) []byte {
			return torchZip(t, "a", repeatOps(repeatOps([]byte{0x80, 2}, []byte{']'}, 200000, nil), []byte{'a'}, 199999, []byte{'.'}), nil)
		}, []string{"top-level object is a *types.List"}},
		{"nested lists 500k deep", func(t *testing.T) []byte { // the VM would take about 60 MB; the estimate is above the budget
			return torchZip(t, "a", repeatOps(repeatOps([]byte{0x80, 2}, []byte{']'}, 500000, nil), []byte{'a'}, 499999, []byte{'.'}), nil)
		}, []string{"running the pickle up to EMPTY_LIST would allocate about", "memory budget"}},
		{"shape whose product overflows int64", func(t *testing.T) []byte {
			return torchZip(t, "a", one(ptTensor{numel: 4, shape: []int{1<<31 - 1, 1<<31 - 1, 1<<31 - 1}, stride: []int{1, 1, 1}}), four)
		}, []string{`tensor "w"`, "more than 9223372036854775807 elements"}},
		{"65 dimensions", func(t *testing.T) []byte {
			shape := slices.Repeat([]int{1}, 65)
			return torchZip(t, "a", one(ptTensor{numel: 4, shape: shape}), four)
		}, []string{"size has 65 dimensions, more than 64"}},
		{"storage offset past the end", func(t *testing.T) []byte {
			return torchZip(t, "a", one(ptTensor{numel: 4, offset: 1<<31 - 1, shape: []int{1}}), four)
		}, []string{`tensor "w"`, "offset 2147483647", "reaches element 2147483647 of a 4-element storage"}},
		{"extent past the end", func(t *testing.T) []byte {
			return torchZip(t, "a", one(ptTensor{numel: 4, shape: []int{2, 2}, stride: []int{1 << 30, 1}}), four)
		}, []string{`tensor "w"`, "reaches element 1073741825 of a 4-element storage"}},
		{"negative stride", func(t *testing.T) []byte {
			return torchZip(t, "a", one(ptTensor{numel: 4, offset: 3, shape: []int{4}, stride: []int{-1}}), four)
		}, []string{`tensor "w"`, "negative entry -1"}},
		{"one stored block listed as 1000 storages", func(t *testing.T) []byte {
			var ts []ptTensor
			var aliases []string
			for i := range 1000 {
				ts = append(ts, ptTensor{name: fmt.Sprintf("t%d", i), key: fmt.Sprint(i), storage: "FloatStorage", numel: mb, shape: []int{mb}})
				if i > 0 {
					aliases = append(aliases, fmt.Sprintf("a/data/%d", i))
				}
			}
			return aliasZip([]zipEntry{{"a/data.pkl", statePickle(ts)}, {"a/data/0", raw4}}, "a/data/0", aliases)
		}, []string{"zip entries a/data/0", "overlap in the file"}},
		{"100 transposed copies of a 4 MB storage", func(t *testing.T) []byte {
			return torchZip(t, "a", viewsPickle(100, mb, 0, []int{1024, 1024}, []int{1, 1024}), map[string][]byte{"0": raw4})
		}, []string{"tensor \"v", "copying strided view size [1024 1024] stride [1 1024] (1048576 elements) needs 4194304 bytes", "memory budget"}},
		{"deflated storage beyond the ratio", func(t *testing.T) []byte {
			pkl := one(ptTensor{numel: mb, shape: []int{mb}})
			return zipDeflated(t, []zipEntry{{"a/data.pkl", pkl}, {"a/data/0", make([]byte, 4*mb)}})
		}, []string{"a/data/0 inflates", "to 4194304"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := c.data(t)
			var err error
			got := allocated(func() { _, err = ParsePyTorch(data, "hostile.bin") })
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "checkpoint: hostile.bin: ") {
				t.Errorf("error %q does not start with the package and file", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", clipN(msg, 400), w)
				}
			}
			t.Logf("%d-byte file: %d bytes allocated (bound %d): %s", len(data), got, allocBound(len(data)), clipN(msg, 200))
			if got > allocBound(len(data)) {
				t.Errorf("allocated %d bytes reading a %d-byte file, more than %d", got, len(data), allocBound(len(data)))
			}
		})
	}
}

// TestSharedViews reads 10,000 contiguous views of one stored 4 MB storage,
// with offsets: they must share the storage's memory, hold the right
// values, and cost about the storage once.
func TestSharedViews(t *testing.T) {
	const mb = 1 << 20
	vals := make([]float32, mb)
	for i := range vals {
		vals[i] = float32(i)
	}
	ts := make([]ptTensor, 10000)
	for i := range ts {
		// Full views, and views of 1,000 elements at offset i.
		if i%2 == 0 {
			ts[i] = ptTensor{name: fmt.Sprintf("v%05d", i), key: "0", storage: "FloatStorage", numel: mb, shape: []int{1024, 1024}}
		} else {
			ts[i] = ptTensor{name: fmt.Sprintf("v%05d", i), key: "0", storage: "FloatStorage", numel: mb, offset: i, shape: []int{10, 100}}
		}
	}
	data := torchZip(t, "archive", statePickle(ts), map[string][]byte{"0": f32Bytes(vals...)})
	var f *File
	var err error
	got := allocated(func() { f, err = ParsePyTorch(data, "views.bin") })
	if err != nil {
		t.Fatal(err)
	}
	base := &f.Tensors["v00000"].Data[0]
	for i, pt := range ts {
		e := f.Tensors[pt.name]
		if !slices.Equal(e.Shape, pt.shape) || len(e.Data) != pt.shape[0]*pt.shape[1] || cap(e.Data) != len(e.Data) {
			t.Fatalf("%s: shape %v, len %d cap %d", pt.name, e.Shape, len(e.Data), cap(e.Data))
		}
		if e.Data[0] != float32(pt.offset) || e.Data[len(e.Data)-1] != float32(pt.offset+len(e.Data)-1) {
			t.Fatalf("%s: values %v ... %v, want %d ... %d", pt.name, e.Data[0], e.Data[len(e.Data)-1], pt.offset, pt.offset+len(e.Data)-1)
		}
		if &e.Data[0] != base && i%2 == 0 {
			t.Fatalf("%s does not share the storage", pt.name)
		}
	}
	// One 4 MB storage, 10,000 entries and the pickle: far below a copy
	// per view (40 GB).
	t.Logf("%d-byte file, %d views: %d bytes allocated", len(data), len(ts), got)
	if limit := uint64(len(data)) + 32<<20; got > limit {
		t.Errorf("allocated %d bytes, more than %d: views are copied", got, limit)
	}
}

// TestDeflatedEntriesWithinRatio accepts an archive whose entries were
// deflated by another tool, as long as they expand modestly.
func TestDeflatedEntriesWithinRatio(t *testing.T) {
	vals := make([]float32, 4096)
	x := uint32(1)
	for i := range vals {
		x = x*1664525 + 1013904223
		vals[i] = float32(x>>8) / (1 << 24)
	}
	pkl := statePickle([]ptTensor{{name: "w", key: "0", storage: "FloatStorage", numel: len(vals), shape: []int{64, 64}}})
	data := zipDeflated(t, []zipEntry{{"a/data.pkl", pkl}, {"a/data/0", f32Bytes(vals...)}, {"a/version", []byte("3\n")}})
	f, err := ParsePyTorch(data, "deflated.bin")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Tensors["w"].Data, vals) {
		t.Error("values differ")
	}
}

// TestHostileSafetensors reads safetensors files whose header costs more
// than its bytes: many empty tensors, many dimensions, and checks the
// memory bound of a file of 1-byte elements (the widest conversion).
func TestHostileSafetensors(t *testing.T) {
	empties := func(n int) []byte {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`, i)
		}
		b.WriteString("}")
		return stBytes(b.String(), nil)
	}
	dims := `{"x":{"dtype":"F32","shape":[` + strings.Repeat("1,", 64) + `1],"data_offsets":[0,4]}}`
	cases := []struct {
		name string
		data []byte
		want string // "" for a file that must load
	}{
		{"20,000 empty tensors", empties(20000), ""},
		// Each record costs about 1.3 KB to parse and hold: a 12 MB header
		// of empty tensors would take 250 MB.
		{"200,000 empty tensors", empties(200000), "listing more than 88365 tensors needs 2048 bytes"},
		{"65 dimensions", stBytes(dims, f32Bytes(1)), `tensor "x": shape has 65 dimensions, more than 64`},
		{"16 MiB of U8", stBytes(`{"u":{"dtype":"U8","shape":[16777216],"data_offsets":[0,16777216]}}`, make([]byte, 16<<20)), ""},
		{"header length past the file", stBytes(`{}`, nil)[:8], "header length 2 is larger than the 0 bytes that follow it"},
		{"header length 2^63", append(binary.LittleEndian.AppendUint64(nil, 1<<63), "{}"...), "header length 9223372036854775808 is larger than the 104857600-byte limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			got := allocated(func() { _, err = ParseSafetensors(c.data, "h.safetensors") })
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want %q", err, c.want)
			}
			t.Logf("%d-byte file: %d bytes allocated (%.1f per byte), bound %d", len(c.data), got, float64(got)/float64(len(c.data)), allocBound(len(c.data)))
			if got > allocBound(len(c.data)) {
				t.Errorf("allocated %d bytes, more than %d", got, allocBound(len(c.data)))
			}
		})
	}
}

// TestHostileIndex refuses shard indexes that are too big or name too
// many shards, before reading any shard.
func TestHostileIndex(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.index.json")
	fh, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(32<<20 + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	fh.Close()
	if _, err := ReadSharded(big); err == nil || !strings.Contains(err.Error(), "file is 33554433 bytes, more than the 33554432-byte limit") {
		t.Errorf("32 MiB + 1 index: %v", err)
	}

	var b strings.Builder
	b.WriteString(`{"weight_map":{`)
	for i := range maxIndexShards + 1 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"t%d":"s%d.safetensors"`, i, i)
	}
	b.WriteString("}}")
	shards := filepath.Join(dir, "shards.index.json")
	if err := os.WriteFile(shards, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var rerr error
	got := allocated(func() { _, rerr = ReadSharded(shards) })
	if rerr == nil || !strings.Contains(rerr.Error(), "weight_map names more than 65536 shard files") {
		t.Errorf("65,537 shards: %v", rerr)
	}
	if got > allocBound(b.Len()) {
		t.Errorf("allocated %d bytes for a %d-byte index", got, b.Len())
	}

	// More tensors than the limit: refused while the weight_map is read, so
	// that what it keeps is bounded by the limit, not by the file (an
	// index of 2.2 million short entries fits in 32 MiB).
	const entries = 2_200_000
	mb := []byte(`{"weight_map":{`)
	for i := range entries {
		if i > 0 {
			mb = append(mb, ',')
		}
		mb = strconv.AppendQuote(mb, strconv.Itoa(i))
		mb = append(mb, `:"s"`...)
	}
	mb = append(mb, "}}"...)
	many := filepath.Join(dir, "many.index.json")
	if err := os.WriteFile(many, mb, 0o644); err != nil {
		t.Fatal(err)
	}
	got = allocated(func() { _, rerr = ReadSharded(many) })
	if rerr == nil || !strings.Contains(rerr.Error(), "2200000 tensors") || !strings.Contains(rerr.Error(), "1048576") {
		t.Errorf("%d tensors: %v", entries, rerr)
	}
	t.Logf("%d-entry index of %d bytes: %v; %d bytes allocated", entries, len(mb), rerr, got)
	if got > 2*uint64(len(mb)) {
		t.Errorf("allocated %d bytes for a %d-byte index over the tensor limit: more than the file and a copy", got, len(mb))
	}

	// One shard under two spellings is one shard.
	sub := t.TempDir()
	if err := WriteSafetensors(filepath.Join(sub, "a.safetensors"), []*Entry{
		{Name: "x", Shape: []int{1}, Data: []float32{1}}, {Name: "y", Shape: []int{1}, Data: []float32{2}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(sub, "model.safetensors.index.json")
	if err := os.WriteFile(idx, []byte(`{"weight_map":{"x":"a.safetensors","y":"./a.safetensors"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ReadSharded(idx)
	if err != nil || len(f.Names) != 2 {
		t.Fatalf("two spellings of one shard: %v", err)
	}
}

// TestRealPickleCost checks that the fixtures' data.pkl, written by
// torch.save, are estimated at a small multiple of their size, so that real
// state_dicts stay far inside the memory budget, and that the estimate
// bounds what the VM allocates for them too.
func TestRealPickleCost(t *testing.T) {
	root := testutil.Shared(t, "fixtures", "hf-roformer", "cases")
	bins, err := filepath.Glob(filepath.Join(root, "*", "pytorch_model.bin"))
	if err != nil || len(bins) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, bin := range bins {
		zr, err := zip.OpenReader(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, zf := range zr.File {
			if !strings.HasSuffix(zf.Name, "/data.pkl") {
				continue
			}
			if zf.Method != zip.Store {
				t.Errorf("%s: %s is not stored (method %d)", bin, zf.Name, zf.Method)
			}
			pkl, err := readZipEntry(zf, maxPickleBytes, -1)
			if err != nil {
				t.Fatal(err)
			}
			cost, err := scanPickle(pkl, bin, zf.Name, 1<<40)
			if err != nil {
				t.Fatal(err)
			}
			var perr error
			got := allocated(func() { _, perr = parseStateDictPickle(pkl, bin, zf.Name, &budget{limit: 1 << 40}) })
			if perr != nil {
				t.Fatal(perr)
			}
			t.Logf("%s: %d-byte pickle, estimate %d (%.0f/byte), VM %d", filepath.Base(filepath.Dir(bin)), len(pkl), cost, float64(cost)/float64(len(pkl)), got)
			if cost > 100*int64(len(pkl)) || uint64(cost) < got {
				t.Errorf("estimate %d for a %d-byte pickle (VM allocated %d)", cost, len(pkl), got)
			}
		}
		zr.Close()
	}
}
