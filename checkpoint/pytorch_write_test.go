package checkpoint

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/gopickle/pickle"

	"github.com/roformer-go/roformer/tensor"
)

// ptWriteEntries covers the dtypes, a scalar, an empty tensor, more than
// three dimensions (a MARK tuple), a non-ASCII name and float extremes.
func ptWriteEntries() []*Entry {
	big := make([]float32, 2*3*4*5)
	for i := range big {
		big[i] = float32(i) - 7.25
	}
	return []*Entry{
		{Name: "dense.weight", DType: "F32", Shape: []int{2, 3}, Data: []float32{1, -2, 3.5, float32(math.Inf(1)), math.SmallestNonzeroFloat32, math.MaxFloat32}},
		{Name: "dense.bias", Shape: []int{3}, Data: []float32{0.1, -0.2, 0}},
		{Name: "half", DType: "F16", Shape: []int{2}, Data: []float32{0.1, -65504}},
		{Name: "brain", DType: "BF16", Shape: []int{1, 2}, Data: []float32{0.1, 3e38}},
		{Name: "scalar", Shape: []int{}, Data: []float32{42}},
		{Name: "empty", Shape: []int{0, 3}, Data: []float32{}},
		{Name: "empty.inner", Shape: []int{2, 0, 3}, Data: []float32{}},
		{Name: "four.d", Shape: []int{2, 3, 4, 5}, Data: big},
		{Name: "gewicht.ü", Shape: []int{1}, Data: []float32{-1}},
	}
}

// storedValue is what WritePyTorch stores for v as dtype, read back.
func storedValue(dtype string, v float32) float32 {
	switch dtype {
	case "F16":
		return tensor.F16ToF32(tensor.F32ToF16(v))
	case "BF16":
		return tensor.BF16ToF32(tensor.F32ToBF16(v))
	}
	return v
}

func TestWritePyTorchRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pytorch_model.bin")
	want := ptWriteEntries()
	if err := WritePyTorch(path, want); err != nil {
		t.Fatal(err)
	}
	f, err := ReadPyTorch(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Format != FormatPyTorch || len(f.Tensors) != len(want) {
		t.Fatalf("format %q, %d tensors %v; want pytorch, %d", f.Format, len(f.Tensors), f.Names, len(want))
	}
	for _, w := range want {
		g := f.Tensors[w.Name]
		if g == nil {
			t.Fatalf("tensor %q missing; have %v", w.Name, f.Names)
		}
		dt := dtypeOrF32(w.DType)
		if g.DType != dt || !slices.Equal(g.Shape, w.Shape) || len(g.Data) != len(w.Data) {
			t.Fatalf("%s: got %s %v (%d values), want %s %v (%d)", w.Name, g.DType, g.Shape, len(g.Data), dt, w.Shape, len(w.Data))
		}
		for i, v := range w.Data {
			if sv := storedValue(dt, v); math.Float32bits(g.Data[i]) != math.Float32bits(sv) {
				t.Fatalf("%s[%d] = %v, want %v", w.Name, i, g.Data[i], sv)
			}
		}
	}
}

// TestWritePyTorchLayout checks the archive torch.save would write: the
// entry names, stored entries, 64-byte aligned data, version and byteorder,
// and a data.pkl that the package's own scanner accepts within a small
// budget.
func TestWritePyTorchLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pytorch_model.bin")
	entries := ptWriteEntries()
	if err := WritePyTorch(path, entries); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	files := map[string]*zip.File{}
	for _, zf := range zr.File {
		names = append(names, zf.Name)
		files[zf.Name] = zf
		if zf.Method != zip.Store {
			t.Errorf("%s: method %d, want stored", zf.Name, zf.Method)
		}
		off, err := zf.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		if off%torchAlign != 0 {
			t.Errorf("%s: data at offset %d, not a multiple of %d", zf.Name, off, torchAlign)
		}
	}
	wantNames := []string{"archive/data.pkl", "archive/byteorder"}
	for i := range entries {
		wantNames = append(wantNames, fmt.Sprintf("archive/data/%d", i))
	}
	wantNames = append(wantNames, "archive/version")
	if !slices.Equal(names, wantNames) {
		t.Fatalf("entries %q, want %q", names, wantNames)
	}
	for name, want := range map[string]string{"archive/version": "3\n", "archive/byteorder": "little"} {
		b, err := readZipEntry(files[name], 16, -1)
		if err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", name, b, err, want)
		}
	}
	pkl, err := readZipEntry(files["archive/data.pkl"], maxPickleBytes, -1)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 1 << 20
	cost, err := scanPickle(pkl, path, "data.pkl", limit)
	if err != nil {
		t.Fatalf("scanPickle: %v", err)
	}
	if cost <= 0 || cost > limit {
		t.Fatalf("scanPickle cost %d, want in (0, %d]", cost, limit)
	}
	sd, err := parseStateDictPickle(pkl, path, "data.pkl", &budget{limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range entries {
		order = append(order, e.Name)
	}
	if !slices.Equal(sd.names, order) {
		t.Fatalf("state_dict order %q, want the entries' order %q", sd.names, order)
	}
	four := sd.tensors["four.d"]
	if !slices.Equal(four.stride, []int64{60, 20, 5, 1}) || four.offset != 0 || four.storage.class.name != "torch.FloatStorage" {
		t.Fatalf("four.d: offset %d stride %v class %s", four.offset, four.stride, four.storage.class.name)
	}
	if s := sd.tensors["empty.inner"].stride; !slices.Equal(s, []int64{3, 3, 1}) {
		t.Fatalf("empty.inner: stride %v, want torch's [3 3 1]", s)
	}
	if c := sd.tensors["half"].storage.class.name; c != "torch.HalfStorage" {
		t.Fatalf("half: storage class %s, want torch.HalfStorage", c)
	}
	if c := sd.tensors["brain"].storage.class.name; c != "torch.BFloat16Storage" {
		t.Fatalf("brain: storage class %s, want torch.BFloat16Storage", c)
	}
}

// TestWritePyTorchManyEntries crosses the 1,000-pair SETITEMS batch.
func TestWritePyTorchManyEntries(t *testing.T) {
	var entries []*Entry
	for i := range 2001 {
		entries = append(entries, &Entry{Name: fmt.Sprintf("t%04d", i), Shape: []int{1}, Data: []float32{float32(i)}})
	}
	path := filepath.Join(t.TempDir(), "pytorch_model.bin")
	if err := WritePyTorch(path, entries); err != nil {
		t.Fatal(err)
	}
	f, err := ReadPyTorch(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Names) != len(entries) {
		t.Fatalf("read %d tensors, want %d", len(f.Names), len(entries))
	}
	for i, e := range entries {
		if g := f.Tensors[e.Name]; g == nil || g.Data[0] != float32(i) {
			t.Fatalf("tensor %s: %+v", e.Name, g)
		}
	}
}

// TestWritePyTorchDeterministic: the same entries give the same bytes.
func TestWritePyTorchDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.bin"), filepath.Join(dir, "b.bin")
	if err := WritePyTorch(a, ptWriteEntries()); err != nil {
		t.Fatal(err)
	}
	if err := WritePyTorch(b, ptWriteEntries()); err != nil {
		t.Fatal(err)
	}
	ra, _ := os.ReadFile(a)
	rb, _ := os.ReadFile(b)
	if len(ra) == 0 || !bytes.Equal(ra, rb) {
		t.Fatalf("two writes differ (%d and %d bytes)", len(ra), len(rb))
	}
}

// TestPickleWriterInt runs every integer encoding through gopickle's VM.
func TestPickleWriterInt(t *testing.T) {
	for _, v := range []int64{0, 255, 256, 65535, 65536, math.MaxInt32, math.MaxInt32 + 1, 1 << 40, 0x80 << 32, math.MaxInt64} {
		var p pickleWriter
		p.op(0x80, 2)
		p.int(v)
		p.op('.')
		u := pickle.NewUnpickler(bytes.NewReader(p.buf))
		got, err := u.Load()
		if err != nil {
			t.Fatalf("%d: %v", v, err)
		}
		if n, ok := got.(int); !ok || int64(n) != v {
			t.Fatalf("%d: pickled as % x, read back %v (%T)", v, p.buf, got, got)
		}
	}
}

func TestWritePyTorchRejects(t *testing.T) {
	ok := func() *Entry { return &Entry{Name: "w", Shape: []int{2}, Data: []float32{1, 2}} }
	cases := []struct {
		name    string
		entries []*Entry
		want    string
	}{
		{"nil", []*Entry{ok(), nil}, "entry 1 is nil"},
		{"empty name", []*Entry{{Shape: []int{1}, Data: []float32{1}}}, "entry 0 has an empty name"},
		{"duplicate", []*Entry{ok(), ok()}, `tensor "w" appears twice`},
		{"utf8", []*Entry{{Name: "a\xff", Shape: []int{1}, Data: []float32{1}}}, "not valid UTF-8"},
		{"dtype", []*Entry{{Name: "w", DType: "I64", Shape: []int{1}, Data: []float32{1}}}, `cannot write unsupported dtype "I64"`},
		{"length", []*Entry{{Name: "w", Shape: []int{2, 2}, Data: []float32{1}}}, "shape [2 2] needs 4 values, Data has 1"},
		{"negative", []*Entry{{Name: "w", Shape: []int{-1}, Data: []float32{}}}, "negative dimension -1"},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "pytorch_model.bin")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		err := WritePyTorch(path, c.entries)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", c.name, err, path, c.want)
		}
		if c.name == "dtype" && !errors.Is(err, ErrUnsupportedDType) {
			t.Errorf("dtype: %v is not ErrUnsupportedDType", err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("a refused write changed the file to %q", b)
	}
	if names := listDir(t, dir); !slices.Equal(names, []string{"pytorch_model.bin"}) {
		t.Fatalf("folder holds %q after refused writes", names)
	}
}
