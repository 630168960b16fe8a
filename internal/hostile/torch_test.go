package hostile

import (
	"archive/zip"
	"bytes"
	"testing"
)

// TestSizes checks that the generators build the files of issue 22: small
// archives that declare much larger contents.
func TestSizes(t *testing.T) {
	cases := []struct {
		name           string
		data           []byte
		minLen, maxLen int
		entry          string
		declared       uint64
	}{
		{"compressed storage", CompressedStorageBin(1 << 28), 250 << 10, 270 << 10, "archive/data/0", 1 << 28},
		{"200 shared views", SharedViewsBin(200, 4<<20), 4 << 10, 6 << 10, "archive/data/0", 4 << 20},
		{"64 Mi DUPs", DupBombBin(64 << 20), 60 << 10, 70 << 10, "archive/data.pkl", 64<<20 + 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if n := len(c.data); n < c.minLen || n > c.maxLen {
				t.Errorf("file is %d bytes, want %d to %d", n, c.minLen, c.maxLen)
			}
			zr, err := zip.NewReader(bytes.NewReader(c.data), int64(len(c.data)))
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]*zip.File{}
			for _, f := range zr.File {
				names[f.Name] = f
			}
			for _, want := range []string{"archive/data.pkl", "archive/version"} {
				if names[want] == nil {
					t.Errorf("no entry %s", want)
				}
			}
			f := names[c.entry]
			if f == nil || f.UncompressedSize64 != c.declared || f.Method != zip.Deflate {
				t.Fatalf("entry %s: %+v, want deflated, declaring %d bytes", c.entry, f, c.declared)
			}
		})
	}
}

// TestPickleShape spot-checks the state_dict pickle: the views memoize
// their arguments, so each one adds a few dozen bytes.
func TestPickleShape(t *testing.T) {
	var p pickler
	p.header()
	p.key("w")
	p.tensor(6, 0, []int64{2, 3}, []int64{3, 1})
	one := p.Len()
	p.key("x")
	p.tensor(6, 0, []int64{2, 3}, []int64{3, 1})
	if per := p.Len() - one; per > 30 {
		t.Errorf("a repeated view takes %d bytes of pickle, want at most 30", per)
	}
	if !bytes.HasPrefix(p.Bytes(), []byte("\x80\x02ccollections\nOrderedDict\nq\x00)R(")) {
		t.Errorf("pickle starts %q", p.Bytes()[:40])
	}
}
