package checkpoint

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParseSafetensorsValid(t *testing.T) {
	body := append(f32Bytes(1, 2, 3, 4), encodeAs("F16", []float32{0.5, -2})...)
	body = append(body, encodeAs("BF16", []float32{3})...)
	body = append(body, encodeAs("F64", []float32{1.25})...)
	body = append(body, encodeAs("I64", []float32{511, -3})...)
	body = append(body, 1, 0)
	header := `{"__metadata__":{"format":"pt"},` +
		`"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},` +
		`"h":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},` +
		`"s":{"dtype":"BF16","shape":[],"data_offsets":[20,22]},` +
		`"d":{"dtype":"F64","shape":[1],"data_offsets":[22,30]},` +
		`"pos":{"dtype":"I64","shape":[2],"data_offsets":[30,46]},` +
		`"mask":{"dtype":"BOOL","shape":[1,2],"data_offsets":[46,48]},` +
		`"empty":{"dtype":"F32","shape":[0,5],"data_offsets":[48,48]}}   `
	f, err := ParseSafetensors(stBytes(header, body), "ok.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		dtype string
		shape []int
		data  []float32
	}{
		"w":     {"F32", []int{2, 2}, []float32{1, 2, 3, 4}},
		"h":     {"F16", []int{2}, []float32{0.5, -2}},
		"s":     {"BF16", []int{}, []float32{3}},
		"d":     {"F64", []int{1}, []float32{1.25}},
		"pos":   {"I64", []int{2}, []float32{511, -3}},
		"mask":  {"BOOL", []int{1, 2}, []float32{1, 0}},
		"empty": {"F32", []int{0, 5}, []float32{}},
	}
	if got := f.Names; !slices.Equal(got, []string{"d", "empty", "h", "mask", "pos", "s", "w"}) {
		t.Errorf("Names = %q", got)
	}
	for name, w := range want {
		e := f.Tensors[name]
		if e == nil {
			t.Errorf("%s: missing", name)
			continue
		}
		if e.DType != w.dtype || !slices.Equal(e.Shape, w.shape) || !slices.Equal(e.Data, w.data) {
			t.Errorf("%s: got %s %v %v, want %s %v %v", name, e.DType, e.Shape, e.Data, w.dtype, w.shape, w.data)
		}
	}
	if f.Metadata["format"] != "pt" || f.Format != FormatSafetensors || f.Path != "ok.safetensors" {
		t.Errorf("file fields: %q %q %v", f.Path, f.Format, f.Metadata)
	}
}

func TestParseSafetensorsErrors(t *testing.T) {
	tensor := func(dtype, shape, offsets string) string {
		return `{"x":{"dtype":"` + dtype + `","shape":` + shape + `,"data_offsets":` + offsets + `}}`
	}
	body16 := f32Bytes(1, 2, 3, 4)
	huge := binary.LittleEndian.AppendUint64(nil, 200<<20)
	cases := []struct {
		name string
		data []byte
		want []string // substrings of the error
		is   error
	}{
		{"short file", []byte{1, 2, 3}, []string{"bad.st", "file is 3 bytes"}, ErrFormat},
		{"header longer than file", stBytes(`{}`, nil)[:9], []string{"header length 2", "1 bytes"}, ErrFormat},
		{"absurd header", append(huge, 0), []string{"header length 209715200", "104857600-byte limit"}, ErrFormat},
		{"invalid json", stBytes(`{"x":`, nil), []string{"invalid JSON header"}, ErrFormat},
		{"json not object", stBytes(`[1]`, nil), []string{"not an object"}, ErrFormat},
		{"json trailing data", stBytes(`{} {}`, nil), []string{"after the closing brace"}, ErrFormat},
		{"duplicate key", stBytes(`{"x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}`, nil),
			[]string{`key "x" twice`}, ErrFormat},
		{"invalid utf-8", stBytes("{\"\xff\":{}}", nil), []string{"not valid UTF-8"}, ErrFormat},
		{"empty tensor name", stBytes(`{"":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}`, nil), []string{"empty name"}, ErrFormat},
		{"metadata not strings", stBytes(`{"__metadata__":{"n":1}}`, nil), []string{"__metadata__ must map strings to strings"}, ErrFormat},
		{"unknown dtype", stBytes(tensor("Q4", "[4]", "[0,16]"), body16), []string{`tensor "x"`, `"Q4"`, "F32"}, ErrUnsupportedDType},
		{"f8 dtype", stBytes(tensor("F8_E4M3", "[4]", "[0,4]"), body16[:4]), []string{`"F8_E4M3"`}, ErrUnsupportedDType},
		{"missing dtype", stBytes(`{"x":{"shape":[4],"data_offsets":[0,16]}}`, body16), []string{`tensor "x"`, "no dtype"}, ErrFormat},
		{"missing shape", stBytes(`{"x":{"dtype":"F32","data_offsets":[0,16]}}`, body16), []string{"no shape"}, ErrFormat},
		{"null shape", stBytes(`{"x":{"dtype":"F32","shape":null,"data_offsets":[0,16]}}`, body16), []string{"no shape"}, ErrFormat},
		{"missing offsets", stBytes(`{"x":{"dtype":"F32","shape":[4]}}`, body16), []string{"no data_offsets"}, ErrFormat},
		{"record not object", stBytes(`{"x":5}`, nil), []string{`tensor "x"`, "bad header record 5"}, ErrFormat},
		{"fractional dim", stBytes(tensor("F32", "[1.5]", "[0,4]"), body16[:4]), []string{`tensor "x"`, "bad header record"}, ErrFormat},
		{"negative dim", stBytes(tensor("F32", "[2,-2]", "[0,16]"), body16), []string{`tensor "x"`, "negative dimension -2 in shape [2 -2]"}, ErrFormat},
		{"numel overflow", stBytes(tensor("F32", "[4294967296,4294967296]", "[0,16]"), body16), []string{`tensor "x"`, "more than 9223372036854775807 elements"}, ErrFormat},
		{"byte size overflow", stBytes(tensor("F32", "[4611686018427387904]", "[0,16]"), body16), []string{"needs more than"}, ErrFormat},
		{"three offsets", stBytes(tensor("F32", "[4]", "[0,8,16]"), body16), []string{"data_offsets [0 8 16] must hold exactly"}, ErrFormat},
		{"negative offset", stBytes(tensor("F32", "[4]", "[-16,0]"), body16), []string{"data_offsets [-16 0] are negative"}, ErrFormat},
		{"end before begin", stBytes(tensor("F32", "[0]", "[16,0]"), body16), []string{"data_offsets [16, 0] end before they begin"}, ErrFormat},
		{"offsets past data", stBytes(tensor("F32", "[4]", "[0,16]"), body16[:12]), []string{"data_offsets [0, 16] run past the 12-byte data section"}, ErrFormat},
		{"size mismatch", stBytes(tensor("F32", "[2,2]", "[0,12]"), body16[:12]),
			[]string{`checkpoint: bad.st: tensor "x": data_offsets [0, 12] hold 12 bytes, shape [2 2] F32 needs 16`}, ErrFormat},
		{"overlap", stBytes(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, body16),
			[]string{`tensor "b" data_offsets [8, 16] overlap tensor "a" [0, 12]`}, ErrFormat},
		{"gap", stBytes(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, body16),
			[]string{`tensor "b"`, "gap of 4 bytes after offset 4"}, ErrFormat},
		{"trailing bytes", stBytes(tensor("F32", "[3]", "[0,12]"), body16), []string{"cover 12 bytes but the data section holds 16"}, ErrFormat},
		{"bool not 0/1", stBytes(tensor("BOOL", "[2]", "[0,2]"), []byte{1, 7}), []string{`tensor "x"`, "BOOL value 7 at index 1"}, nil},
		{"inexact int64", stBytes(tensor("I64", "[1]", "[0,8]"), binary.LittleEndian.AppendUint64(nil, 1<<53+1)),
			[]string{`tensor "x"`, "I64 value 9007199254740993 at index 0 is not exactly representable"}, nil},
		{"inexact uint64", stBytes(tensor("U64", "[1]", "[0,8]"), binary.LittleEndian.AppendUint64(nil, math.MaxUint64)),
			[]string{"U64 value 18446744073709551615"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseSafetensors(c.data, "bad.st")
			if err == nil {
				t.Fatalf("got %d tensors, want an error", len(f.Names))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "checkpoint: bad.st: ") {
				t.Errorf("error %q does not start with the package and file", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %q does not wrap %v", msg, c.is)
			}
		})
	}
}

func TestParseSafetensorsTruncations(t *testing.T) {
	// Every strict prefix of a valid file must fail cleanly.
	valid := stBytes(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[1],"data_offsets":[8,10]}}`,
		append(f32Bytes(1, 2), 0, 0x3c))
	if _, err := ParseSafetensors(valid, "v"); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(valid); n++ {
		if _, err := ParseSafetensors(valid[:n], "v"); err == nil {
			t.Errorf("prefix of %d/%d bytes parsed without error", n, len(valid))
		}
	}
}

func TestDecodeDTypes(t *testing.T) {
	le := binary.LittleEndian
	cases := []struct {
		dtype string
		raw   []byte
		want  []float32
	}{
		{"U8", []byte{0, 255}, []float32{0, 255}},
		{"I8", []byte{0x80, 0x7f}, []float32{-128, 127}},
		{"U16", le.AppendUint16(le.AppendUint16(nil, 65535), 1), []float32{65535, 1}},
		{"I16", le.AppendUint16(nil, 0x8000), []float32{-32768}},
		{"I32", le.AppendUint32(le.AppendUint32(nil, 1<<24), 0xffffffff), []float32{1 << 24, -1}},
		{"U32", le.AppendUint32(nil, 1<<31), []float32{1 << 31}},
		{"I64", le.AppendUint64(nil, 1<<62), []float32{1 << 62}},
		{"U64", le.AppendUint64(nil, 1<<63), []float32{1 << 63}},
		{"F64", le.AppendUint64(nil, math.Float64bits(0.1)), []float32{0.1}},
		{"BF16", []byte{0x80, 0x3f}, []float32{1}},
		{"F16", []byte{0x00, 0x7c}, []float32{float32(math.Inf(1))}},
	}
	for _, c := range cases {
		t.Run(c.dtype, func(t *testing.T) {
			got, err := decode(c.dtype, c.raw, len(c.want))
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("decode = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	inexact := []struct {
		dtype string
		raw   []byte
	}{
		{"I32", le.AppendUint32(nil, 1<<24+1)},
		{"U32", le.AppendUint32(nil, 0xffffffff)},
		{"I64", le.AppendUint64(nil, 1<<63-1)},
	}
	for _, c := range inexact {
		t.Run(c.dtype+"_inexact", func(t *testing.T) {
			if _, err := decode(c.dtype, c.raw, 1); err == nil || !strings.Contains(err.Error(), "not exactly representable") {
				t.Errorf("error %v, want an inexact-value error", err)
			}
		})
	}
}
