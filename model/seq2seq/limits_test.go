package seq2seq

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Sizes built to exhaust memory are refused by LoadConfig, naming the key
// and the limit; a config within the limits that needs far more than the
// checkpoint holds is refused by Load before the model is allocated.
func TestConfigLimits(t *testing.T) {
	m, _ := New(tinyConfig(Rotary))
	m.Init(4)
	if got, want := m.Config.NumParamsFor(), int64(m.NumParams()); got != want {
		t.Fatalf("NumParamsFor %d, the model has %d", got, want)
	}
	cases := []struct {
		edit map[string]any
		want string
	}{
		{map[string]any{"vocab_size": 10000000000}, "vocab_size 10000000000 is above the limit 16777216"},
		{map[string]any{"vocab_size": json.RawMessage("1e10")}, "vocab_size"},
		{map[string]any{"d_model": 4294967296}, "d_model 4294967296 is above the limit 65536"},
		{map[string]any{"ffn_size": 1 << 40}, "ffn_size 1099511627776 is above the limit 262144"},
		{map[string]any{"encoder_layers": 1000000000}, "encoder_layers 1000000000 is above the limit 1024"},
		{map[string]any{"d_model": 65536, "num_heads": 256, "encoder_layers": 1024}, "above the limit 17179869184 (MaxParams)"},
		{map[string]any{"vocab_size": 1 << 24}, "vocab_size 16777216 and d_model 8 need [16777216 8]"},
		{map[string]any{"encoder_layers": 1024, "decoder_layers": 1024}, "imply 1400952 parameters, but the checkpoint holds"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "config.json")
		raw, _ := os.ReadFile(path)
		var obj map[string]json.RawMessage
		json.Unmarshal(raw, &obj)
		for k, v := range c.edit {
			b, _ := json.Marshal(v)
			obj[k] = b
		}
		raw, _ = json.Marshal(obj)
		os.WriteFile(path, raw, 0o644)
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		_, err := Load(dir)
		runtime.ReadMemStats(&b)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%v: error %v, want it to name %s and say %q", c.edit, err, path, c.want)
		}
		if n := b.TotalAlloc - a.TotalAlloc; n > 4<<20 {
			t.Errorf("%v: Load allocated %d bytes before refusing, want ≤ 4 MiB", c.edit, n)
		}
	}
}
