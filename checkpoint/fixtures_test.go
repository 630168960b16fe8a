package checkpoint

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

type fixtureCheckpoint struct {
	Checkpoint struct {
		KeysPyTorch     []string          `json:"keys_pytorch_model_bin"`
		KeysSafetensors []string          `json:"keys_safetensors"`
		Tied            map[string]string `json:"tied_in_pytorch_model_bin_only"`
	} `json:"checkpoint"`
}

// sameBits reports whether a and b have equal shapes and bit-identical data.
func sameBits(a, b *Entry) bool {
	if !slices.Equal(a.Shape, b.Shape) || len(a.Data) != len(b.Data) {
		return false
	}
	for i := range a.Data {
		if math.Float32bits(a.Data[i]) != math.Float32bits(b.Data[i]) {
			return false
		}
	}
	return true
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

func TestFixtureCases(t *testing.T) {
	root := testutil.Shared(t, "fixtures", "hf-roformer", "cases")
	dirs, err := filepath.Glob(filepath.Join(root, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 7 {
		t.Errorf("found %d fixture cases, want 7", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, "fixture.json"))
			if err != nil {
				t.Fatal(err)
			}
			var fx fixtureCheckpoint
			if err := json.Unmarshal(raw, &fx); err != nil {
				t.Fatal(err)
			}
			st, err := ReadSafetensors(filepath.Join(dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			pt, err := ReadPyTorch(filepath.Join(dir, "pytorch_model.bin"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := st.Names, sortedCopy(fx.Checkpoint.KeysSafetensors); !slices.Equal(got, want) {
				t.Errorf("safetensors names:\n got %q\nwant %q", got, want)
			}
			if got, want := pt.Names, sortedCopy(fx.Checkpoint.KeysPyTorch); !slices.Equal(got, want) {
				t.Errorf("pytorch names:\n got %q\nwant %q", got, want)
			}
			if st.Metadata["format"] != "pt" {
				t.Errorf("safetensors metadata = %v, want format=pt", st.Metadata)
			}
			for _, name := range st.Names {
				a, b := st.Tensors[name], pt.Tensors[name]
				if b == nil {
					t.Errorf("%s: missing from pytorch_model.bin", name)
					continue
				}
				if a.DType != "F32" || b.DType != "F32" {
					t.Errorf("%s: dtypes %s / %s, want F32", name, a.DType, b.DType)
				}
				if !sameBits(a, b) {
					t.Errorf("%s: safetensors %v and pytorch %v differ", name, a.Shape, b.Shape)
				}
			}
			if len(fx.Checkpoint.Tied) != len(pt.Names)-len(st.Names) {
				t.Errorf("fixture lists %d tied keys, files differ by %d", len(fx.Checkpoint.Tied), len(pt.Names)-len(st.Names))
			}
			for tied, src := range fx.Checkpoint.Tied {
				a, b := pt.Tensors[tied], st.Tensors[src]
				if a == nil || b == nil || !sameBits(a, b) {
					t.Errorf("tied %s does not equal %s", tied, src)
				}
				if st.Tensors[tied] != nil {
					t.Errorf("tied %s is in model.safetensors", tied)
				}
			}
			d, err := ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if d.Format != FormatSafetensors || !slices.Equal(d.Names, st.Names) {
				t.Errorf("ReadDir picked %s with %d tensors, want safetensors with %d", d.Format, len(d.Names), len(st.Names))
			}
		})
	}
}
