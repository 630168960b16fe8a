package checkpoint

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// maxPickleBytes bounds data.pkl. A state_dict pickle takes about 100 bytes
// per tensor, so this is far above any real checkpoint.
const maxPickleBytes = 256 << 20

// legacyMagic starts a pre-1.6 torch.save file: PROTO 2, then LONG1 of the
// magic number 0x1950a86a20f9469cfc6c.
var legacyMagic = []byte{0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}

// ReadPyTorch reads a torch.save zip checkpoint such as pytorch_model.bin;
// see ParsePyTorch.
func ReadPyTorch(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return ParsePyTorch(data, path)
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
// bytes are data/<key>. Tensors sharing a storage (tied weights) each get
// their own copy of the values; a tensor alone on its storage uses the
// decoded storage without a copy. Strided views are materialised in row-major
// order. The pickle is never executed: see the package documentation for the
// allowlist.
func ParsePyTorch(data []byte, name string) (*File, error) {
	if bytes.HasPrefix(data, legacyMagic) {
		return nil, formatErr(name, "legacy (pre-1.6, non-zip) torch.save format is not supported; re-save it with a newer torch")
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
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

	pkl, err := readZipEntry(entries[pklName], maxPickleBytes, -1)
	if err != nil {
		return nil, formatErr(name, "%v", err)
	}
	sd, err := parseStateDictPickle(pkl, name, pklName)
	if err != nil {
		return nil, err
	}

	keys := make([]string, 0, len(sd.storages))
	for k, s := range sd.storages {
		if len(s.users) > 0 { // a storage no tensor uses is not read
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	values := make(map[string][]float32, len(keys))
	for _, k := range keys {
		s := sd.storages[k]
		what := fmt.Sprintf("storage %q (%s[%d], tensor %q)", k, s.class.name, s.numel, s.users[0])
		size := int64(dtypeSizes[s.class.dtype])
		if s.numel > maxInt/size {
			return nil, formatErr(name, "%s: %d elements overflow a byte count", what, s.numel)
		}
		zf, ok := entries[prefix+"data/"+k]
		if !ok {
			return nil, formatErr(name, "%s: zip archive has no entry %s", what, prefix+"data/"+k)
		}
		raw, err := readZipEntry(zf, s.numel*size, s.numel*size)
		if err != nil {
			return nil, formatErr(name, "%s: %v", what, err)
		}
		vals, err := decode(s.class.dtype, raw, int(s.numel))
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %s: %s: %w", name, what, err)
		}
		values[k] = vals
	}

	f := newFile(name, FormatPyTorch)
	for _, tn := range sd.names {
		t := sd.tensors[tn]
		vals, err := materialise(t, values[t.storage.key], len(t.storage.users) == 1)
		if err != nil {
			return nil, formatErr(name, "tensor %q (storage %q, %s[%d]): %v", tn, t.storage.key, t.storage.class.name, t.storage.numel, err)
		}
		f.Tensors[tn] = &Entry{Name: tn, DType: t.storage.class.dtype, Shape: intShape(t.shape), Data: vals}
	}
	f.sortNames()
	return f, nil
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
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("zip entry %s: %v", zf.Name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("zip entry %s holds more than %d bytes", zf.Name, limit)
	}
	if exact >= 0 && int64(len(b)) != exact {
		return nil, fmt.Errorf("zip entry %s holds %d bytes, want %d", zf.Name, len(b), exact)
	}
	return b, nil
}
