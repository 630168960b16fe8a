package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/roformer-go/roformer/internal/boundedfile"
	"github.com/roformer-go/roformer/internal/jsonscan"
)

// dirCandidates are the file names ReadDir tries, in order; this is the order
// in which transformers' from_pretrained prefers them when safetensors is
// installed (modeling_utils.py, SAFE_WEIGHTS_NAME first).
var dirCandidates = []string{
	"model.safetensors",
	"model.safetensors.index.json",
	"pytorch_model.bin",
	"pytorch_model.bin.index.json",
}

// WeightFiles returns the names of a model folder's weights in the order
// ReadDir and DirFile prefer them (transformers' order when safetensors is
// installed): a single model.safetensors, its sharded index, a single
// pytorch_model.bin, its sharded index. A downloader fetches the first a
// repository has (hub.Download), so that it fetches what ReadDir reads.
func WeightFiles() []string { return slices.Clone(dirCandidates) }

// ReadDir reads the checkpoint of a Hugging Face model folder: the file
// DirFile picks.
func ReadDir(dir string) (*File, error) {
	p, _, err := DirFile(dir)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(p, ".index.json") {
		return ReadSharded(p)
	}
	return readByName(p)
}

// DirFile returns the checkpoint file of a Hugging Face model folder that
// ReadDir reads, and its stat (so a caller can size it before reading): the
// first of model.safetensors, model.safetensors.index.json (sharded),
// pytorch_model.bin and pytorch_model.bin.index.json (sharded) that exists.
// When none does, the error wraps fs.ErrNotExist. The first that exists
// but is not a regular file after symlinks are followed (a named pipe, a
// device, a directory) is refused, naming it (a *boundedfile.NotRegularError).
func DirFile(dir string) (string, fs.FileInfo, error) {
	for _, name := range dirCandidates {
		p := filepath.Join(dir, name)
		st, err := boundedfile.Stat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return "", nil, fmt.Errorf("checkpoint: %w", err)
		}
		return p, st, nil
	}
	return "", nil, fmt.Errorf("checkpoint: %s: no checkpoint found (looked for %s): %w",
		dir, strings.Join(dirCandidates, ", "), fs.ErrNotExist)
}

// readByName reads a single checkpoint file, choosing the format by its
// extension: .safetensors, or .bin/.pt/.pth for torch.save archives.
func readByName(p string) (*File, error) {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".safetensors":
		return ReadSafetensors(p)
	case ".bin", ".pt", ".pth":
		return ReadPyTorch(p)
	}
	return nil, unknownExt(p)
}

// readByNameWithin is readByName with the allocations taken from bud;
// mapped asks for a safetensors file mapped (MapDir).
func readByNameWithin(p string, bud *budget, mapped bool) (*File, error) {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".safetensors":
		if mapped {
			return mapSafetensors(p, bud)
		}
		return readSized(p, func(r io.ReaderAt, size int64, name string) (*File, error) {
			return parseSafetensorsWithin(r, size, name, bud, nil)
		})
	case ".bin", ".pt", ".pth":
		return readSized(p, func(r io.ReaderAt, size int64, name string) (*File, error) {
			return parsePyTorchWithin(r, size, name, bud)
		})
	}
	return nil, unknownExt(p)
}

func unknownExt(p string) error {
	return fmt.Errorf("checkpoint: %s: unknown checkpoint extension %q (want .safetensors, .bin, .pt or .pth): %w",
		p, filepath.Ext(p), ErrFormat)
}

// Limits of a shard index (*.index.json), which ReadSharded and ShardFiles
// refuse past: its bytes, the tensors its weight_map lists (counted before
// one is decoded) and the distinct shard files. transformers writes about
// 80 to 100 bytes per tensor (the name, the shard name, JSON punctuation):
// most indexes are under 1 MB, and one of 90,000 tensors (DeepSeek-V3's
// 671B parameters, by its layer and expert counts) under 10 MB.
const (
	MaxIndexBytes   = 32 << 20
	MaxIndexTensors = 1 << 20
	maxIndexShards  = 1 << 16
)

// shardIndex is a transformers sharded-checkpoint index
// (model.safetensors.index.json, pytorch_model.bin.index.json).
type shardIndex struct {
	Metadata  map[string]json.RawMessage `json:"metadata"`
	WeightMap weightMap                  `json:"weight_map"`
}

// weightMap is an index's weight_map, tensor name to shard file.
type weightMap map[string]string

// errTooManyTensors is weightMap's error past MaxIndexTensors entries.
var errTooManyTensors = fmt.Errorf("more than the limit of %d", MaxIndexTensors)

// UnmarshalJSON counts the object's entries first (jsonscan.Entries: one pass,
// nothing allocated) and refuses more than MaxIndexTensors before their map
// is made.
func (m *weightMap) UnmarshalJSON(data []byte) error {
	if n := jsonscan.Entries(data); n > MaxIndexTensors {
		return fmt.Errorf("weight_map lists %d tensors, %w", n, errTooManyTensors)
	}
	return json.Unmarshal(data, (*map[string]string)(m))
}

// ShardFiles reads a shard index from r (name names it in errors) within
// ReadSharded's limits and returns the distinct shard files its weight_map
// names, cleaned and sorted: what a downloader fetches besides the index.
// A shard that is not a path inside the index's folder is an error, as are
// an index over MaxIndexBytes, over MaxIndexTensors entries or over 65,536
// shards, and one with no entries.
func ShardFiles(r io.Reader, name string) ([]string, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxIndexBytes+1))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", name, err)
	}
	if len(raw) > MaxIndexBytes {
		return nil, formatErr(name, "more than the %d-byte limit of a shard index", MaxIndexBytes)
	}
	_, shards, err := parseIndex(raw, name)
	return shards, err
}

// parseIndex decodes a shard index and checks its shards: the index (its
// weight_map's shard names cleaned), each shard's tensors, and the shards
// sorted.
func parseIndex(raw []byte, name string) (*shardIndex, []string, error) {
	var idx shardIndex
	if err := json.Unmarshal(raw, &idx); errors.Is(err, errTooManyTensors) {
		return nil, nil, formatErr(name, "%v", err)
	} else if err != nil {
		return nil, nil, formatErr(name, "invalid index JSON: %v", err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, nil, formatErr(name, "index has no weight_map entries")
	}
	seen := map[string]bool{}
	for tname, shard := range idx.WeightMap {
		if !filepath.IsLocal(shard) {
			return nil, nil, formatErr(name, "tensor %q: shard %q is not a path inside the index folder", tname, shard)
		}
		shard = filepath.Clean(shard)
		idx.WeightMap[tname] = shard
		seen[shard] = true
		if len(seen) > maxIndexShards {
			return nil, nil, formatErr(name, "weight_map names more than %d shard files", maxIndexShards)
		}
	}
	shards := make([]string, 0, len(seen))
	for s := range seen {
		shards = append(shards, s)
	}
	sort.Strings(shards)
	return &idx, shards, nil
}

// ReadSharded reads a sharded checkpoint from its index file. The index maps
// every tensor name to a shard file in the same folder ("weight_map"); each
// shard is read once and must hold exactly the tensors mapped to it. The
// index "metadata" object becomes File.Metadata (strings as they are, other
// values as JSON text, e.g. "total_size").
//
// The index is read through a limit of 32 MiB and may list at most 2^20
// tensors in at most 65,536 shard files; shard names are cleaned
// (filepath.Clean), so that one file cannot be listed under several
// spellings. Each shard is read within its own memory budget (see the
// package documentation).
func ReadSharded(indexPath string) (*File, error) {
	return readSharded(indexPath, false)
}

// readSharded is ReadSharded, with the safetensors shards mapped when
// mapped is set (MapDir).
func readSharded(indexPath string, mapped bool) (*File, error) {
	raw, err := readLimited(indexPath, MaxIndexBytes)
	if err != nil {
		return nil, err
	}
	idx, shards, err := parseIndex(raw, indexPath)
	if err != nil {
		return nil, err
	}
	byShard := map[string][]string{}
	for tname, shard := range idx.WeightMap {
		byShard[shard] = append(byShard[shard], tname)
	}

	out := newFile(indexPath, "")
	for k, v := range idx.Metadata {
		var s string
		if json.Unmarshal(v, &s) == nil {
			out.Metadata[k] = s
		} else {
			out.Metadata[k] = string(v)
		}
	}
	// The shards share one memory budget, of their sizes summed: a
	// budget each would let many small shards take 128 MiB apiece.
	dir := filepath.Dir(indexPath)
	var total int64
	for _, shard := range shards {
		p := filepath.Join(dir, shard)
		st, err := boundedfile.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %s: shard %s (holding %d tensors, e.g. %q): %w",
				indexPath, shard, len(byShard[shard]), firstSorted(byShard[shard]), err)
		}
		total += max(st.Size(), 0) // each size < 2^63 and at most 2^16 shards: a sum past 2^63 is refused by the budget's own arithmetic below
		if total < 0 {
			total = math.MaxInt64
		}
	}
	bud := newBudget(total)
	for _, shard := range shards {
		f, err := readByNameWithin(filepath.Join(dir, shard), bud, mapped)
		if err != nil {
			return nil, err
		}
		out.maps = append(out.maps, f.maps...)
		switch {
		case out.Format == "":
			out.Format = f.Format
		case out.Format != f.Format:
			return nil, formatErr(indexPath, "shard %s is %s but earlier shards are %s", shard, f.Format, out.Format)
		}
		want := byShard[shard]
		sort.Strings(want)
		for _, tname := range want {
			e, ok := f.Tensors[tname]
			if !ok {
				return nil, formatErr(indexPath, "tensor %q is mapped to shard %s, which does not hold it", tname, shard)
			}
			out.Tensors[tname] = e
		}
		if len(f.Tensors) != len(want) {
			for _, tname := range f.Names {
				switch other, ok := idx.WeightMap[tname]; {
				case !ok:
					return nil, formatErr(indexPath, "shard %s holds tensor %q, which weight_map does not list", shard, tname)
				case other != shard:
					return nil, formatErr(indexPath, "shard %s holds tensor %q, which weight_map assigns to %s", shard, tname, other)
				}
			}
		}
	}
	out.sortNames()
	return out, nil
}

// readLimited reads the file at path, refusing one larger than limit bytes
// (checked both from its size and while reading, through a limit).
func readLimited(path string, limit int64) ([]byte, error) {
	b, err := boundedfile.Read(path, limit)
	var big *boundedfile.TooLargeError
	if errors.As(err, &big) {
		return nil, fmt.Errorf("checkpoint: %w (an index): %w", err, ErrFormat)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return b, nil
}

func firstSorted(s []string) string {
	m := s[0]
	for _, x := range s[1:] {
		if x < m {
			m = x
		}
	}
	return m
}
