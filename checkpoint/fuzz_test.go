package checkpoint

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The fuzz targets check that no input panics, that every error names the
// package and file, that whatever parses is self-consistent, and that no
// input makes a reader allocate more than allocBound(len(input)): the
// memory budget (4 × size + 128 MiB) plus the zip directory's share. Run them
// with, e.g., go test ./checkpoint -run '^$' -fuzz FuzzParseSafetensors
// -fuzztime 60s. Their seeds are generated below; -write-fuzz-seeds also
// stores them under testdata/fuzz so that plain go test runs them too.

var writeFuzzSeeds = flag.Bool("write-fuzz-seeds", false, "write the generated fuzz seeds to testdata/fuzz")

// safetensorsSeeds returns small valid and broken safetensors files.
func safetensorsSeeds(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, dtype := range []string{"F32", "F16", "BF16"} {
		entries := []*Entry{
			{Name: "w", DType: dtype, Shape: []int{2, 2}, Data: []float32{1, -2, 0.5, 3}},
			{Name: "b", DType: dtype, Shape: []int{2}, Data: []float32{0, 7}},
			{Name: "s", DType: dtype, Shape: []int{}, Data: []float32{1}},
		}
		header, sorted, err := safetensorsHeader(entries, map[string]string{"format": "pt"}, "seed")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := writeSafetensorsTo(&buf, header, sorted); err != nil {
			t.Fatal(err)
		}
		out["valid_"+dtype] = buf.Bytes()
	}
	out["ints"] = stBytes(`{"i":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"m":{"dtype":"BOOL","shape":[1],"data_offsets":[16,17]}}`,
		append(encodeAs("I64", []float32{3, -1}), 1))
	out["overlap"] = stBytes(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`,
		f32Bytes(1, 2, 3, 4))
	out["size_mismatch"] = stBytes(`{"x":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}`, f32Bytes(1, 2, 3))
	out["empty"] = stBytes(`{}`, nil)
	return out
}

// torchSeeds returns small valid and malicious torch zip archives.
func torchSeeds(t testing.TB) map[string][]byte {
	out := map[string][]byte{"small": smallTorchZip(t)}
	pkl := statePickle([]ptTensor{
		{name: "t", key: "0", storage: "HalfStorage", numel: 6, shape: []int{3, 2}, stride: []int{1, 3}},
		{name: "o", key: "0", storage: "HalfStorage", numel: 6, offset: 4, shape: []int{2}},
	})
	out["strided_half"] = torchZip(t, "archive", pkl, map[string][]byte{"0": encodeAs("F16", []float32{1, 2, 3, 4, 5, 6})})
	out["os_system"] = torchZip(t, "archive", maliciousPickles()["os.system"], nil)
	out["dups"] = torchZip(t, "archive", repeatOps([]byte{0x80, 2, ']'}, []byte{'2'}, 1000, []byte{'.'}), nil)
	out["alias"] = aliasZip([]zipEntry{{"a/data.pkl", statePickle([]ptTensor{
		{name: "x", key: "0", storage: "FloatStorage", numel: 2, shape: []int{2}},
		{name: "y", key: "1", storage: "FloatStorage", numel: 2, shape: []int{2}},
	})}, {"a/data/0", f32Bytes(1, 2)}}, "a/data/0", []string{"a/data/1"})
	out["deflated"] = zipDeflated(t, []zipEntry{{"a/data.pkl", pkl}, {"a/data/0", encodeAs("F16", []float32{1, 2, 3, 4, 5, 6})}})
	return out
}

// pickleSeeds returns data.pkl contents.
func pickleSeeds() map[string][]byte {
	out := map[string][]byte{
		"state": statePickle([]ptTensor{
			{name: "a", key: "0", storage: "FloatStorage", numel: 4, shape: []int{2, 2}},
			{name: "b", key: "1", storage: "BFloat16Storage", numel: 3, offset: 1, shape: []int{2}},
			{name: "c", key: "0", storage: "FloatStorage", numel: 4, shape: []int{2, 2}, stride: []int{1, 2}},
		}),
	}
	for name, p := range maliciousPickles() {
		out["malicious_"+strings.NewReplacer(" ", "_", ".", "_").Replace(name)] = p
	}
	out["dup_memo"] = repeatOps([]byte{0x80, 4, ']'}, []byte{'2', 0x94, 'a'}, 100, []byte{'h', 3, '.'})
	out["build"] = []byte("\x80\x02ccollections\nOrderedDict\n)R}(X\x01\x00\x00\x00kNubq\x00h\x00.")
	return out
}

// TestWriteFuzzSeeds stores the generated seeds when -write-fuzz-seeds is set.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeFuzzSeeds {
		t.Skip("run with -write-fuzz-seeds to regenerate testdata/fuzz")
	}
	sets := map[string]map[string][]byte{
		"FuzzParseSafetensors": safetensorsSeeds(t),
		"FuzzReadPyTorch":      torchSeeds(t),
		"FuzzStateDictPickle":  pickleSeeds(),
	}
	for target, seeds := range sets {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.WriteFile(filepath.Join(dir, "seed_"+name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkFile verifies the invariants of a successfully parsed File.
func checkFile(t *testing.T, f *File, format string) {
	t.Helper()
	if f.Format != format || f.Metadata == nil || len(f.Names) != len(f.Tensors) || !sort.StringsAreSorted(f.Names) {
		t.Fatalf("inconsistent File: format %q, %d names, %d tensors", f.Format, len(f.Names), len(f.Tensors))
	}
	for _, name := range f.Names {
		e := f.Tensors[name]
		if e == nil || e.Name != name {
			t.Fatalf("tensor %q missing or misnamed", name)
		}
		n := 1
		for _, d := range e.Shape {
			if d < 0 {
				t.Fatalf("tensor %q: negative dim in %v", name, e.Shape)
			}
			n *= d
		}
		if n != len(e.Data) {
			t.Fatalf("tensor %q: shape %v but %d values", name, e.Shape, len(e.Data))
		}
		if dtypeSizes[e.DType] == 0 {
			t.Fatalf("tensor %q: dtype %q", name, e.DType)
		}
	}
}

// checkAlloc runs read and fails t when it allocated more than
// allocBound(size) bytes.
func checkAlloc(t *testing.T, size int, read func()) {
	t.Helper()
	if got := allocatedNoGC(read); got > allocBound(size) {
		t.Fatalf("reading %d bytes allocated %d, more than %d", size, got, allocBound(size))
	}
}

func checkErr(t *testing.T, err error, file string) {
	t.Helper()
	if !strings.HasPrefix(err.Error(), "checkpoint: "+file+": ") {
		t.Fatalf("error %q does not start with the package and file", err)
	}
}

func FuzzParseSafetensors(f *testing.F) {
	for _, seed := range safetensorsSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var file *File
		var err error
		checkAlloc(t, len(data), func() { file, err = ParseSafetensors(data, "fuzz.st") })
		if err != nil {
			checkErr(t, err, "fuzz.st")
			return
		}
		checkFile(t, file, FormatSafetensors)
		// A file of writable dtypes survives a write and a re-read.
		entries := make([]*Entry, 0, len(file.Names))
		for _, name := range file.Names {
			e := file.Tensors[name]
			if !writableDTypes[e.DType] {
				return
			}
			entries = append(entries, e)
		}
		header, sorted, err := safetensorsHeader(entries, file.Metadata, "again")
		if err != nil {
			t.Fatalf("re-encoding a parsed file: %v", err)
		}
		var buf bytes.Buffer
		if err := writeSafetensorsTo(&buf, header, sorted); err != nil {
			t.Fatal(err)
		}
		again, err := ParseSafetensors(buf.Bytes(), "again")
		if err != nil {
			t.Fatalf("re-reading a written file: %v", err)
		}
		if !slices.Equal(again.Names, file.Names) || len(again.Metadata) != len(file.Metadata) {
			t.Fatalf("round trip changed names %q -> %q or metadata", file.Names, again.Names)
		}
		for _, name := range file.Names {
			a, b := file.Tensors[name], again.Tensors[name]
			if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) {
				t.Fatalf("%s: %s %v -> %s %v", name, a.DType, a.Shape, b.DType, b.Shape)
			}
			for i := range a.Data {
				x, y := a.Data[i], b.Data[i]
				if math.Float32bits(x) != math.Float32bits(y) && !(x != x && y != y) {
					t.Fatalf("%s[%d]: %v -> %v", name, i, x, y)
				}
			}
		}
	})
}

func FuzzReadPyTorch(f *testing.F) {
	for _, seed := range torchSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var file *File
		var err error
		checkAlloc(t, len(data), func() { file, err = ParsePyTorch(data, "fuzz.bin") })
		if err != nil {
			checkErr(t, err, "fuzz.bin")
			return
		}
		checkFile(t, file, FormatPyTorch)
	})
}

// FuzzStateDictPickle drives the pickle layer directly (zip CRCs make most
// mutations of a whole archive fail before the pickle is read), with every
// storage filled with ones.
func FuzzStateDictPickle(f *testing.F) {
	for _, seed := range pickleSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, pkl []byte) {
		var sd *stateDict
		var err error
		bud := newBudget(int64(len(pkl)))
		got := allocatedNoGC(func() { sd, err = parseStateDictPickle(pkl, "fuzz.bin", "a/data.pkl", bud) })
		// The scan's estimate, charged to the budget, bounds what the VM
		// allocated (plus the scan's own small state and error text). A
		// second run tells a real overrun from another goroutine's noise.
		if slack := uint64(bud.used) + 256<<10 + 64*uint64(len(pkl)); got > slack {
			again := newBudget(int64(len(pkl)))
			if got2 := allocatedNoGC(func() { parseStateDictPickle(pkl, "fuzz.bin", "a/data.pkl", again) }); got2 > slack {
				t.Fatalf("%d-byte pickle allocated %d and %d bytes, the estimate was %d", len(pkl), got, got2, bud.used)
			}
		}
		if err != nil {
			checkErr(t, err, "fuzz.bin")
			return
		}
		if len(sd.names) != len(sd.tensors) {
			t.Fatalf("%d names, %d tensors", len(sd.names), len(sd.tensors))
		}
		for _, name := range sd.names {
			tr := sd.tensors[name]
			if tr.storage.numel > 1<<16 {
				continue
			}
			st := make([]float32, tr.storage.numel)
			for i := range st {
				st[i] = 1
			}
			vals, err := materialise(tr, st, newBudget(int64(len(pkl))))
			if err != nil {
				continue
			}
			n, err := numel(tr.shape, 1)
			if err != nil || n != int64(len(vals)) {
				t.Fatalf("%s: shape %v, %d values (%v)", name, tr.shape, len(vals), err)
			}
			for i, v := range vals {
				if v != 1 {
					t.Fatalf("%s[%d] = %v, not read from the storage", name, i, v)
				}
			}
		}
	})
}
