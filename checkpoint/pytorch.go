package checkpoint

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// maxPickleBytes bounds data.pkl. A state_dict pickle takes about 100 bytes
// per tensor, so this is far above any real checkpoint.
const maxPickleBytes = 256 << 20

// Compression policy. torch.save stores every entry uncompressed
// (PyTorchStreamWriter writes method 0, "stored"). An archive re-packed by
// another tool may deflate them; weights compress poorly (rarely below 0.8
// of their size), so an entry is read only when its declared size is at most
// maxInflateRatio times its compressed size plus inflateSlack bytes. A zip
// bomb, a few KB that declare hundreds of MB, is refused before anything is
// allocated for it.
const (
	maxInflateRatio = 4
	inflateSlack    = 4 << 10
)

// legacyMagic starts a pre-1.6 torch.save file: PROTO 2, then LONG1 of the
// magic number 0x1950a86a20f9469cfc6c.
var legacyMagic = []byte{0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}

// ReadPyTorch reads a torch.save zip checkpoint such as pytorch_model.bin;
// see ParsePyTorch. The file is read through its zip directory, entry by
// entry, so it is never held in memory whole. A path that is not a regular
// file is refused before it is opened, as ReadSafetensors says.
func ReadPyTorch(path string) (*File, error) {
	return readSized(path, parsePyTorch)
}

// ParsePyTorch decodes the bytes of a torch.save zip archive (torch >= 1.6,
// torch/serialization.py _save) holding a state_dict; name is used as
// File.Path and in error messages.
//
// The archive has one top folder of any name (pytorch_model/, archive/)
// holding data.pkl, data/<key> for every storage, version and optionally
// byteorder. data.pkl is a pickle of an OrderedDict mapping names to
// torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
// requires_grad, backward_hooks), each storage being the persistent id
// ('storage', torch.FloatStorage, key, location, numel) whose little-endian
// bytes are data/<key>.
//
// Each storage is read and converted once. A tensor that is a contiguous
// view of its storage (the usual case, tied weights and offsets included)
// gets a capacity-limited subslice of the converted storage, so tensors
// sharing a storage share their Data; a strided view is copied out in
// row-major order. The pickle is never executed: see the package
// documentation for the allowlist and for the limits that keep a small file
// from demanding much memory.
func ParsePyTorch(data []byte, name string) (*File, error) {
	return parsePyTorch(bytes.NewReader(data), int64(len(data)), name)
}

// parsePyTorch reads the size-byte archive r within the memory budget of
// its size.
func parsePyTorch(r io.ReaderAt, size int64, name string) (*File, error) {
	return parsePyTorchWithin(r, size, name, newBudget(size))
}

// parsePyTorchWithin reads the size-byte archive r, its allocations taken
// from bud (the shards of one checkpoint share one budget).
func parsePyTorchWithin(r io.ReaderAt, size int64, name string, bud *budget) (*File, error) {
	head := make([]byte, len(legacyMagic))
	if n, _ := r.ReadAt(head, 0); n == len(head) && bytes.Equal(head, legacyMagic) {
		return nil, formatErr(name, "legacy (pre-1.6, non-zip) torch.save format is not supported; re-save it with a newer torch")
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, formatErr(name, "not a torch.save zip archive: %v", err)
	}
	entries := make(map[string]*zip.File, len(zr.File))
	var pkls []string
	for _, f := range zr.File {
		if _, dup := entries[f.Name]; dup {
			return nil, formatErr(name, "zip entry %q appears twice", f.Name)
		}
		entries[f.Name] = f
		if dir, base := path.Split(f.Name); base == "data.pkl" && dir != "" && strings.Count(f.Name, "/") == 1 {
			pkls = append(pkls, f.Name)
		}
	}
	switch {
	case len(pkls) == 0:
		return nil, formatErr(name, "zip archive has no <folder>/data.pkl entry (%d entries)", len(entries))
	case len(pkls) > 1:
		sort.Strings(pkls)
		return nil, formatErr(name, "zip archive has %d data.pkl entries %q, want one", len(pkls), pkls)
	}
	pklName := pkls[0]
	prefix := strings.TrimSuffix(pklName, "data.pkl")

	if bo, ok := entries[prefix+"byteorder"]; ok {
		b, err := readZipEntry(bo, 16, -1)
		if err != nil {
			return nil, formatErr(name, "%v", err)
		}
		if order := strings.TrimSpace(string(b)); order != "little" {
			return nil, formatErr(name, "%s says %q; only little-endian checkpoints are supported", bo.Name, clip(order))
		}
	}

	sd, err := readStatePickle(entries[pklName], name, size, bud)
	if err != nil {
		return nil, err
	}
	pklEntry := entries[pklName]

	keys := make([]string, 0, len(sd.storages))
	for k, s := range sd.storages {
		if len(s.users) > 0 { // a storage no tensor uses is not read
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	// Every entry read must lie inside the file, and no two may share bytes:
	// otherwise one stored block could be decoded as many storages.
	read := []*zip.File{pklEntry}
	for _, k := range keys {
		s := sd.storages[k]
		zf, ok := entries[prefix+"data/"+k]
		if !ok {
			return nil, formatErr(name, "%s: zip archive has no entry %s", s.what(), prefix+"data/"+k)
		}
		read = append(read, zf)
	}
	if err := checkDisjoint(read, size); err != nil {
		return nil, formatErr(name, "%v", err)
	}

	values := make(map[string][]float32, len(keys))
	var scratch []byte
	for i, k := range keys {
		s := sd.storages[k]
		vals, err := readStorage(s, read[i+1], size, bud, &scratch)
		if err != nil {
			var ve valueError
			if errors.Is(err, ErrUnsupportedDType) || errors.As(err, &ve) {
				return nil, fmt.Errorf("checkpoint: %s: %s: %w", name, s.what(), err)
			}
			return nil, formatErr(name, "%s: %v", s.what(), err)
		}
		values[k] = vals
	}

	f := newFile(name, FormatPyTorch)
	for _, tn := range sd.names {
		t := sd.tensors[tn]
		vals, err := materialise(t, values[t.storage.key], bud)
		if err != nil {
			return nil, formatErr(name, "tensor %q (storage %q, %s[%d]): %v", tn, t.storage.key, t.storage.class.name, t.storage.numel, err)
		}
		f.Tensors[tn] = &Entry{Name: tn, DType: t.storage.class.dtype, Shape: intShape(t.shape), Data: vals}
	}
	f.sortNames()
	return f, nil
}

// readStatePickle reads the pickle entry zf (after the compression policy,
// through a limit at its declared size) and runs it.
func readStatePickle(zf *zip.File, name string, size int64, bud *budget) (*stateDict, error) {
	if err := checkEntry(zf, size); err != nil {
		return nil, formatErr(name, "%v", err)
	}
	n := int64(zf.UncompressedSize64)
	if n > maxPickleBytes {
		return nil, formatErr(name, "zip entry %s holds %d bytes, more than the %d-byte limit", zf.Name, n, maxPickleBytes)
	}
	if !bud.take(n) {
		return nil, formatErr(name, "%v", bud.refuse(n, "reading "+zf.Name))
	}
	pkl, err := readZipEntry(zf, n, n)
	if err != nil {
		return nil, formatErr(name, "%v", err)
	}
	return parseStateDictPickle(pkl, name, zf.Name, bud)
}

// valueError marks a stored value that cannot be converted (an inexact
// integer, a BOOL that is not 0 or 1): the file is well formed.
type valueError struct{ error }

func (e valueError) Unwrap() error { return e.error }

// what names a storage in errors: storage "0" (torch.FloatStorage[6], tensor "w").
func (s *storageRef) what() string {
	return fmt.Sprintf("storage %q (%s[%d], tensor %q)", s.key, s.class.name, s.numel, s.users[0])
}

// readStorage converts storage s, the zip entry zf, to float32. The entry
// must hold exactly numel × element-size bytes (checked with overflow-safe
// arithmetic before anything is allocated), pass the compression policy and
// fit the budget; it is read through a limit at that size and decoded in
// chunks (through *scratch, reused across storages).
func readStorage(s *storageRef, zf *zip.File, size int64, bud *budget, scratch *[]byte) ([]float32, error) {
	item := int64(dtypeSizes[s.class.dtype])
	if item == 0 {
		return nil, fmt.Errorf("%w %s", ErrUnsupportedDType, s.class.dtype)
	}
	if s.numel > maxInt/item {
		return nil, fmt.Errorf("%d elements overflow a byte count", s.numel)
	}
	want := s.numel * item
	if zf.UncompressedSize64 != uint64(want) {
		return nil, fmt.Errorf("zip entry %s holds %d bytes, want %d", zf.Name, zf.UncompressedSize64, want)
	}
	if err := checkEntry(zf, size); err != nil {
		return nil, err
	}
	if s.numel > maxInt/4 {
		return nil, fmt.Errorf("%d elements overflow a float32 byte count", s.numel)
	}
	if !bud.take(4 * s.numel) {
		return nil, bud.refuse(4*s.numel, fmt.Sprintf("converting %d %s elements to float32", s.numel, s.class.dtype))
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, fmt.Errorf("zip entry %s: %v", zf.Name, err)
	}
	defer rc.Close()
	out := make([]float32, s.numel)
	if err := decodeFrom(out, s.class.dtype, io.LimitReader(rc, want), scratch); err != nil {
		var ve valueError
		if errors.As(err, &ve) {
			return nil, err
		}
		return nil, fmt.Errorf("zip entry %s: %v", zf.Name, err)
	}
	// Reading on to the end makes archive/zip check the CRC-32.
	var one [1]byte
	switch n, err := rc.Read(one[:]); {
	case n > 0:
		return nil, fmt.Errorf("zip entry %s holds more than %d bytes", zf.Name, want)
	case err != io.EOF:
		return nil, fmt.Errorf("zip entry %s: %v", zf.Name, err)
	}
	return out, nil
}

// checkEntry applies the compression policy to zf, an entry of a
// size-byte archive: stored entries must declare equal compressed and
// uncompressed sizes, deflated ones may expand at most maxInflateRatio
// times (plus inflateSlack bytes), and the compressed bytes must fit in
// the file.
func checkEntry(zf *zip.File, size int64) error {
	c, u := zf.CompressedSize64, zf.UncompressedSize64
	if c > uint64(size) {
		return fmt.Errorf("zip entry %s declares %d compressed bytes in a %d-byte file", zf.Name, c, size)
	}
	switch zf.Method {
	case zip.Store:
		if c != u {
			return fmt.Errorf("zip entry %s is stored but declares %d compressed and %d uncompressed bytes", zf.Name, c, u)
		}
	case zip.Deflate:
		if u > maxInflateRatio*c+inflateSlack {
			return fmt.Errorf("zip entry %s inflates %d bytes to %d (%.0fx); at most %dx (+%d bytes) is accepted, and torch.save stores entries uncompressed",
				zf.Name, c, u, float64(u)/float64(max(c, 1)), maxInflateRatio, inflateSlack)
		}
	default:
		return fmt.Errorf("zip entry %s uses compression method %d; torch.save stores entries uncompressed (method 0)", zf.Name, zf.Method)
	}
	return nil
}

// checkDisjoint verifies that the compressed bytes of the entries lie inside
// the size-byte file and do not overlap.
func checkDisjoint(zfs []*zip.File, size int64) error {
	type span struct {
		name       string
		begin, end int64
	}
	spans := make([]span, 0, len(zfs))
	for _, zf := range zfs {
		off, err := zf.DataOffset()
		if err != nil {
			return fmt.Errorf("zip entry %s: %v", zf.Name, err)
		}
		c := zf.CompressedSize64
		if off < 0 || off > size || c > uint64(size-off) {
			return fmt.Errorf("zip entry %s: %d bytes at offset %d run past the %d-byte file", zf.Name, c, off, size)
		}
		spans = append(spans, span{zf.Name, off, off + int64(c)})
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].begin < spans[b].begin })
	for i := 1; i < len(spans); i++ {
		if p, q := spans[i-1], spans[i]; q.begin < p.end {
			return fmt.Errorf("zip entries %s [%d, %d) and %s [%d, %d) overlap in the file", p.name, p.begin, p.end, q.name, q.begin, q.end)
		}
	}
	return nil
}

// readZipEntry reads zf, refusing more than limit bytes and, when exact >= 0,
// any other length than exact. Errors name the entry, not the file.
func readZipEntry(zf *zip.File, limit, exact int64) ([]byte, error) {
	if exact >= 0 && zf.UncompressedSize64 != uint64(exact) {
		return nil, fmt.Errorf("zip entry %s holds %d bytes, want %d", zf.Name, zf.UncompressedSize64, exact)
	}
	if zf.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("zip entry %s holds %d bytes, more than the %d-byte limit", zf.Name, zf.UncompressedSize64, limit)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, fmt.Errorf("zip entry %s: %v", zf.Name, err)
	}
	defer rc.Close()
	// Exactly the declared (and checked) size is allocated; one more byte
	// read tells an entry that holds more, and reaching EOF makes
	// archive/zip check the CRC-32.
	b := make([]byte, zf.UncompressedSize64)
	if n, err := io.ReadFull(rc, b); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, fmt.Errorf("zip entry %s holds %d bytes, declares %d", zf.Name, n, len(b))
		}
		return nil, fmt.Errorf("zip entry %s: %v", zf.Name, err)
	}
	var one [1]byte
	switch n, err := rc.Read(one[:]); {
	case n > 0:
		return nil, fmt.Errorf("zip entry %s holds more than the %d bytes it declares", zf.Name, len(b))
	case err != io.EOF:
		return nil, fmt.Errorf("zip entry %s: %v", zf.Name, err)
	}
	return b, nil
}
