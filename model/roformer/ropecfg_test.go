package roformer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

func TestRopeConfigKeys(t *testing.T) {
	for _, c := range []struct {
		json, typ string
		factor    float64
	}{
		{`{"rope_scaling": {"rope_type": "linear", "factor": 2}}`, "linear", 2},
		{`{"rope_scaling": {"type": "dynamic", "factor": 4}}`, "dynamic", 4}, // the legacy key
		{`{"rope_theta": 500000, "rope_scaling": {"rope_type": "yarn", "factor": 8, "original_max_position_embeddings": 512}}`, "yarn", 8},
	} {
		cfg, err := ParseConfig([]byte(c.json), "config.json")
		if err != nil {
			t.Fatalf("%s: %v", c.json, err)
		}
		rc := cfg.ropeConfig()
		if rc.Scaling.Type != c.typ || rc.Scaling.Factor != c.factor {
			t.Errorf("%s: scaling %+v", c.json, rc.Scaling)
		}
		if _, ok := cfg.Extra["rope_scaling"]; ok {
			t.Errorf("%s: rope_scaling left among the unknown keys", c.json)
		}
	}
	cfg, err := ParseConfig([]byte(`{"rope_theta": 50000, "partial_rotary_factor": 0.5}`), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	if rc := cfg.ropeConfig(); rc.Base != 50000 || rc.RotaryDims != cfg.HeadSize()/2 {
		t.Errorf("rope config %+v", rc)
	}
}

func TestRopeConfigErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{"rope_scaling": {"rope_type": "ntk-by-parts", "factor": 2}}`, "ntk-by-parts"},
		{`{"rope_scaling": {"rope_type": "linear"}}`, "factor"},
		{`{"rope_scaling": {"rope_type": "linear", "factor": 0.5}}`, "0.5"},
		{`{"rope_scaling": {"rope_type": "longrope", "factor": 2, "short_factor": [1, 1], "long_factor": [1, 1]}}`, "short_factor"},
		{`{"rope_scaling": {"rope_type": "linear", "type": "dynamic", "factor": 2}}`, "disagree"},
		{`{"rope_theta": 1}`, "rope_theta"},
		{`{"partial_rotary_factor": 1.5}`, "partial_rotary_factor"},
		{`{"rope_scaling": {"rope_type": "yarn", "factor": 2, "beta_fast": -1}}`, "beta_fast"},
	} {
		_, err := ParseConfig([]byte(c.json), "config.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s: error %v, want one naming config.json and %q", c.json, err, c.want)
		}
	}
}

// scaledTwins returns a tiny masked-LM model and a copy of it that differs
// only in its rope settings.
func scaledTwins(t *testing.T, mod func(*Config)) (plain, scaled *Model) {
	cfg := tinyConfig(nil)
	cfg.MaxPositionEmbeddings = 16
	plain = randomModel(t, cfg, HeadMaskedLM, 41)
	cfg2 := cfg
	mod(&cfg2)
	if err := cfg2.Validate(); err != nil {
		t.Fatal(err)
	}
	scaled, err := New(cfg2, HeadMaskedLM)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range scaled.Params() {
		copy(p.Data, plain.Params()[i].Data)
	}
	return plain, scaled
}

func forwardAt(t *testing.T, m *Model, ids, pos []int32) []float32 {
	b := &Batch{InputIDs: ids, PositionIDs: pos, B: 1, T: len(ids)}
	out, err := m.Forward(context.Background(), b, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return out.LastHiddenState.Data
}

// With linear scaling by s the model at positions s·p computes what the
// unscaled model computes at p; dynamic scaling changes nothing up to
// max_position_embeddings and something past it; yarn with factor 1 is no
// scaling.
func TestRopeScalingInTheModel(t *testing.T) {
	ids := []int32{2, 5, 7, 3, 9, 4}
	pos, pos3 := make([]int32, len(ids)), make([]int32, len(ids))
	for i := range pos {
		pos[i], pos3[i] = int32(i), int32(3*i)
	}
	plain, lin := scaledTwins(t, func(c *Config) { c.RopeScaling = &RopeScaling{RopeType: "linear", Factor: 3} })
	testutil.AssertClose(t, "linear ×3 at 3p vs plain at p", forwardAt(t, lin, ids, pos3), forwardAt(t, plain, ids, pos), 2e-5, 2e-5)

	_, dyn := scaledTwins(t, func(c *Config) { c.RopeScaling = &RopeScaling{Type: "dynamic", Factor: 2} })
	testutil.AssertClose(t, "dynamic within max_position_embeddings", forwardAt(t, dyn, ids, pos), forwardAt(t, plain, ids, pos), 2e-5, 2e-5)
	far := []int32{0, 5, 10, 15, 20, 25} // the largest position, 25, is past 16
	if d := maxAbsDiff(forwardAt(t, dyn, ids, far), forwardAt(t, plain, ids, far)); d < 1e-4 {
		t.Errorf("dynamic past max_position_embeddings changed the outputs by only %g", d)
	}

	_, yarn1 := scaledTwins(t, func(c *Config) { c.RopeScaling = &RopeScaling{RopeType: "yarn", Factor: 1} })
	testutil.AssertClose(t, "yarn with factor 1", forwardAt(t, yarn1, ids, far), forwardAt(t, plain, ids, far), 2e-5, 2e-5)
}

// A scaled model's folder keeps its rope keys and leaves out HF RoFormer's
// sinusoid table, which would describe another rotation.
func TestRopeScalingSaveLoad(t *testing.T) {
	_, lin := scaledTwins(t, func(c *Config) {
		c.RopeTheta = 20000
		c.RopeScaling = &RopeScaling{RopeType: "linear", Factor: 2}
	})
	dir := t.TempDir()
	if err := lin.Save(dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys["rope_scaling"]; !ok || string(keys["rope_theta"]) != "20000" {
		t.Errorf("config.json: rope_scaling %s, rope_theta %s", keys["rope_scaling"], keys["rope_theta"])
	}
	if _, ok := lin.StateDict()[keyEmbedPositions]; ok {
		t.Error("a scaled model's state dict carries HF RoFormer's sinusoid table")
	}
	l, err := Load(dir, HeadMaskedLM, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int32{2, 5, 7, 3}
	testutil.AssertClose(t, "reloaded", forwardAt(t, l.Model, ids, nil), forwardAt(t, lin, ids, nil), layoutTol(), 0)
}

// xPos: the outputs depend on positions only through their differences (a
// shift of every position changes nothing), and they differ from plain
// RoPE's; xPos with rotary_value is refused.
func TestXPosInTheModel(t *testing.T) {
	ids := []int32{2, 5, 7, 3, 9, 4}
	pos, shifted := make([]int32, len(ids)), make([]int32, len(ids))
	for i := range pos {
		pos[i], shifted[i] = int32(i), int32(i+7)
	}
	plain, xp := scaledTwins(t, func(c *Config) { c.XPos = &XPosConfig{ScaleBase: 4} })
	testutil.AssertClose(t, "xpos shifted by 7", forwardAt(t, xp, ids, shifted), forwardAt(t, xp, ids, pos), 2e-5, 2e-5)
	if d := maxAbsDiff(forwardAt(t, xp, ids, pos), forwardAt(t, plain, ids, pos)); d < 1e-4 {
		t.Errorf("xpos changed the outputs by only %g", d)
	}
	_, err := ParseConfig([]byte(`{"rotary_value": true, "xpos": {"scale_base": 512}}`), "config.json")
	if err == nil || !strings.Contains(err.Error(), "xpos") {
		t.Errorf("xpos with rotary_value: %v", err)
	}
	if _, err := ParseConfig([]byte(`{"xpos": {"scale_base": -1}}`), "config.json"); err == nil || !strings.Contains(err.Error(), "-1") {
		t.Errorf("negative scale_base: %v", err)
	}
}
