package finetune

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/kernels"
	"math"

	"github.com/roformer-go/roformer/metrics"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// EvalOptions are the input settings of evaluation and prediction; use the
// ones the model was trained with.
type EvalOptions struct {
	MaxLength  int                  // tokens per input with [CLS] and [SEP]; default 128
	BatchSize  int                  // inputs per forward pass; default 64
	Truncation tokenizer.Truncation // TruncateAuto: longest_first (only_first for token tags)
}

func (o *EvalOptions) defaults() {
	if o.MaxLength == 0 {
		o.MaxLength = 128
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 64
	}
}

// Prediction is the model's answer for one input.
type Prediction struct {
	Problem labelled.Problem
	// Label is the arg-max class (SingleLabel) and Score its softmax
	// probability; Scores holds every class's probability. For MultiLabel,
	// Labels are the classes whose sigmoid exceeds 0.5 and Scores the
	// sigmoids. For Regression, Value is the output.
	Label  string
	Score  float64
	Scores map[string]float64
	Labels []string
	Value  float64
	// Words and Tags: TokenTags, one tag per word (the tag of the word's first
	// sub-token) and TagScores its probability. A word that lost its tokens
	// to truncation gets the tag "O" when the label set has it, else the
	// first label, with score 0.
	Words     []string
	Tags      []string
	TagScores []float64

	id  int   // SingleLabel: the class id
	ids []int // TokenTags: the tag ids
	set []bool
}

// MarshalJSON writes the fields that the problem uses: label, score and
// scores; labels and scores; value; or words, tags and scores.
func (p Prediction) MarshalJSON() ([]byte, error) {
	switch p.Problem {
	case labelled.MultiLabel:
		labels := p.Labels
		if labels == nil {
			labels = []string{}
		}
		return json.Marshal(struct {
			Labels []string           `json:"labels"`
			Scores map[string]float64 `json:"scores"`
		}{labels, p.Scores})
	case labelled.Regression:
		return json.Marshal(struct {
			Value float64 `json:"value"`
		}{p.Value})
	case labelled.TokenTags:
		return json.Marshal(struct {
			Words  []string  `json:"words"`
			Tags   []string  `json:"tags"`
			Scores []float64 `json:"scores"`
		}{p.Words, p.Tags, p.TagScores})
	}
	return json.Marshal(struct {
		Label  string             `json:"label"`
		Score  float64            `json:"score"`
		Scores map[string]float64 `json:"scores"`
	}{p.Label, p.Score, p.Scores})
}

// Report is the evaluation of a model on a dataset.
type Report struct {
	File       string             `json:"file,omitempty"`
	Examples   int                `json:"examples"`
	Loss       float64            `json:"loss"`        // HF's loss averaged over the examples (labelled tokens for TokenTags)
	MainMetric string             `json:"main_metric"` // the Spec's metric
	Metrics    map[string]float64 `json:"metrics"`     // see MetricNames; NaN (undefined) written as null
	Confusion  *metrics.Confusion `json:"confusion,omitempty"`
	Truncated  int                `json:"truncated"` // inputs cut to the maximum length
}

// Main returns the value of the main metric, −Inf when it is undefined.
func (r *Report) Main() float64 {
	v, ok := r.Metrics[r.MainMetric]
	if !ok || math.IsNaN(v) {
		return math.Inf(-1)
	}
	return v
}

// MarshalJSON writes undefined values (NaN) as null.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	ms := map[string]*float64{}
	for k, v := range r.Metrics {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			v := v
			ms[k] = &v
		} else {
			ms[k] = nil
		}
	}
	var loss *float64
	if !math.IsNaN(r.Loss) && !math.IsInf(r.Loss, 0) {
		loss = &r.Loss
	}
	return json.Marshal(struct {
		plain
		Loss    *float64            `json:"loss"`
		Metrics map[string]*float64 `json:"metrics"`
	}{plain(r), loss, ms})
}

// Evaluate runs the model over a labelled dataset and scores it with the
// metrics of the Spec's problem. It also returns the predictions.
func Evaluate(ctx context.Context, m *roformer.Model, tok *tokenizer.Tokenizer, spec labelled.Spec, ds *labelled.Dataset, eo EvalOptions) (*Report, []Prediction, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, err
	}
	eo.defaults()
	for i := range ds.Examples {
		if !ds.Examples[i].HasLabel {
			return nil, nil, &labelled.InputError{File: ds.File, Line: ds.Examples[i].Line, Err: fmt.Errorf("no label to evaluate against")}
		}
	}
	if err := spec.Check(ds, "the model's labels"); err != nil {
		return nil, nil, err
	}
	feats, nTrunc, err := encodeAll(tok, &spec, ds, encodeOptions{maxLen: eo.MaxLength, truncation: eo.Truncation})
	if err != nil {
		return nil, nil, err
	}
	rep, preds, err := evaluateFeatures(ctx, m, int32(tok.PadID()), &spec, feats, eo.BatchSize)
	if err != nil {
		return nil, nil, err
	}
	rep.File, rep.Truncated = ds.File, nTrunc
	return rep, preds, nil
}

// Predict runs the model over a dataset (labels, if any, are ignored).
func Predict(ctx context.Context, m *roformer.Model, tok *tokenizer.Tokenizer, spec labelled.Spec, ds *labelled.Dataset, eo EvalOptions) ([]Prediction, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	eo.defaults()
	plain := *ds
	plain.Examples = make([]labelled.Example, len(ds.Examples))
	for i, ex := range ds.Examples {
		ex.HasLabel = false
		plain.Examples[i] = ex
	}
	if err := spec.Check(&plain, "the model's labels"); err != nil {
		return nil, err
	}
	feats, _, err := encodeAll(tok, &spec, &plain, encodeOptions{maxLen: eo.MaxLength, truncation: eo.Truncation})
	if err != nil {
		return nil, err
	}
	preds, _, _, err := predictFeatures(ctx, m, int32(tok.PadID()), &spec, feats, eo.BatchSize, false)
	return preds, err
}

// evaluateFeatures predicts the features and scores the predictions.
func evaluateFeatures(ctx context.Context, m *roformer.Model, padID int32, spec *labelled.Spec, feats []*feature, batch int) (*Report, []Prediction, error) {
	preds, lossSum, lossN, err := predictFeatures(ctx, m, padID, spec, feats, batch, true)
	if err != nil {
		return nil, nil, err
	}
	rep := &Report{Examples: len(feats), MainMetric: spec.Metric, Loss: lossSum / lossN}
	rep.Metrics, rep.Confusion = score(spec, feats, preds)
	return rep, preds, nil
}

// predictFeatures runs the model in batches (in order) and decodes its
// outputs; with labels it also sums HF's loss weighted by its terms.
func predictFeatures(ctx context.Context, m *roformer.Model, padID int32, spec *labelled.Spec, feats []*feature, batch int, withLabels bool) (preds []Prediction, lossSum, lossN float64, err error) {
	preds = make([]Prediction, 0, len(feats))
	for lo := 0; lo < len(feats); lo += batch {
		if err := ctx.Err(); err != nil {
			return nil, 0, 0, err
		}
		part := feats[lo:min(lo+batch, len(feats))]
		b, lab := makeBatch(part, spec, padID, withLabels)
		out, err := m.Forward(ctx, b, lab, roformer.Options{})
		if err != nil {
			return nil, 0, 0, err
		}
		if withLabels && out.HasLoss {
			n := float64(len(part))
			if spec.Problem == labelled.TokenTags {
				n = 0
				for _, id := range lab.IDs {
					if id >= 0 {
						n++
					}
				}
			}
			if n > 0 {
				lossSum += out.Loss * n
				lossN += n
			}
		}
		preds = append(preds, decode(spec, part, out.Logits.Data, b.T)...)
	}
	return preds, lossSum, lossN, nil
}

// decode turns logits into predictions: [B, NL] for sequence heads, [B, T, NL]
// for token tags.
func decode(spec *labelled.Spec, feats []*feature, logits []float32, T int) []Prediction {
	NL := spec.NumOutputs()
	out := make([]Prediction, len(feats))
	for r, f := range feats {
		p := Prediction{Problem: spec.Problem}
		switch spec.Problem {
		case labelled.SingleLabel:
			probs := kernels.Softmax64(logits[r*NL : r*NL+NL])
			p.Scores = make(map[string]float64, NL)
			for k, v := range probs {
				p.Scores[spec.Labels[k]] = v
				if v > probs[p.id] {
					p.id = k
				}
			}
			p.Label, p.Score = spec.Labels[p.id], probs[p.id]
		case labelled.MultiLabel:
			p.Scores = make(map[string]float64, NL)
			p.set = make([]bool, NL)
			for k, z := range logits[r*NL : r*NL+NL] {
				s := 1 / (1 + math.Exp(-float64(z)))
				p.Scores[spec.Labels[k]] = s
				if s > 0.5 {
					p.Labels = append(p.Labels, spec.Labels[k])
					p.set[k] = true
				}
			}
		case labelled.Regression:
			p.Value = float64(logits[r])
			p.Score = p.Value
		case labelled.TokenTags:
			def := 0
			for k, l := range spec.Labels {
				if l == "O" {
					def = k
				}
			}
			p.Words = f.ex.Words
			p.Tags, p.TagScores, p.ids = make([]string, len(f.wordTok)), make([]float64, len(f.wordTok)), make([]int, len(f.wordTok))
			for w, j := range f.wordTok {
				id, sc := def, 0.0
				if j >= 0 {
					probs := kernels.Softmax64(logits[(r*T+j)*NL : (r*T+j)*NL+NL])
					id = 0
					for k, v := range probs {
						if v > probs[id] {
							id = k
						}
					}
					sc = probs[id]
				}
				p.ids[w], p.Tags[w], p.TagScores[w] = id, spec.Labels[id], sc
			}
		}
		out[r] = p
	}
	return out
}

// score computes the problem's metrics from predictions and gold labels.
func score(spec *labelled.Spec, feats []*feature, preds []Prediction) (map[string]float64, *metrics.Confusion) {
	ms := map[string]float64{}
	switch spec.Problem {
	case labelled.SingleLabel:
		pred, gold := make([]int, len(feats)), make([]int, len(feats))
		for i, f := range feats {
			pred[i], gold[i] = preds[i].id, int(f.label)
		}
		ms["accuracy"] = metrics.Accuracy(pred, gold)
		ms["macro_f1"] = metrics.MacroF1(pred, gold)
		ms["mcc"] = metrics.Matthews(pred, gold)
		if len(spec.Labels) == 2 {
			ms["f1"] = metrics.F1(pred, gold, spec.PositiveID())
		}
		return ms, metrics.NewConfusion(pred, gold, spec.Labels)
	case labelled.MultiLabel:
		pred, gold := make([][]bool, len(feats)), make([][]bool, len(feats))
		for i, f := range feats {
			pred[i] = preds[i].set
			gold[i] = make([]bool, len(f.floats))
			for k, v := range f.floats {
				gold[i][k] = v > 0.5
			}
		}
		s := metrics.ScoreMultiLabel(pred, gold)
		ms["subset_accuracy"], ms["micro_f1"], ms["macro_f1"] = s.SubsetAccuracy, s.MicroF1, s.MacroF1
	case labelled.Regression:
		x, y := make([]float64, len(feats)), make([]float64, len(feats))
		mse := 0.0
		for i, f := range feats {
			x[i], y[i] = preds[i].Value, float64(f.floats[0])
			mse += (x[i] - y[i]) * (x[i] - y[i])
		}
		ms["pearson"], ms["spearman"] = metrics.Pearson(x, y), metrics.Spearman(x, y)
		ms["mse"] = mse / float64(max(len(feats), 1))
		ms["neg_mse"] = -ms["mse"]
	case labelled.TokenTags:
		var pred, gold []int
		idx := spec.LabelIndex()
		for i, f := range feats {
			for w, t := range f.ex.Tags {
				pred = append(pred, preds[i].ids[w])
				gold = append(gold, idx[t])
			}
		}
		ms["accuracy"] = metrics.Accuracy(pred, gold)
		ms["macro_f1"] = metrics.MacroF1(pred, gold)
		return ms, metrics.NewConfusion(pred, gold, spec.Labels)
	}
	return ms, nil
}
