package seq2seq

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/checkpoint"
)

func TestSaveLoad(t *testing.T) {
	m, _ := New(tinyConfig(Sinusoidal))
	m.Init(4)
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config != m.Config {
		t.Errorf("config %+v, want %+v", got.Config, m.Config)
	}
	for i, p := range m.Params() {
		for j, v := range p.Data {
			if got.Params()[i].Data[j] != v {
				t.Fatalf("%s[%d] = %v, want %v", p.Name, j, got.Params()[i].Data[j], v)
			}
		}
	}
}

func TestLoadReportsEveryMismatch(t *testing.T) {
	m, _ := New(tinyConfig(Rotary))
	m.Init(4)
	dir := t.TempDir()
	m.Save(dir)
	// Drop one tensor, reshape another, add a stray one.
	var entries []*checkpoint.Entry
	for _, p := range m.Params()[1:] {
		e := &checkpoint.Entry{Name: p.Name, DType: "F32", Shape: p.Shape, Data: p.Data}
		if p.Name == "decoder.layer_norm.bias" {
			e.Shape = []int{2, 4}
		}
		entries = append(entries, e)
	}
	entries = append(entries, &checkpoint.Entry{Name: "stray", DType: "F32", Shape: []int{1}, Data: []float32{0}})
	if err := checkpoint.WriteSafetensors(filepath.Join(dir, "model.safetensors"), entries, nil); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"missing embed_tokens.weight", "decoder.layer_norm.bias has shape [2 4], want [8]", "unexpected stray"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Heads = 3 }, "d_model 8 must be a positive multiple of num_heads 3"},
		{func(c *Config) { c.Position = "learned" }, `position "learned"`},
		{func(c *Config) { c.EOSID = 11 }, "eos_token_id 11 is outside the vocabulary [0, 11)"},
		{func(c *Config) { c.Activation = "swishy" }, "activation"},
	} {
		cfg := tinyConfig(Rotary)
		c.edit(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"vocab_size": 1}`), 0o644)
	if _, err := LoadConfig(filepath.Join(dir, "config.json")); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("LoadConfig: %v, want an error naming config.json", err)
	}
	if _, err := NewBatch(tinyConfig(Rotary), [][]int32{{3, 12}}, nil); err == nil || !strings.Contains(err.Error(), "source 0, token 1: id 12") {
		t.Errorf("NewBatch: %v", err)
	}
}

func TestAverage(t *testing.T) {
	a, _ := New(tinyConfig(Rotary))
	a.Init(1)
	b, _ := New(tinyConfig(Rotary))
	b.Init(2)
	avg, err := Average(a, b)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range avg.Params() {
		for j, v := range p.Data {
			if want := (a.Params()[i].Data[j] + b.Params()[i].Data[j]) / 2; v != want {
				t.Fatalf("%s[%d] = %v, want %v", p.Name, j, v, want)
			}
		}
	}
	c, _ := New(tinyConfig(Sinusoidal))
	c.Init(1)
	if _, err := Average(a, c); err == nil {
		t.Error("averaging models of different configs: no error")
	}
}
