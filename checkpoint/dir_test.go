package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// shardedSafetensors writes two shards and an index into dir.
func shardedSafetensors(t *testing.T, dir string) {
	t.Helper()
	s1 := []*Entry{
		{Name: "a.weight", Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}},
		{Name: "a.bias", Shape: []int{2}, Data: []float32{5, 6}},
	}
	s2 := []*Entry{{Name: "b.weight", DType: "BF16", Shape: []int{3}, Data: []float32{7, 8, 9}}}
	if err := WriteSafetensors(filepath.Join(dir, "model-00001-of-00002.safetensors"), s1, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := WriteSafetensors(filepath.Join(dir, "model-00002-of-00002.safetensors"), s2, nil); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "model.safetensors.index.json"), []byte(`{
  "metadata": {"total_size": 30, "note": "two shards"},
  "weight_map": {
    "a.bias": "model-00001-of-00002.safetensors",
    "a.weight": "model-00001-of-00002.safetensors",
    "b.weight": "model-00002-of-00002.safetensors"
  }
}`))
}

func TestReadDirSharded(t *testing.T) {
	t.Run("safetensors", func(t *testing.T) {
		dir := t.TempDir()
		shardedSafetensors(t, dir)
		f, err := ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.Names, []string{"a.bias", "a.weight", "b.weight"}) || f.Format != FormatSafetensors {
			t.Fatalf("Names %q Format %q", f.Names, f.Format)
		}
		if f.Path != filepath.Join(dir, "model.safetensors.index.json") {
			t.Errorf("Path = %q", f.Path)
		}
		if f.Metadata["total_size"] != "30" || f.Metadata["note"] != "two shards" {
			t.Errorf("Metadata = %q", f.Metadata)
		}
		if e := f.Tensors["b.weight"]; e.DType != "BF16" || !slices.Equal(e.Data, []float32{7, 8, 9}) {
			t.Errorf("b.weight = %s %v", e.DType, e.Data)
		}
		if e := f.Tensors["a.weight"]; !slices.Equal(e.Data, []float32{1, 2, 3, 4}) {
			t.Errorf("a.weight = %v", e.Data)
		}
	})
	t.Run("pytorch", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "pytorch_model-00001-of-00002.bin"), smallTorchZip(t))
		pkl := statePickle([]ptTensor{{name: "c", key: "0", storage: "HalfStorage", numel: 2, shape: []int{2}}})
		writeFile(t, filepath.Join(dir, "pytorch_model-00002-of-00002.bin"),
			torchZip(t, "pytorch_model-00002-of-00002", pkl, map[string][]byte{"0": encodeAs("F16", []float32{1.5, -1})}))
		writeFile(t, filepath.Join(dir, "pytorch_model.bin.index.json"), []byte(`{"metadata":{},"weight_map":{
			"a":"pytorch_model-00001-of-00002.bin","b":"pytorch_model-00001-of-00002.bin",
			"tied":"pytorch_model-00001-of-00002.bin","c":"pytorch_model-00002-of-00002.bin"}}`))
		f, err := ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.Names, []string{"a", "b", "c", "tied"}) || f.Format != FormatPyTorch {
			t.Fatalf("Names %q Format %q", f.Names, f.Format)
		}
		if e := f.Tensors["c"]; e.DType != "F16" || !slices.Equal(e.Data, []float32{1.5, -1}) {
			t.Errorf("c = %s %v", e.DType, e.Data)
		}
	})
}

func TestReadDirPreference(t *testing.T) {
	st := []*Entry{{Name: "from.safetensors", Shape: []int{}, Data: []float32{1}}}
	cases := []struct {
		name   string
		files  []string // of: st, st-index, bin, bin-index
		want   string   // first tensor name, or "" for not found
		format string
	}{
		{"all four", []string{"st", "st-index", "bin", "bin-index"}, "from.safetensors", FormatSafetensors},
		{"safetensors index before bin", []string{"st-index", "bin"}, "a.bias", FormatSafetensors},
		{"bin before its index", []string{"bin", "bin-index"}, "a", FormatPyTorch},
		{"bin index only", []string{"bin-index"}, "a", FormatPyTorch},
		{"nothing", nil, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, k := range c.files {
				switch k {
				case "st":
					if err := WriteSafetensors(filepath.Join(dir, "model.safetensors"), st, nil); err != nil {
						t.Fatal(err)
					}
				case "st-index":
					shardedSafetensors(t, dir)
				case "bin":
					writeFile(t, filepath.Join(dir, "pytorch_model.bin"), smallTorchZip(t))
				case "bin-index":
					writeFile(t, filepath.Join(dir, "shard.bin"), smallTorchZip(t))
					writeFile(t, filepath.Join(dir, "pytorch_model.bin.index.json"),
						[]byte(`{"weight_map":{"a":"shard.bin","b":"shard.bin","tied":"shard.bin"}}`))
				}
			}
			f, err := ReadDir(dir)
			if c.want == "" {
				if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "model.safetensors, model.safetensors.index.json") {
					t.Fatalf("error %v, want not-exist listing the names", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Names[0] != c.want || f.Format != c.format {
				t.Errorf("got %s with first tensor %q, want %s with %q", f.Format, f.Names[0], c.format, c.want)
			}
		})
	}
}

func TestReadShardedErrors(t *testing.T) {
	cases := []struct {
		name  string
		index string
		setup func(t *testing.T, dir string)
		want  []string
		is    error
	}{
		{"invalid json", `{"weight_map":`, nil, []string{"invalid index JSON"}, ErrFormat},
		{"no weight_map", `{"metadata":{}}`, nil, []string{"no weight_map entries"}, ErrFormat},
		{"missing shard", `{"weight_map":{"x":"gone.safetensors"}}`, nil, []string{`shard gone.safetensors (holding 1 tensors, e.g. "x")`}, fs.ErrNotExist},
		{"escaping shard path", `{"weight_map":{"x":"../other/model.safetensors"}}`, nil, []string{`tensor "x": shard "../other/model.safetensors" is not a path inside`}, ErrFormat},
		{"tensor missing from shard", `{"weight_map":{"a.weight":"s.safetensors","a.bias":"s.safetensors","ghost":"s.safetensors"}}`,
			func(t *testing.T, dir string) { writeShard(t, dir) }, []string{`tensor "ghost" is mapped to shard s.safetensors, which does not hold it`}, ErrFormat},
		{"unmapped tensor in shard", `{"weight_map":{"a.weight":"s.safetensors"}}`,
			func(t *testing.T, dir string) { writeShard(t, dir) }, []string{`shard s.safetensors holds tensor "a.bias", which weight_map does not list`}, ErrFormat},
		{"tensor in two shards", `{"weight_map":{"a.weight":"s.safetensors","a.bias":"t.safetensors"}}`,
			func(t *testing.T, dir string) {
				writeShard(t, dir)
				if err := os.Link(filepath.Join(dir, "s.safetensors"), filepath.Join(dir, "t.safetensors")); err != nil {
					t.Fatal(err)
				}
			}, []string{`shard s.safetensors holds tensor "a.bias", which weight_map assigns to t.safetensors`}, ErrFormat},
		{"unknown shard extension", `{"weight_map":{"x":"s.npz"}}`,
			func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "s.npz"), []byte("x")) }, []string{`unknown checkpoint extension ".npz"`}, ErrFormat},
		{"corrupt shard", `{"weight_map":{"x":"s.safetensors"}}`,
			func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "s.safetensors"), []byte{1}) }, []string{"s.safetensors: file is 1 bytes"}, ErrFormat},
		{"mixed formats", `{"weight_map":{"a.weight":"s.safetensors","a.bias":"s.safetensors","a":"t.bin","b":"t.bin","tied":"t.bin"}}`,
			func(t *testing.T, dir string) {
				writeShard(t, dir)
				writeFile(t, filepath.Join(dir, "t.bin"), smallTorchZip(t))
			}, []string{"shard t.bin is pytorch but earlier shards are safetensors"}, ErrFormat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.setup != nil {
				c.setup(t, dir)
			}
			idx := filepath.Join(dir, "model.safetensors.index.json")
			writeFile(t, idx, []byte(c.index))
			_, err := ReadSharded(idx)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if !errors.Is(err, c.is) {
				t.Errorf("error %q does not wrap %v", err, c.is)
			}
		})
	}
}

func writeShard(t *testing.T, dir string) {
	t.Helper()
	err := WriteSafetensors(filepath.Join(dir, "s.safetensors"), []*Entry{
		{Name: "a.weight", Shape: []int{1}, Data: []float32{1}},
		{Name: "a.bias", Shape: []int{1}, Data: []float32{2}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
}
