package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/tensor"
)

// listDir returns the names in dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}

func TestWriteSafetensorsRoundTrip(t *testing.T) {
	// Values that F16 and BF16 hold exactly, then values that need rounding.
	// exact holds values that F16 and BF16 both represent exactly.
	exact := []float32{0, float32(math.Copysign(0, -1)), 1, -2.5, 0x1p-14, 256, float32(math.Inf(1)), float32(math.Inf(-1))}
	rounded := []float32{0.1, -3.14159, 1e-7, 70000, 1.0009765625 + 1e-6, 123.456}
	for _, dtype := range []string{"F32", "F16", "BF16", ""} {
		t.Run("dtype_"+dtype, func(t *testing.T) {
			vals := append(slices.Clone(exact), rounded...)
			entries := []*Entry{
				{Name: "z.vals", DType: dtype, Shape: []int{len(vals)}, Data: vals},
				{Name: "a.matrix", DType: dtype, Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}},
				{Name: "m.scalar", DType: dtype, Shape: []int{}, Data: []float32{0.75}},
				{Name: "e.empty", DType: dtype, Shape: []int{3, 0}, Data: nil},
			}
			path := filepath.Join(t.TempDir(), "m.safetensors")
			meta := map[string]string{"format": "pt", "note": `quote " <tag> & ünïcode`}
			if err := WriteSafetensors(path, entries, meta); err != nil {
				t.Fatal(err)
			}
			f, err := ReadSafetensors(path)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.Names, []string{"a.matrix", "e.empty", "m.scalar", "z.vals"}) {
				t.Errorf("Names = %q", f.Names)
			}
			if f.Metadata["format"] != "pt" || f.Metadata["note"] != meta["note"] || len(f.Metadata) != 2 {
				t.Errorf("Metadata = %q, want %q", f.Metadata, meta)
			}
			wantDType := dtype
			if wantDType == "" {
				wantDType = "F32"
			}
			for _, e := range entries {
				g := f.Tensors[e.Name]
				if g.DType != wantDType || !slices.Equal(g.Shape, e.Shape) || len(g.Data) != len(e.Data) {
					t.Fatalf("%s: got %s %v (%d values), want %s %v (%d)", e.Name, g.DType, g.Shape, len(g.Data), wantDType, e.Shape, len(e.Data))
				}
				for i, v := range e.Data {
					want := v
					switch wantDType {
					case "F16":
						want = tensor.F16ToF32(tensor.F32ToF16(v))
					case "BF16":
						want = tensor.BF16ToF32(tensor.F32ToBF16(v))
					}
					if math.Float32bits(g.Data[i]) != math.Float32bits(want) {
						t.Errorf("%s[%d]: got %v, want %v (from %v)", e.Name, i, g.Data[i], want, v)
					}
				}
			}
			// Values representable in the stored type come back bit for bit.
			got := f.Tensors["z.vals"].Data
			for i, v := range exact {
				if math.Float32bits(got[i]) != math.Float32bits(v) {
					t.Errorf("exact value %v came back as %v", v, got[i])
				}
			}
		})
	}
}

func TestWriteSafetensorsLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	entries := []*Entry{
		{Name: "b", Shape: []int{3}, Data: []float32{1, 2, 3}},
		{Name: "a", DType: "F16", Shape: []int{1}, Data: []float32{1}},
	}
	if err := WriteSafetensors(path, entries, nil); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	if (8+n)%8 != 0 {
		t.Errorf("header length %d: data starts at %d, not a multiple of 8", n, 8+n)
	}
	header := string(raw[8 : 8+n])
	// wider dtypes first, so that each tensor starts aligned for its own
	want := `{"b":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"a":{"dtype":"F16","shape":[1],"data_offsets":[12,14]}}`
	if strings.TrimRight(header, " ") != want {
		t.Errorf("header\n got %q\nwant %q", header, want)
	}
	if strings.TrimRight(header, " ") != strings.TrimSpace(header) || len(header)-len(want) >= 8 {
		t.Errorf("header %q: padding is not trailing spaces under 8 bytes", header)
	}
	if !json.Valid([]byte(header)) {
		t.Errorf("header is not valid JSON")
	}
	if got := uint64(len(raw)) - 8 - n; got != 14 {
		t.Errorf("data section is %d bytes, want 14", got)
	}
	if !bytes.Equal(raw[8+n:8+n+12], f32Bytes(1, 2, 3)) || !bytes.Equal(raw[8+n+12:], []byte{0x00, 0x3c}) {
		t.Errorf("data section % x", raw[8+n:])
	}
}

func TestWriteSafetensorsRejects(t *testing.T) {
	cases := []struct {
		name    string
		entries []*Entry
		want    string
	}{
		{"data too short", []*Entry{{Name: "w", Shape: []int{2, 2}, Data: []float32{1, 2, 3}}}, `tensor "w": shape [2 2] needs 4 values, Data has 3`},
		{"data too long", []*Entry{{Name: "w", Shape: []int{1}, Data: []float32{1, 2}}}, `tensor "w": shape [1] needs 1 values, Data has 2`},
		{"duplicate", []*Entry{{Name: "w", Shape: []int{}, Data: []float32{1}}, {Name: "w", Shape: []int{}, Data: []float32{1}}}, `tensor "w" appears twice`},
		{"empty name", []*Entry{{Shape: []int{}, Data: []float32{1}}}, "entry 0 has an empty name"},
		{"reserved name", []*Entry{{Name: "__metadata__", Shape: []int{}, Data: []float32{1}}}, `"__metadata__" is reserved`},
		{"invalid utf-8 name", []*Entry{{Name: "w\xff", Shape: []int{}, Data: []float32{1}}}, `tensor name "w\xff" is not valid UTF-8`},
		{"nil entry", []*Entry{nil}, "entry 0 is nil"},
		{"int dtype", []*Entry{{Name: "w", DType: "I64", Shape: []int{}, Data: []float32{1}}}, `cannot write unsupported dtype "I64"`},
		{"negative dim", []*Entry{{Name: "w", Shape: []int{-1}, Data: nil}}, "negative dimension -1"},
		{"raw too short", []*Entry{{Name: "w", DType: "I8", Shape: []int{2, 2}, Raw: []byte{1, 2, 3}}}, `tensor "w": I8 shape [2 2] needs 4 bytes, Raw has 3`},
		{"raw of half a value", []*Entry{{Name: "w", DType: "BF16", Shape: []int{2}, Raw: []byte{1, 2, 3}}}, `BF16 shape [2] needs 4 bytes, Raw has 3`},
		{"raw int dtype", []*Entry{{Name: "w", DType: "I64", Shape: []int{1}, Raw: make([]byte, 8)}}, `cannot write unsupported dtype "I64"`},
		{"I8 not an integer", []*Entry{{Name: "w", DType: "I8", Shape: []int{1}, Data: []float32{0.5}}}, `I8 value 0.5 at index 0 is not an integer`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "m.safetensors")
			old := []byte("previous checkpoint")
			if err := os.WriteFile(path, old, 0o644); err != nil {
				t.Fatal(err)
			}
			err := WriteSafetensors(path, c.entries, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming %s and %q", err, path, c.want)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
				t.Errorf("old file changed to %q", got)
			}
			if names := listDir(t, dir); !slices.Equal(names, []string{"m.safetensors"}) {
				t.Errorf("directory holds %q, want only the old file", names)
			}
		})
	}
}

// TestWriteSafetensorsAtomic makes the write fail after the temporary file is
// complete (the rename target is a non-empty directory) and checks that the
// target and the directory are left as they were.
func TestWriteSafetensorsAtomic(t *testing.T) {
	entries := []*Entry{{Name: "w", Shape: []int{2}, Data: []float32{1, 2}}}

	t.Run("rename fails", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "m.safetensors")
		if err := os.MkdirAll(filepath.Join(target, "keep"), 0o755); err != nil {
			t.Fatal(err)
		}
		err := WriteSafetensors(target, entries, nil)
		if err == nil || !strings.Contains(err.Error(), target) {
			t.Fatalf("error %v, want one naming %s", err, target)
		}
		if names := listDir(t, dir); !slices.Equal(names, []string{"m.safetensors"}) {
			t.Errorf("directory holds %q, want no temporary file", names)
		}
		if names := listDir(t, target); !slices.Equal(names, []string{"keep"}) {
			t.Errorf("target directory changed: %q", names)
		}
	})

	t.Run("read-only dir", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root: a read-only directory does not stop writes")
		}
		dir := t.TempDir()
		target := filepath.Join(dir, "m.safetensors")
		old := []byte("previous")
		if err := os.WriteFile(target, old, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
		if err := WriteSafetensors(target, entries, nil); err == nil || !errors.Is(err, os.ErrPermission) {
			t.Fatalf("error %v, want a permission error", err)
		}
		if got, _ := os.ReadFile(target); !bytes.Equal(got, old) {
			t.Errorf("old file changed to %q", got)
		}
	})

	t.Run("replaces old file", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "m.safetensors")
		if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := WriteSafetensors(target, entries, nil); err != nil {
			t.Fatal(err)
		}
		f, err := ReadSafetensors(target)
		if err != nil || !slices.Equal(f.Tensors["w"].Data, []float32{1, 2}) {
			t.Fatalf("reading back: %v", err)
		}
		if names := listDir(t, dir); !slices.Equal(names, []string{"m.safetensors"}) {
			t.Errorf("directory holds %q", names)
		}
	})

	t.Run("missing dir", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "nope", "m.safetensors")
		if err := WriteSafetensors(target, entries, nil); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("error %v, want not-exist", err)
		}
	})
}

// An entry without Data is written from Raw as it is, and reads back as
// the values those bytes hold.
func TestWriteSafetensorsRaw(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	entries := []*Entry{
		{Name: "codes", DType: "I8", Shape: []int{2, 2}, Raw: []byte{1, 0xff, 0x81, 127}},
		{Name: "half", DType: "BF16", Shape: []int{1}, Raw: []byte{0x80, 0x3f}}, // 1.0
		{Name: "scale", Shape: []int{2, 1}, Data: []float32{0.5, 2}},
	}
	if err := WriteSafetensors(path, entries, nil); err != nil {
		t.Fatal(err)
	}
	f, err := ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]float32{"codes": {1, -1, -127, 127}, "half": {1}, "scale": {0.5, 2}} {
		if e := f.Tensors[name]; e == nil || !slices.Equal(e.Data, want) {
			t.Errorf("%s: read %+v, want %v", name, e, want)
		}
	}
}
