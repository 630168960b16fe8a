package bpe

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bpe.json over MaxFileBytes is refused from its size; one with more
// than MaxMerges merges while they are decoded; both naming the numbers.
func TestLoadLimits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileBytes + 1); err != nil { // sparse: nothing written
		t.Fatal(err)
	}
	f.Close()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "67108865 bytes, more than the 67108864") {
		t.Errorf("huge bpe.json: %v", err)
	}

	m, _ := Train([]string{"ab ab abc abcd"}, 300)
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	defer func(old int) { maxMerges = old }(maxMerges)
	maxMerges = m.NumMerges() - 1
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("more than %d merges (MaxMerges)", maxMerges)) {
		t.Errorf("%d merges over a limit of %d: %v", m.NumMerges(), maxMerges, err)
	}
	maxMerges = m.NumMerges()
	if _, err := Load(dir); err != nil {
		t.Errorf("%d merges at the limit: %v", m.NumMerges(), err)
	}
}
