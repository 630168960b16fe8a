package checkpoint

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// ShardFiles gives an index's distinct shards cleaned and sorted, and
// refuses what ReadSharded refuses: a shard outside the folder, no
// entries, an index over MaxIndexBytes.
func TestShardFiles(t *testing.T) {
	got, err := ShardFiles(strings.NewReader(`{"metadata": {"total_size": 8}, "weight_map": {"b": "./s2.safetensors", "a": "s1.safetensors", "c": "s2.safetensors"}}`), "i.json")
	if err != nil || !slices.Equal(got, []string{"s1.safetensors", "s2.safetensors"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for in, want := range map[string]string{
		`{"weight_map": {"a": "../x.safetensors"}}`:                       "not a path inside the index folder",
		`{"weight_map": {}}`:                                              "no weight_map entries",
		`{"weight_map": [1]}`:                                             "invalid index JSON",
		`{"weight_map": {"a": "s"}}` + strings.Repeat(" ", MaxIndexBytes): "byte limit of a shard index",
	} {
		_, err := ShardFiles(strings.NewReader(in), "i.json")
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "i.json") {
			t.Errorf("%.40q: got %v, want %q", in, err, want)
		}
	}
	if w := WeightFiles(); len(w) != 4 || w[0] != "model.safetensors" {
		t.Errorf("WeightFiles() = %v", w)
	}
	WeightFiles()[0] = "x"
	if WeightFiles()[0] != "model.safetensors" {
		t.Error("WeightFiles shares its slice")
	}
}
