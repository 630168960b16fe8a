package tokenizer_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/hostile"
	"github.com/roformer-go/roformer/tokenizer"
)

// Each of hostile.VocabCases in a model folder is refused by Load, naming
// vocab.txt, within twice its size plus a few MB of allocation; the same
// folder with its own vocab.txt loads.
func TestLoadHostileVocab(t *testing.T) {
	root := t.TempDir()
	if err := hostile.ConfigFolder(filepath.Join(root, "normal"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tokenizer.Load(filepath.Join(root, "normal")); err != nil {
		t.Fatalf("the normal folder: %v", err)
	}
	for name, gen := range hostile.VocabCases {
		vocab := gen()
		dir := filepath.Join(root, name)
		if err := hostile.VocabFolder(dir, vocab); err != nil {
			t.Fatal(err)
		}
		size := len(vocab)
		vocab = nil
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		_, err := tokenizer.Load(dir)
		runtime.ReadMemStats(&b)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "vocab.txt")) || !strings.Contains(err.Error(), "more than") {
			t.Errorf("%s: error %v, want it to name vocab.txt and the limit", name, err)
		}
		if n := b.TotalAlloc - a.TotalAlloc; n > uint64(2*size+4<<20) {
			t.Errorf("%s: Load allocated %d bytes for a %d-byte vocab.txt, want ≤ 2× + 4 MiB", name, n, size)
		}
	}
}
