package finetune

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"github.com/roformer-go/roformer/data/labelled"
)

// BaselineFile is the name of a saved baseline in its folder.
const BaselineFile = "baseline.json"

// BaselineOptions are the settings of the bag-of-words baseline.
type BaselineOptions struct {
	Epochs   int     `json:"epochs"`    // passes over the training set (default 20)
	LR       float64 `json:"lr"`        // SGD step size (default 0.2), divided by sqrt(epoch)
	L2       float64 `json:"l2"`        // weight decay on the features seen in a step (default 1e-5)
	MinCount int     `json:"min_count"` // features in fewer training examples are dropped (default 2)
	Seed     uint64  `json:"seed"`      // order of the examples
}

func (o *BaselineOptions) defaults() {
	if o.Epochs <= 0 {
		o.Epochs = 20
	}
	if o.LR <= 0 {
		o.LR = 0.2
	}
	if o.L2 < 0 {
		o.L2 = 0
	} else if o.L2 == 0 {
		o.L2 = 1e-5
	}
	if o.MinCount <= 0 {
		o.MinCount = 2
	}
}

// Baseline is a bag-of-words multinomial logistic regression:
//
//	p(y | x) = softmax(W·φ(x) + b)
//
// where φ(x) is the L2-normalised binary indicator vector of the lower-cased
// words and word bigrams of the text. For pairs, φ marks each word and bigram
// as in both texts, only in the first or only in the second, and adds the
// Jaccard overlaps of the two texts' word and bigram sets, so that the model
// can see agreement between them. It is trained with SGD on the
// cross-entropy, and the epoch with the best main metric on the dev set is
// kept. It handles single-label classification only.
type Baseline struct {
	Spec     labelled.Spec   `json:"spec"`
	Options  BaselineOptions `json:"options"`
	Features []string        `json:"features"`
	W        [][]float64     `json:"weights"` // [labels][features]
	B        []float64       `json:"bias"`    // [labels]
	index    map[string]int
}

// words splits text into lower-cased runs of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// grams returns the set of words and bigrams of text.
func grams(text string) map[string]bool {
	w := words(text)
	s := make(map[string]bool, 2*len(w))
	for i, x := range w {
		s[x] = true
		if i > 0 {
			s[w[i-1]+" "+x] = true
		}
	}
	return s
}

// featurize returns the raw feature names and values of an example.
func featurize(ex *labelled.Example) map[string]float64 {
	a := grams(ex.Text)
	out := map[string]float64{}
	if ex.TextPair == nil {
		for g := range a {
			out[g] = 1
		}
		return out
	}
	b := grams(*ex.TextPair)
	for g := range a {
		if b[g] {
			out["both:"+g] = 1
		} else {
			out["a:"+g] = 1
		}
	}
	for g := range b {
		if !a[g] {
			out["b:"+g] = 1
		}
	}
	// The overlaps get weight 4 so that they stand out after normalisation.
	out["#jaccard_words"] = 4 * jaccard(a, b, false)
	out["#jaccard_bigrams"] = 4 * jaccard(a, b, true)
	return out
}

// jaccard returns |a ∩ b| / |a ∪ b| over the words (bigrams false) or the
// bigrams of two gram sets; 0 when both are empty.
func jaccard(a, b map[string]bool, bigrams bool) float64 {
	var inter, union int
	for g := range a {
		if strings.Contains(g, " ") == bigrams {
			union++
			if b[g] {
				inter++
			}
		}
	}
	for g := range b {
		if strings.Contains(g, " ") == bigrams && !a[g] {
			union++
		}
	}
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}

type sparse struct {
	idx []int
	val []float64
}

// vector maps an example to its normalised sparse vector over known features.
func (b *Baseline) vector(ex *labelled.Example) sparse {
	raw := featurize(ex)
	var v sparse
	norm := 0.0
	for name, x := range raw {
		if i, ok := b.index[name]; ok {
			v.idx = append(v.idx, i)
			v.val = append(v.val, x)
			norm += x * x
		}
	}
	if norm > 0 {
		n := math.Sqrt(norm)
		for i := range v.val {
			v.val[i] /= n
		}
	}
	return v
}

func (b *Baseline) logits(v sparse, out []float64) {
	for k := range b.W {
		s := b.B[k]
		w := b.W[k]
		for j, i := range v.idx {
			s += w[i] * v.val[j]
		}
		out[k] = s
	}
}

func softmax64(z []float64) {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = math.Max(mx, v)
	}
	s := 0.0
	for i, v := range z {
		z[i] = math.Exp(v - mx)
		s += z[i]
	}
	for i := range z {
		z[i] /= s
	}
}

// TrainBaseline fits the baseline on train, keeping the epoch with the best
// spec.Metric on dev (the last epoch when dev is nil). progress, when not
// nil, receives a line per epoch.
func TrainBaseline(ctx context.Context, spec labelled.Spec, train, dev *labelled.Dataset, opts BaselineOptions, progress io.Writer) (*Baseline, *Report, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, err
	}
	if spec.Problem != labelled.SingleLabel {
		return nil, nil, fmt.Errorf("finetune: the bag-of-words baseline handles single-label classification only, not %s", spec.Problem)
	}
	opts.defaults()
	for _, ds := range []*labelled.Dataset{train, dev} {
		if ds != nil {
			if err := spec.Check(ds, "the label set"); err != nil {
				return nil, nil, err
			}
		}
	}
	// Vocabulary: features present in at least MinCount training examples.
	df := map[string]int{}
	for i := range train.Examples {
		for f := range featurize(&train.Examples[i]) {
			df[f]++
		}
	}
	b := &Baseline{Spec: spec, Options: opts, index: map[string]int{}}
	for f, n := range df {
		if n >= opts.MinCount || strings.HasPrefix(f, "#") {
			b.Features = append(b.Features, f)
		}
	}
	sort.Strings(b.Features)
	for i, f := range b.Features {
		b.index[f] = i
	}
	K := len(spec.Labels)
	b.W = make([][]float64, K)
	for k := range b.W {
		b.W[k] = make([]float64, len(b.Features))
	}
	b.B = make([]float64, K)
	idx := spec.LabelIndex()
	xs := make([]sparse, len(train.Examples))
	ys := make([]int, len(train.Examples))
	for i := range train.Examples {
		if !train.Examples[i].HasLabel {
			return nil, nil, &labelled.InputError{File: train.File, Line: train.Examples[i].Line, Err: errors.New("no label")}
		}
		xs[i], ys[i] = b.vector(&train.Examples[i]), idx[train.Examples[i].Label]
	}
	var bestW [][]float64
	var bestB []float64
	var best *Report
	p := make([]float64, K)
	r := rand.New(rand.NewPCG(opts.Seed, 0x626f77))
	for epoch := 1; epoch <= opts.Epochs; epoch++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		lr := opts.LR / math.Sqrt(float64(epoch))
		loss := 0.0
		for _, i := range r.Perm(len(xs)) {
			v := xs[i]
			b.logits(v, p)
			softmax64(p)
			loss -= math.Log(math.Max(p[ys[i]], 1e-300))
			for k := range p {
				g := p[k]
				if k == ys[i] {
					g--
				}
				w := b.W[k]
				for j, f := range v.idx {
					w[f] -= lr * (g*v.val[j] + opts.L2*w[f])
				}
				b.B[k] -= lr * g
			}
		}
		if dev == nil {
			continue
		}
		rep := b.Evaluate(dev)
		mark := ""
		if best == nil || rep.Main() > best.Main() {
			best, mark = rep, " (best)"
			bestW = make([][]float64, K)
			for k := range b.W {
				bestW[k] = append([]float64(nil), b.W[k]...)
			}
			bestB = append([]float64(nil), b.B...)
		}
		if progress != nil {
			fmt.Fprintf(progress, "baseline epoch %d: train loss %.4f | dev %s %.4f%s\n", epoch, loss/float64(len(xs)), spec.Metric, rep.Main(), mark)
		}
	}
	if bestW != nil {
		b.W, b.B = bestW, bestB
	}
	return b, best, nil
}

// Predict returns the baseline's predictions for ds.
func (b *Baseline) Predict(ds *labelled.Dataset) []Prediction {
	K := len(b.Spec.Labels)
	out := make([]Prediction, len(ds.Examples))
	p := make([]float64, K)
	for i := range ds.Examples {
		b.logits(b.vector(&ds.Examples[i]), p)
		softmax64(p)
		pr := Prediction{Problem: labelled.SingleLabel, Scores: map[string]float64{}}
		for k, v := range p {
			pr.Scores[b.Spec.Labels[k]] = v
			if v > p[pr.id] {
				pr.id = k
			}
		}
		pr.Label, pr.Score = b.Spec.Labels[pr.id], p[pr.id]
		out[i] = pr
	}
	return out
}

// Evaluate scores the baseline on a labelled dataset.
func (b *Baseline) Evaluate(ds *labelled.Dataset) *Report {
	preds := b.Predict(ds)
	idx := b.Spec.LabelIndex()
	feats := make([]*feature, len(ds.Examples))
	loss := 0.0
	for i := range ds.Examples {
		ex := &ds.Examples[i]
		feats[i] = &feature{ex: ex, label: int32(idx[ex.Label])}
		loss -= math.Log(math.Max(preds[i].Scores[ex.Label], 1e-300))
	}
	rep := &Report{File: ds.File, Examples: len(feats), MainMetric: b.Spec.Metric, Loss: loss / float64(max(len(feats), 1))}
	rep.Metrics, rep.Confusion = score(&b.Spec, feats, preds)
	return rep
}

// Save writes the baseline to dir/baseline.json.
func (b *Baseline) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("finetune: %w", err)
	}
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("finetune: baseline: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, BaselineFile), data, 0o644)
}

// LoadBaseline reads dir/baseline.json.
func LoadBaseline(dir string) (*Baseline, error) {
	data, err := os.ReadFile(filepath.Join(dir, BaselineFile))
	if err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("finetune: %s: %w", filepath.Join(dir, BaselineFile), err)
	}
	if err := b.Spec.Validate(); err != nil {
		return nil, err
	}
	if len(b.W) != len(b.Spec.Labels) || len(b.B) != len(b.Spec.Labels) {
		return nil, fmt.Errorf("finetune: %s: %d weight rows and %d biases for %d labels", filepath.Join(dir, BaselineFile), len(b.W), len(b.B), len(b.Spec.Labels))
	}
	for k := range b.W {
		if len(b.W[k]) != len(b.Features) {
			return nil, fmt.Errorf("finetune: %s: weight row %d has %d values for %d features", filepath.Join(dir, BaselineFile), k, len(b.W[k]), len(b.Features))
		}
	}
	b.index = make(map[string]int, len(b.Features))
	for i, f := range b.Features {
		b.index[f] = i
	}
	return &b, nil
}
