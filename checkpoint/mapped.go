package checkpoint

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"unsafe"

	"github.com/roformer-go/roformer/internal/boundedfile"
)

// MapDir is ReadDir with safetensors files mapped into memory instead of
// read: a float32 tensor's Data points into the mapping, so loading costs
// no copy and no time, and its pages are read from the file when first
// touched (the page cache's, shared with other processes, until written).
// Every Entry also holds its stored bytes in Raw; a tensor of another dtype
// (BF16, I8, ...) or one not aligned for float32 has no Data until
// Entry.Float32 decodes it, so a caller may use its stored form as it is.
// The header, offsets and tiling are checked as ReadSafetensors checks
// them; values are not (a caller checks what it uses, as the model's
// loader checks that every parameter is finite).
//
// The mapping is copy-on-write (MAP_PRIVATE): writing to Data changes the
// process's copy of the page, never the file. It is never unmapped, so the
// slices stay valid for the life of the process; a program that loads
// many models one after another uses ReadDir. The file must not be
// truncated while it is mapped (a page past its new end faults: SIGBUS);
// replacing it by renaming a new file over it, as every writer in this
// module and huggingface_hub do, is safe. pytorch_model.bin folders, and
// systems without mmap, are read as ReadDir reads them.
func MapDir(dir string) (*File, error) {
	p, _, err := DirFile(dir)
	if err != nil {
		return nil, err
	}
	return MapFile(p)
}

// MapFile is MapDir for one checkpoint file: a .safetensors file, a
// sharded index (model.safetensors.index.json) or a torch archive (read).
func MapFile(p string) (*File, error) {
	if strings.HasSuffix(p, ".index.json") {
		return readSharded(p, canMap)
	}
	if !canMap {
		return readByName(p)
	}
	if strings.HasSuffix(strings.ToLower(p), ".safetensors") {
		return mapSafetensors(p, nil)
	}
	return readByName(p)
}

// mapSafetensors maps the safetensors file at path and parses it in place;
// bud (nil for a budget of the file's own) bounds the header's allocations.
func mapSafetensors(path string, bud *budget) (*File, error) {
	fh, st, err := boundedfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer fh.Close()
	size := st.Size()
	if bud == nil {
		bud = newBudget(size)
	}
	if size < 8 || int64(int(size)) != size {
		// too short to map usefully, or past the address space: the
		// reader's checks name the problem.
		return parseSafetensorsWithin(fh, size, path, bud, nil)
	}
	mem, err := mapFile(fh, size)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: mapping %d bytes: %w", path, size, err)
	}
	return parseSafetensorsWithin(fh, size, path, bud, mem)
}

// littleEndian reports whether this machine stores numbers as safetensors
// files do, so that float32 values can be used where they lie.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// mappedEntry is the Entry of the validated tensor t whose stored bytes are
// raw, inside a mapping.
func mappedEntry(t stTensor, raw []byte) *Entry {
	e := &Entry{Name: t.name, DType: t.dtype, Shape: intShape(t.shape), Raw: raw}
	switch {
	case t.n == 0:
		e.Data = []float32{}
	case t.dtype == "F32" && littleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%4 == 0:
		e.Data = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(raw))), t.n)
	}
	return e
}

// Float32 returns the tensor's values as float32: Data, decoding Raw into
// it first when a mapped File left it nil (see MapDir). Values are
// converted as ReadSafetensors converts them.
func (e *Entry) Float32() ([]float32, error) {
	if e.Data != nil {
		return e.Data, nil
	}
	n := 1
	for _, d := range e.Shape {
		n *= d
	}
	vals, err := decode(e.DType, e.Raw, n)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: tensor %q: %w", e.Name, err)
	}
	e.Data = vals
	return vals, nil
}

// Mapped reports whether any of f's tensors lie in a mapping (MapDir).
func (f *File) Mapped() bool { return len(f.maps) > 0 }

// Holds reports whether b lies inside one of f's mappings.
func (f *File) Holds(b []byte) bool { return f.mapOf(b) != nil }

// mapOf returns the mapping of f that holds b, or nil.
func (f *File) mapOf(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi := lo + uintptr(len(b))
	for _, m := range f.maps {
		mlo := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
		if lo >= mlo && hi <= mlo+uintptr(len(m)) {
			return m
		}
	}
	return nil
}

// Release tells the system that the pages of data, which must lie in one
// of f's mappings and must not have been written, are not needed now:
// they leave the process's resident memory and are read from the file
// again if touched (the whole pages inside data only). It is how a loader
// that has converted a tensor (quantized, repacked) keeps one copy in
// memory. It does nothing for memory outside f's mappings, and reports
// whether it released anything.
func (f *File) Release(data []byte) bool {
	m := f.mapOf(data)
	if m == nil {
		return false
	}
	page := uintptr(os.Getpagesize())
	mlo := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	a, b := (lo+page-1)/page*page, (lo+uintptr(len(data)))/page*page
	if b <= a {
		return false
	}
	return dropPages(m[a-mlo:b-mlo]) == nil
}

// ReleaseAll is Release for the whole of f's mappings but the pages that
// hold any part of keep (which must lie in them): what a loader does once
// it has copied or converted everything but keep. Nothing of the mappings
// but keep may be read or written afterwards without reading the file
// again, and nothing in them may have been written before.
func (f *File) ReleaseAll(keep ...[]byte) {
	page := uintptr(os.Getpagesize())
	for _, m := range f.maps {
		mlo := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
		mhi := mlo + uintptr(len(m))
		type span struct{ a, b uintptr }
		var kept []span
		for _, k := range keep {
			if len(k) == 0 {
				continue
			}
			lo := uintptr(unsafe.Pointer(unsafe.SliceData(k)))
			hi := lo + uintptr(len(k))
			if lo >= mlo && hi <= mhi {
				kept = append(kept, span{lo / page * page, (hi + page - 1) / page * page})
			}
		}
		sort.Slice(kept, func(i, j int) bool { return kept[i].a < kept[j].a })
		at := mlo / page * page // mappings start on a page
		for _, k := range append(kept, span{mhi, mhi}) {
			if end := min(k.a, mhi/page*page); end > at {
				dropPages(m[at-mlo : end-mlo])
			}
			at = max(at, k.b)
		}
	}
}

// Float32Bytes returns the bytes of a float32 slice, for Release.
func Float32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}
