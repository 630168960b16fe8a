package roformer

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestConfigRoundTrip(t *testing.T) {
	in := `{"vocab_size": 99, "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1, "intermediate_size": 37,
	        "embedding_size": null, "id2label": {"0": "neg", "1": "neu", "2": "pos"}, "rotary_value": true,
	        "problem_type": "single_label_classification", "my_custom_key": [1, 2]}`
	c, err := ParseConfig([]byte(in), "in")
	if err != nil {
		t.Fatal(err)
	}
	if c.EmbeddingSize != 64 || c.NumLabels != 3 || !c.RotaryValue || c.LayerNormEps != 1e-12 || c.HiddenAct != "gelu" {
		t.Fatalf("parsed %+v", c)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"my_custom_key"`) {
		t.Errorf("unknown key lost: %s", b)
	}
	var c2 Config
	if err := json.Unmarshal(b, &c2); err != nil {
		t.Fatal(err)
	}
	if c2.NumLabels != 3 || c2.Labels()[2] != "pos" || c2.EmbeddingSize != 64 || c2.ProblemType != c.ProblemType {
		t.Errorf("round trip changed the config: %+v", c2)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct{ json, want string }{
		{`{"hidden_size": 30, "num_attention_heads": 4}`, "hidden_size 30 is not divisible by num_attention_heads 4"},
		{`{"hidden_size": 36, "num_attention_heads": 4}`, "head size 9"},
		{`{"hidden_act": "swiglu"}`, "swiglu"},
		{`{"vocab_size": 0}`, "vocab_size 0 must be positive"},
		{`{"vocab_size": "many"}`, "vocab_size"},
		{`{"layer_norm_eps": -1}`, "layer_norm_eps"},
		{`{"hidden_dropout_prob": 1.5}`, "hidden_dropout_prob 1.5"},
		{`{"pad_token_id": 60000}`, "pad_token_id 60000"},
		{`{"problem_type": "ranking"}`, "problem_type"},
		{`{"model_type": "bert"}`, "model_type \"bert\""},
		{`[1, 2]`, "not a JSON object"},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.json), "config.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.json, err, c.want)
		}
	}
}
