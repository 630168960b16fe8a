package server

import (
	"context"
	"reflect"
	"testing"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

func TestTokenClassificationRoute(t *testing.T) {
	labels := []string{"O", "B-PER", "I-PER", "B-LOC", "I-LOC"}
	s, m, tok := newServer(t, roformer.HeadTokenCls, labels, Options{MaxLength: 8})
	for _, agg := range []string{"", "none", "simple", "first", "average", "max"} {
		want, err := pipeline.TokenClassification(context.Background(), m, tok, "the whales ship", pipeline.TokenClassificationOptions{Aggregation: pipeline.Aggregation(agg), IgnoreLabels: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		var got []pipeline.Entity
		body := `{"inputs": "the whales ship", "ignore_labels": [], "aggregation_strategy": "` + agg + `"}`
		if code, kind := teiCall(t, s, "/v1/token-classification", body, &got); code != 200 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d %s %+v, want %+v", agg, code, kind, got, want)
		}
		var many [][]pipeline.Entity
		body = `{"inputs": ["the whales ship", "a sea"], "ignore_labels": [], "aggregation_strategy": "` + agg + `"}`
		if code, _ := teiCall(t, s, "/v1/token-classification", body, &many); code != 200 || len(many) != 2 || !reflect.DeepEqual(many[0], want) {
			t.Errorf("%s batch: %d %+v", agg, code, many)
		}
	}
	for _, c := range []struct {
		body   string
		status int
		kind   string
	}{
		{`{"inputs": "the", "aggregation_strategy": "most"}`, 422, "Validation"},
		{`{"inputs": []}`, 400, "Empty"},
		{`{}`, 422, "Validation"},
		{`{"inputs": "the whale the whale the whale the"}`, 413, "Validation"},
	} {
		if code, kind := teiCall(t, s, "/v1/token-classification", c.body, nil); code != c.status || kind != c.kind {
			t.Errorf("%s: %d %s, want %d %s", c.body, code, kind, c.status, c.kind)
		}
	}
	emb, _, _ := newServer(t, roformer.HeadMaskedLM, nil, Options{})
	if code, kind := teiCall(t, emb, "/v1/token-classification", `{"inputs": "the"}`, nil); code != 404 || kind != "Backend" {
		t.Errorf("masked-LM: %d %s, want 404 (not one of its routes)", code, kind)
	}
}
