package checkpoint

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParsePyTorchSmall(t *testing.T) {
	f, err := ParsePyTorch(smallTorchZip(t), "small.bin")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Names, []string{"a", "b", "tied"}) || f.Format != FormatPyTorch {
		t.Fatalf("Names %q, Format %q", f.Names, f.Format)
	}
	a, tied := f.Tensors["a"], f.Tensors["tied"]
	if !slices.Equal(a.Shape, []int{2, 3}) || !slices.Equal(a.Data, []float32{1, 2, 3, 4, 5, 6}) || a.DType != "F32" {
		t.Errorf("a = %s %v %v", a.DType, a.Shape, a.Data)
	}
	if !sameBits(a, tied) {
		t.Errorf("tied = %v, want a's values", tied.Data)
	}
	// Views of one storage share its memory (capacity-limited subslices).
	if &tied.Data[0] != &a.Data[0] || cap(a.Data) != len(a.Data) {
		t.Errorf("tensors viewing one storage do not share its memory (cap %d, len %d)", cap(a.Data), len(a.Data))
	}
	if b := f.Tensors["b"]; !slices.Equal(b.Data, []float32{-1, 0.5, 7}) {
		t.Errorf("b = %v", b.Data)
	}
}

// TestParsePyTorchViews covers offsets into shared storages, strided views,
// storage dtypes and _rebuild_parameter.
func TestParsePyTorchViews(t *testing.T) {
	vals := []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	cases := []struct {
		name    string
		storage string
		dtype   string
		t       ptTensor
		want    []float32
	}{
		{"offset slice", "FloatStorage", "F32", ptTensor{offset: 4, shape: []int{2, 2}}, []float32{4, 5, 6, 7}},
		{"transpose", "FloatStorage", "F32", ptTensor{shape: []int{4, 3}, stride: []int{1, 4}}, []float32{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
		{"column", "FloatStorage", "F32", ptTensor{offset: 1, shape: []int{3}, stride: []int{4}}, []float32{1, 5, 9}},
		{"size-1 dims any stride", "FloatStorage", "F32", ptTensor{offset: 2, shape: []int{1, 3, 1}, stride: []int{99, 1, 7}}, []float32{2, 3, 4}},
		{"scalar", "FloatStorage", "F32", ptTensor{offset: 11, shape: []int{}}, []float32{11}},
		{"empty", "FloatStorage", "F32", ptTensor{offset: 0, shape: []int{0, 3}}, []float32{}},
		{"half", "HalfStorage", "F16", ptTensor{offset: 10, shape: []int{2}}, []float32{10, 11}},
		{"bfloat16", "BFloat16Storage", "BF16", ptTensor{shape: []int{3}}, []float32{0, 1, 2}},
		{"double", "DoubleStorage", "F64", ptTensor{offset: 3, shape: []int{1}}, []float32{3}},
		{"long", "LongStorage", "I64", ptTensor{shape: []int{2, 2}, stride: []int{1, 2}}, []float32{0, 2, 1, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pt := c.t
			pt.name, pt.key, pt.storage, pt.numel = "x", "7", c.storage, len(vals)
			pkl := statePickle([]ptTensor{pt})
			data := torchZip(t, "pytorch_model", pkl, map[string][]byte{"7": encodeAs(c.dtype, vals)})
			f, err := ParsePyTorch(data, "v.bin")
			if err != nil {
				t.Fatal(err)
			}
			e := f.Tensors["x"]
			if e.DType != c.dtype || !slices.Equal(e.Shape, pt.shape) || !slices.Equal(e.Data, c.want) {
				t.Errorf("got %s %v %v, want %s %v %v", e.DType, e.Shape, e.Data, c.dtype, pt.shape, c.want)
			}
		})
	}

	t.Run("rebuild_parameter", func(t *testing.T) {
		var p pk
		p.op(0x80, 2).global("collections", "OrderedDict").op(')', 'R')
		p.str("w").global("torch._utils", "_rebuild_parameter").op('(')
		p.tensorCall(ptTensor{key: "0", storage: "FloatStorage", numel: 2, shape: []int{2}})
		p.op(0x88).global("collections", "OrderedDict").op(')', 'R', 't', 'R')
		p.op('s', '.')
		f, err := ParsePyTorch(torchZip(t, "archive", p.Bytes(), map[string][]byte{"0": f32Bytes(3, 4)}), "p.bin")
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Tensors["w"].Data; !slices.Equal(got, []float32{3, 4}) {
			t.Errorf("w = %v", got)
		}
	})

	t.Run("protocol 4 with frame and stack_global", func(t *testing.T) {
		// The allowlisted globals through STACK_GLOBAL, inside a FRAME.
		var body pk
		body.op(0x8c, 11).op([]byte("collections")...).op(0x94)
		body.op(0x8c, 11).op([]byte("OrderedDict")...).op(0x94, 0x93, 0x94, ')', 'R', 0x94)
		body.op(0x8c, 1, 'w')
		body.tensorCall(ptTensor{key: "0", storage: "FloatStorage", numel: 1, shape: []int{1}})
		body.op('s', '.')
		var p pk
		p.op(0x80, 4, 0x95).op(binary.LittleEndian.AppendUint64(nil, uint64(body.Len()))...).op(body.Bytes()...)
		f, err := ParsePyTorch(torchZip(t, "archive", p.Bytes(), map[string][]byte{"0": f32Bytes(5)}), "p4.bin")
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Tensors["w"].Data; !slices.Equal(got, []float32{5}) {
			t.Errorf("w = %v", got)
		}
	})
}

// maliciousPickles are pickles that name globals outside the allowlist.
func maliciousPickles() map[string][]byte {
	out := map[string][]byte{}
	var p pk
	p.op(0x80, 2).global("os", "system").str("echo pwned").op(0x85, 'R', '.')
	out["os.system"] = slices.Clone(p.Bytes())

	p.Reset()
	p.op(0x80, 2).global("torch.storage", "_load_from_bytes").op('C', 1, 'x', 0x85, 'R', '.')
	out["torch.storage._load_from_bytes"] = slices.Clone(p.Bytes())

	p.Reset() // protocol 4: names pushed as strings, then STACK_GLOBAL
	p.op(0x80, 4, 0x8c, 8).op([]byte("builtins")...).op(0x94, 0x8c, 4).op([]byte("eval")...).op(0x94, 0x93)
	p.op(0x8c, 1, '1', 0x85, 'R', '.')
	out["builtins.eval"] = slices.Clone(p.Bytes())

	p.Reset() // protocol-0 quoted strings feeding STACK_GLOBAL
	p.op(0x80, 4).op([]byte("S'posix'\nS'system'\n")...).op(0x93, '.')
	out["posix.system"] = slices.Clone(p.Bytes())

	p.Reset() // names fetched from the memo: only the VM's FindClass sees them
	p.op(0x80, 4, 0x8c, 10).op([]byte("subprocess")...).op('q', 0, '0')
	p.op(0x8c, 5).op([]byte("Popen")...).op('q', 1, '0')
	p.op('h', 0, 'h', 1, 0x93, ')', 'R', '.')
	out["subprocess.Popen"] = slices.Clone(p.Bytes())

	p.Reset() // gopickle resolves these two by itself; the scanner refuses them
	p.op(0x80, 2).global("copy_reg", "_reconstructor").op('.')
	out["copy_reg._reconstructor"] = slices.Clone(p.Bytes())

	p.Reset() // INST names a class inline
	p.op('(').op('i').op([]byte("os\nsystem\n")...).op('.')
	out["os.system via INST"] = slices.Clone(p.Bytes())

	p.Reset() // a tensor inside an otherwise valid state_dict
	p.op(0x80, 2).global("collections", "OrderedDict").op(')', 'R')
	p.str("w").global("torch", "LongTensor").op(')', 'R', 's', '.')
	out["torch.LongTensor"] = slices.Clone(p.Bytes())
	return out
}

func TestParsePyTorchRefusesGlobals(t *testing.T) {
	for name, pkl := range maliciousPickles() {
		t.Run(name, func(t *testing.T) {
			data := torchZip(t, "pytorch_model", pkl, nil)
			_, err := ParsePyTorch(data, "pytorch_model.bin")
			global := strings.TrimSuffix(name, " via INST")
			want := "checkpoint: pytorch_model.bin: refusing to load global " + global
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error %v, want prefix %q", err, want)
			}
			if !errors.Is(err, ErrUnsafe) {
				t.Errorf("error does not wrap ErrUnsafe")
			}
		})
	}
}

func TestParsePyTorchErrors(t *testing.T) {
	good := statePickle([]ptTensor{{name: "w", key: "0", storage: "FloatStorage", numel: 4, shape: []int{2, 2}}})
	goodData := map[string][]byte{"0": f32Bytes(1, 2, 3, 4)}
	one := func(pt ptTensor) []byte {
		pt.name, pt.key = "w", "0"
		if pt.storage == "" {
			pt.storage = "FloatStorage"
		}
		return statePickle([]ptTensor{pt})
	}
	var p pk
	pkl := func(build func(p *pk)) []byte {
		p.Reset()
		build(&p)
		return slices.Clone(p.Bytes())
	}
	cases := []struct {
		name string
		data func(t *testing.T) []byte
		want []string
	}{
		{"not a zip", func(*testing.T) []byte { return []byte("hello, not a zip file at all") }, []string{"not a torch.save zip archive"}},
		{"legacy format", func(*testing.T) []byte { return append(slices.Clone(legacyMagic), 0, 1, 2) }, []string{"legacy (pre-1.6"}},
		{"no data.pkl", func(t *testing.T) []byte { return zipBytes(t, []zipEntry{{"archive/version", []byte("3")}}) }, []string{"no <folder>/data.pkl"}},
		{"data.pkl at root", func(t *testing.T) []byte { return zipBytes(t, []zipEntry{{"data.pkl", good}}) }, []string{"no <folder>/data.pkl"}},
		{"two data.pkl", func(t *testing.T) []byte {
			return zipBytes(t, []zipEntry{{"a/data.pkl", good}, {"b/data.pkl", good}})
		}, []string{`2 data.pkl entries ["a/data.pkl" "b/data.pkl"]`}},
		{"duplicate entry", func(t *testing.T) []byte {
			return zipBytes(t, []zipEntry{{"a/data.pkl", good}, {"a/data.pkl", good}})
		}, []string{`zip entry "a/data.pkl" appears twice`}},
		{"big endian", func(t *testing.T) []byte {
			return zipBytes(t, []zipEntry{{"a/data.pkl", good}, {"a/byteorder", []byte("big")}, {"a/data/0", goodData["0"]}})
		}, []string{`a/byteorder says "big"`}},
		{"storage entry missing", func(t *testing.T) []byte { return torchZip(t, "a", good, nil) }, []string{`storage "0" (torch.FloatStorage[4], tensor "w")`, "no entry a/data/0"}},
		{"storage too short", func(t *testing.T) []byte { return torchZip(t, "a", good, map[string][]byte{"0": f32Bytes(1, 2, 3)}) },
			[]string{`storage "0"`, "a/data/0 holds 12 bytes, want 16"}},
		{"view past storage", func(t *testing.T) []byte {
			return torchZip(t, "a", one(ptTensor{numel: 4, offset: 2, shape: []int{3}}), goodData)
		},
			[]string{`tensor "w"`, "reaches element 4 of a 4-element storage"}},
		{"negative stride", func(t *testing.T) []byte {
			return torchZip(t, "a", one(ptTensor{numel: 4, offset: 3, shape: []int{2}, stride: []int{-1}}), goodData)
		}, []string{`tensor "w"`, "negative entry -1"}},
		{"broadcast view", func(t *testing.T) []byte {
			return torchZip(t, "a", one(ptTensor{numel: 4, shape: []int{1000}, stride: []int{0}}), goodData)
		}, []string{`tensor "w"`, "1000 elements, more than its 4-element storage"}},
		{"negative dim", func(t *testing.T) []byte {
			return torchZip(t, "a", one(ptTensor{numel: 4, shape: []int{-4}}), goodData)
		},
			[]string{`tensor "w"`, "negative dimension -4"}},
		{"negative offset", func(t *testing.T) []byte {
			return torchZip(t, "a", one(ptTensor{numel: 4, offset: -1, shape: []int{1}}), goodData)
		},
			[]string{"storage_offset is int -1"}},
		{"shape stride mismatch", func(t *testing.T) []byte {
			return torchZip(t, "a", one(ptTensor{numel: 4, shape: []int{4}, stride: []int{1, 1}}), goodData)
		}, []string{"size [4] and stride [1 1] differ in length"}},
		{"int storage inexact", func(t *testing.T) []byte {
			raw := binary.LittleEndian.AppendUint64(nil, 1<<60+1)
			return torchZip(t, "a", one(ptTensor{storage: "LongStorage", numel: 1, shape: []int{1}}), map[string][]byte{"0": raw})
		}, []string{`storage "0" (torch.LongStorage[1], tensor "w")`, "I64 value 1152921504606846977 at index 0"}},
		{"storage key reused with other size", func(t *testing.T) []byte {
			pkl := statePickle([]ptTensor{
				{name: "a", key: "0", storage: "FloatStorage", numel: 4, shape: []int{4}},
				{name: "b", key: "0", storage: "FloatStorage", numel: 2, shape: []int{2}},
			})
			return torchZip(t, "a", pkl, goodData)
		}, []string{`storage "0" is named twice with different types or sizes: torch.FloatStorage[4] and torch.FloatStorage[2]`}},
		{"top-level list", func(t *testing.T) []byte { return torchZip(t, "a", pkl(func(p *pk) { p.op(0x80, 2, ']', '.') }), nil) },
			[]string{"top-level object is a *types.List, want a state_dict"}},
		{"value not a tensor", func(t *testing.T) []byte {
			return torchZip(t, "a", pkl(func(p *pk) { p.op(0x80, 2, '}').str("w").int(3).op('s', '.') }), nil)
		}, []string{`state_dict value for "w" is int 3, not a tensor`}},
		{"key not a string", func(t *testing.T) []byte {
			return torchZip(t, "a", pkl(func(p *pk) { p.op(0x80, 2, '}').int(1).int(3).op('s', '.') }), nil)
		}, []string{"state_dict key int 1 is not a string"}},
		{"duplicate key in dict", func(t *testing.T) []byte {
			return torchZip(t, "a", pkl(func(p *pk) {
				p.op(0x80, 2, '}', '(')
				p.str("w").tensorCall(ptTensor{key: "0", storage: "FloatStorage", numel: 4, shape: []int{4}})
				p.str("w").tensorCall(ptTensor{key: "0", storage: "FloatStorage", numel: 4, shape: []int{4}})
				p.op('u', '.')
			}), goodData)
		}, []string{`state_dict has key "w" twice`}},
		{"bad persistent id", func(t *testing.T) []byte {
			return torchZip(t, "a", pkl(func(p *pk) { p.op(0x80, 2).str("x").op('Q', '.') }), nil)
		}, []string{"persistent id str \"x\" is not ('storage', type, key, location, numel)"}},
		{"no STOP", func(t *testing.T) []byte { return torchZip(t, "a", good[:len(good)-1], goodData) }, []string{"a/data.pkl: pickle has no STOP opcode"}},
		{"unknown opcode", func(t *testing.T) []byte { return torchZip(t, "a", []byte{0x80, 2, 0xff, '.'}, nil) },
			[]string{"a/data.pkl: byte 2: unknown pickle opcode 0xff"}},
		{"huge BINBYTES", func(t *testing.T) []byte {
			return torchZip(t, "a", []byte{0x80, 3, 'B', 0xff, 0xff, 0xff, 0x7f, '.'}, nil)
		},
			[]string{"byte 2: BINBYTES data needs 2147483647 bytes, only 1 remain"}},
		{"huge FRAME", func(t *testing.T) []byte {
			return torchZip(t, "a", []byte{0x80, 4, 0x95, 0, 0, 0, 0, 0, 0, 0, 1, '.'}, nil)
		}, []string{"FRAME of 72057594037927936 bytes"}},
		{"protocol 6", func(t *testing.T) []byte { return torchZip(t, "a", []byte{0x80, 6, '.'}, nil) }, []string{"pickle protocol 6"}},
		{"deep marks", func(t *testing.T) []byte { return torchZip(t, "a", append(slices.Repeat([]byte{'('}, 2000), '.'), nil) },
			[]string{"MARKs nest deeper than 1024"}},
		{"vm panic: odd DICT", func(t *testing.T) []byte { return torchZip(t, "a", []byte{0x80, 2, '(', 'K', 1, 'd', '.'}, nil) },
			[]string{"pickle VM failed"}},
		{"vm panic: empty LONG1", func(t *testing.T) []byte { return torchZip(t, "a", []byte{0x80, 2, 0x8a, 0, '.'}, nil) },
			[]string{"pickle VM failed"}},
		{"builtin resolved by gopickle stays inert", func(t *testing.T) []byte {
			// __builtin__.object through memoized names never reaches
			// FindClass; gopickle maps it to a Go value, refused here.
			return torchZip(t, "a", pkl(func(p *pk) {
				p.op(0x80, 4, 0x8c, 11).op([]byte("__builtin__")...).op('q', 0, '0')
				p.op(0x8c, 6).op([]byte("object")...).op('q', 1, '0', 'h', 0, 'h', 1, 0x93, '.')
			}), nil)
		}, []string{"top-level object is a *types.ObjectClass, want a state_dict"}},
		{"vm error: empty stack", func(t *testing.T) []byte { return torchZip(t, "a", []byte{0x80, 2, '.'}, nil) },
			[]string{"a/data.pkl: the stack is empty"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParsePyTorch(c.data(t), "bad.bin")
			if err == nil {
				t.Fatalf("got %d tensors, want an error", len(f.Names))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "checkpoint: bad.bin: ") {
				t.Errorf("error %q does not start with the package and file", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}
