package checkpoint_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/internal/hostile"
)

// TestHostileIssueFiles reads the attacker files of issue 22, built by
// internal/hostile, through ReadPyTorch and ReadDir as `roformer inspect`
// does. On the reader before the fix they took 0.85 to 6.8 GB (or died
// with "fatal error: out of memory"); each must now be refused with an
// error naming the file, the entry and the numbers, allocating little.
// (This is an external test: internal/hostile imports model/roformer,
// which imports checkpoint.)
func TestHostileIssueFiles(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want []string
	}{
		{"deflated 2^28-byte storage", hostile.CompressedStorageBin(1 << 28),
			[]string{`storage "0" (torch.FloatStorage[67108864], tensor "w")`, "archive/data/0 inflates", "to 268435456", "at most 4x"}},
		{"200 views of a deflated 4 MB storage", hostile.SharedViewsBin(200, 4<<20),
			[]string{`storage "0" (torch.FloatStorage[1048576], tensor "v0")`, "archive/data/0 inflates", "to 4194304"}},
		{"3000 views of a deflated 4 MB storage", hostile.SharedViewsBin(3000, 4<<20),
			[]string{"archive/data.pkl inflates"}},
		{"64 Mi DUPs", hostile.DupBombBin(64 << 20),
			[]string{"archive/data.pkl inflates", "to 67108868"}},
		{"255 Mi DUPs", hostile.DupBombBin(255 << 20),
			[]string{"archive/data.pkl inflates", "to 267386884"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "pytorch_model.bin")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, read := range []func() error{
				func() error { _, err := checkpoint.ReadPyTorch(path); return err },
				func() error { _, err := checkpoint.ReadDir(dir); return err },
			} {
				var a, b runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&a)
				err := read()
				runtime.ReadMemStats(&b)
				got := b.TotalAlloc - a.TotalAlloc
				if err == nil {
					t.Fatal("accepted")
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "checkpoint: "+path+": ") {
					t.Errorf("error %q does not start with the package and file", msg)
				}
				for _, w := range c.want {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q does not mention %q", msg, w)
					}
				}
				// Refused from the zip directory, before inflating: a
				// few KB, far below the budget of 4 × size + 128 MiB.
				t.Logf("%d-byte file: %d bytes allocated: %s", len(c.data), got, msg)
				if limit := uint64(1<<20 + 4*len(c.data)); got > limit {
					t.Errorf("allocated %d bytes, more than %d", got, limit)
				}
			}
		})
	}
}

// The shards of one checkpoint share one memory budget, of their sizes
// summed: three shards of about 100 KB that each copy 56 MiB of strided
// views are each within a budget of their own (4 × size + 128 MiB) but not
// together, and are refused; one of them alone reads.
func TestShardsShareOneBudget(t *testing.T) {
	const views, side = 900, 128
	dir := t.TempDir()
	var wm []string
	for s := range 3 {
		prefix, name := fmt.Sprintf("s%d.v", s), fmt.Sprintf("shard%d.bin", s)
		if err := os.WriteFile(filepath.Join(dir, name), hostile.StridedViewsBin(prefix, views, side), 0o644); err != nil {
			t.Fatal(err)
		}
		for i := range views {
			wm = append(wm, fmt.Sprintf("%q: %q", fmt.Sprintf("%s%d", prefix, i), name))
		}
	}
	index := `{"metadata": {}, "weight_map": {` + strings.Join(wm, ", ") + `}}`
	if err := os.WriteFile(filepath.Join(dir, "pytorch_model.bin.index.json"), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := checkpoint.ReadPyTorch(filepath.Join(dir, "shard0.bin")); err != nil || len(f.Tensors) != views {
		t.Fatalf("one shard alone: %v", err)
	}
	_, err := checkpoint.ReadDir(dir)
	if err == nil || !strings.Contains(err.Error(), "memory budget") {
		t.Fatalf("three shards: %v, want the shared memory budget's refusal", err)
	}
}
