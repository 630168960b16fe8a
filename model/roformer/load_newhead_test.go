package roformer_test

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/hostile"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tensor"
)

// LoadOptions.NewHead gives the model that a fresh model initialised with
// the same seed and bound over the checkpoint (the recipe fine-tuning used
// before) gives, value for value; it loads a folder whose own head has
// another number of labels, which continuing that head refuses.
func TestLoadNewHeadMatchesFreshRecipe(t *testing.T) {
	dir := t.TempDir()
	if err := hostile.ConfigFolder(dir, nil); err != nil {
		t.Fatal(err)
	}
	setLabels := func(n int) func(*roformer.Config) {
		return func(c *roformer.Config) { c.NumLabels, c.ID2Label, c.Label2ID = n, nil, nil }
	}
	for _, head := range []roformer.Head{roformer.HeadSequenceCls, roformer.HeadTokenCls, roformer.HeadMaskedLM} {
		got, err := roformer.Load(dir, head, roformer.LoadOptions{NewHead: true, InitSeed: 7, ConfigOverride: setLabels(3)})
		if err != nil {
			t.Fatalf("%s: %v", head, err)
		}
		// The recipe: initialise a whole model, bind its head over the checkpoint.
		cfg := got.Config
		fresh, err := roformer.New(cfg, head)
		if err != nil {
			t.Fatal(err)
		}
		fresh.Init(7)
		extra := map[string]*tensor.Tensor{}
		for _, p := range fresh.Params() {
			if !strings.HasPrefix(p.Name, "roformer.") {
				extra[p.Name] = &tensor.Tensor{Shape: p.Shape, Data: p.Data}
			}
		}
		want, err := roformer.Load(dir, head, roformer.LoadOptions{Extra: extra, ConfigOverride: setLabels(3)})
		if err != nil {
			t.Fatalf("%s: the recipe: %v", head, err)
		}
		gp, wp := got.Params(), want.Params()
		if len(gp) != len(wp) {
			t.Fatalf("%s: %d parameters, want %d", head, len(gp), len(wp))
		}
		for i := range gp {
			if gp[i].Name != wp[i].Name || !slices.Equal(gp[i].Data, wp[i].Data) {
				t.Errorf("%s: parameter %s differs from the recipe's %s", head, gp[i].Name, wp[i].Name)
			}
		}
	}

	// A folder with a 3-label head, given a 5-label new head.
	three, err := roformer.Load(dir, roformer.HeadTokenCls, roformer.LoadOptions{NewHead: true, InitSeed: 1, ConfigOverride: setLabels(3)})
	if err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "three")
	if err := three.Save(saved); err != nil {
		t.Fatal(err)
	}
	if _, err := roformer.Load(saved, roformer.HeadTokenCls, roformer.LoadOptions{ConfigOverride: setLabels(5)}); err == nil {
		t.Fatal("continuing a 3-label head with 5 labels loaded")
	}
	five, err := roformer.Load(saved, roformer.HeadTokenCls, roformer.LoadOptions{NewHead: true, InitSeed: 1, ConfigOverride: setLabels(5)})
	if err != nil {
		t.Fatalf("a new 5-label head over a 3-label one: %v", err)
	}
	if five.Config.NumLabels != 5 || five.TokenCls == nil {
		t.Errorf("num_labels %d, want 5", five.Config.NumLabels)
	}
}

// A new head of a hostile config (every hostile.ConfigCases and
// HeadConfigCases folder) is refused before the model is allocated, naming
// config.json and the key.
func TestLoadNewHeadHostile(t *testing.T) {
	cases := map[string]map[string]any{}
	for k, v := range hostile.ConfigCases {
		cases[k] = v
	}
	for k, v := range hostile.HeadConfigCases {
		cases[k] = v
	}
	for name, ov := range cases {
		dir := filepath.Join(t.TempDir(), name)
		if err := hostile.ConfigFolder(dir, ov); err != nil {
			t.Fatal(err)
		}
		for _, h := range []roformer.Head{roformer.HeadSequenceCls, roformer.HeadTokenCls} {
			var a, b runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&a)
			_, err := roformer.Load(dir, h, roformer.LoadOptions{NewHead: true, InitSeed: 1})
			runtime.ReadMemStats(&b)
			if err == nil {
				t.Fatalf("%s: %s: loaded", name, h)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, "config.json")) {
				t.Errorf("%s: %s: error %q does not name config.json", name, h, err)
			}
			named := false
			for k := range ov {
				named = named || (ov[k] != nil && strings.Contains(err.Error(), k))
			}
			if !named {
				t.Errorf("%s: %s: error %q names none of the keys %v", name, h, err, keys(ov))
			}
			if n := b.TotalAlloc - a.TotalAlloc; n > 16<<20 {
				t.Errorf("%s: %s: Load allocated %d bytes before refusing, want ≤ 16 MiB", name, h, n)
			}
		}
	}
}

// Head "" is the head config.json's architectures name.
func TestLoadHeadFromConfig(t *testing.T) {
	dir := t.TempDir()
	if err := hostile.ConfigFolder(dir, map[string]any{"architectures": []string{"RoFormerForMaskedLM"}}); err != nil {
		t.Fatal(err)
	}
	l, err := roformer.Load(dir, "", roformer.LoadOptions{Bind: roformer.BindOptions{AllowMissingHead: true}})
	if err != nil {
		t.Fatal(err)
	}
	if l.Head != roformer.HeadMaskedLM {
		t.Errorf("head %s, want %s", l.Head, roformer.HeadMaskedLM)
	}
}
