package finetune

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/data/labelled"
)

// Undefined metrics (a constant prediction has no correlation) are written
// as null and never win the choice of the best epoch.
func TestReportNaN(t *testing.T) {
	r := Report{Examples: 3, MainMetric: "pearson", Loss: 0.5, Metrics: map[string]float64{"pearson": math.NaN(), "mse": 0.25}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"pearson":null`, `"mse":0.25`, `"loss":0.5`, `"main_metric":"pearson"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if !math.IsInf(r.Main(), -1) {
		t.Errorf("Main() = %v, want -Inf", r.Main())
	}
}

// score on hand-made predictions: the same numbers as package metrics.
func TestScoreSingleLabel(t *testing.T) {
	spec := labelled.Spec{Problem: labelled.SingleLabel, Labels: []string{"no", "yes"}, Metric: "f1"}
	gold := []int32{1, 1, 1, 0, 0, 0, 1, 0}
	pred := []int{1, 0, 1, 0, 1, 0, 1, 1}
	feats := make([]*feature, len(gold))
	preds := make([]Prediction, len(gold))
	for i := range gold {
		feats[i] = &feature{label: gold[i]}
		preds[i] = Prediction{id: pred[i]}
	}
	ms, conf := score(&spec, feats, preds)
	// tp 3, fn 1, fp 2, tn 2
	for name, want := range map[string]float64{"accuracy": 5.0 / 8, "f1": 6.0 / 9, "mcc": 4 / math.Sqrt(240)} {
		if math.Abs(ms[name]-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, ms[name], want)
		}
	}
	if conf.Counts[0][1] != 2 || conf.Counts[1][0] != 1 {
		t.Errorf("confusion %v", conf.Counts)
	}
}
