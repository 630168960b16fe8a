package labelled

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Spec says what a model learns: the problem, the label set and the metric
// that picks the best checkpoint. It is saved in finetune.json and, as
// id2label and problem_type, in config.json.
type Spec struct {
	Problem Problem `json:"problem"`
	// Labels are the class names in id order (SingleLabel, MultiLabel,
	// TokenTags); for Regression the name of the one output.
	Labels []string `json:"labels"`
	// Pair: every input is a pair of texts ([CLS] a [SEP] b [SEP], token
	// types 0 and 1).
	Pair bool `json:"pair"`
	// Metric is the metric that picks the best checkpoint (higher is
	// better); empty means DefaultMetric.
	Metric string `json:"metric"`
	// Positive is the class whose F1 is reported as "f1" for two classes
	// (GLUE's positive class 1); empty means Labels[1].
	Positive string `json:"positive,omitempty"`
}

// MetricNames lists the metrics each problem reports; the first is the default.
var MetricNames = map[Problem][]string{
	SingleLabel: {"accuracy", "f1", "macro_f1", "mcc"},
	MultiLabel:  {"micro_f1", "macro_f1", "subset_accuracy"},
	Regression:  {"pearson", "spearman", "neg_mse"},
	TokenTags:   {"accuracy", "macro_f1"},
}

// DefaultMetric returns the metric used when the Spec names none.
func DefaultMetric(p Problem) string { return MetricNames[p][0] }

// ProblemType returns HF's config problem_type for the problem ("" for
// token classification, which has none).
func (s *Spec) ProblemType() string {
	switch s.Problem {
	case SingleLabel:
		return "single_label_classification"
	case MultiLabel:
		return "multi_label_classification"
	case Regression:
		return "regression"
	}
	return ""
}

// NumOutputs is the number of logits per input (per token for TokenTags).
func (s *Spec) NumOutputs() int {
	if s.Problem == Regression {
		return 1
	}
	return len(s.Labels)
}

// Validate checks the problem, the labels and the metric.
func (s *Spec) Validate() error {
	if _, err := ParseProblem(string(s.Problem)); err != nil {
		return err
	}
	if s.Metric == "" {
		s.Metric = DefaultMetric(s.Problem)
	}
	ok := false
	for _, m := range MetricNames[s.Problem] {
		ok = ok || m == s.Metric
	}
	if !ok {
		return fmt.Errorf("labelled: metric %q does not apply to %s (valid: %s)", s.Metric, s.Problem, strings.Join(MetricNames[s.Problem], ", "))
	}
	if s.Problem == Regression {
		if len(s.Labels) != 1 {
			return fmt.Errorf("labelled: regression has one output; %d label names given", len(s.Labels))
		}
		return nil
	}
	min := 2
	if s.Problem == MultiLabel {
		min = 1
	}
	if len(s.Labels) < min {
		return fmt.Errorf("labelled: %s needs at least %d labels, the label set has %d (%s)", s.Problem, min, len(s.Labels), QuoteLabels(s.Labels))
	}
	seen := map[string]bool{}
	for _, l := range s.Labels {
		if strings.TrimSpace(l) == "" {
			return errors.New("labelled: the label set holds an empty name")
		}
		if seen[l] {
			return fmt.Errorf("labelled: the label set names %q twice", l)
		}
		seen[l] = true
	}
	if s.Positive != "" && !seen[s.Positive] {
		return fmt.Errorf("labelled: the positive label %q is not in the label set (%s)", s.Positive, QuoteLabels(s.Labels))
	}
	if s.Metric == "f1" && len(s.Labels) != 2 {
		return fmt.Errorf("labelled: metric f1 is the binary F1 and needs two labels, the set has %d; use macro_f1", len(s.Labels))
	}
	return nil
}

// PositiveID returns the id of the positive class for binary F1: that of
// Positive, else 1.
func (s *Spec) PositiveID() int {
	for i, l := range s.Labels {
		if l == s.Positive {
			return i
		}
	}
	return 1
}

// LabelIndex maps the label names to their ids.
func (s *Spec) LabelIndex() map[string]int {
	m := make(map[string]int, len(s.Labels))
	for i, l := range s.Labels {
		m[l] = i
	}
	return m
}

// InferLabels returns the label set of a dataset: every label it uses, in
// numeric order when all are integers, else sorted as strings.
func InferLabels(ds *Dataset, p Problem) []string {
	seen := map[string]bool{}
	for i := range ds.Examples {
		ex := &ds.Examples[i]
		switch p {
		case SingleLabel:
			if ex.HasLabel {
				seen[ex.Label] = true
			}
		case MultiLabel:
			for _, l := range ex.Labels {
				seen[l] = true
			}
		case TokenTags:
			for _, l := range ex.Tags {
				seen[l] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	numeric := true
	for l := range seen {
		out = append(out, l)
		if _, err := strconv.ParseFloat(l, 64); err != nil {
			numeric = false
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if numeric {
			a, _ := strconv.ParseFloat(out[i], 64)
			b, _ := strconv.ParseFloat(out[j], 64)
			if a != b {
				return a < b
			}
		}
		return out[i] < out[j]
	})
	return out
}

// Check verifies that every labelled example of ds fits the spec: labels in
// the label set, pairs where the spec wants pairs. The error names the file
// and line, and where the label set came from (from).
func (s *Spec) Check(ds *Dataset, from string) error {
	idx := s.LabelIndex()
	bad := func(ex *Example, l string) error {
		return &InputError{File: ds.File, Line: ex.Line, Err: fmt.Errorf("label %q is not in the label set %s (%s)", l, "["+strings.Join(s.Labels, ", ")+"]", from)}
	}
	for i := range ds.Examples {
		ex := &ds.Examples[i]
		if s.Pair != (ex.TextPair != nil) {
			if s.Pair {
				return &InputError{File: ds.File, Line: ex.Line, Err: errors.New("the model takes pairs of texts but this example has no second text (name its column)")}
			}
			return &InputError{File: ds.File, Line: ex.Line, Err: errors.New("the model takes single texts but this example is a pair")}
		}
		if !ex.HasLabel {
			continue
		}
		switch s.Problem {
		case SingleLabel:
			if _, ok := idx[ex.Label]; !ok {
				return bad(ex, ex.Label)
			}
		case MultiLabel:
			for _, l := range ex.Labels {
				if _, ok := idx[l]; !ok {
					return bad(ex, l)
				}
			}
		case TokenTags:
			for _, l := range ex.Tags {
				if _, ok := idx[l]; !ok {
					return bad(ex, l)
				}
			}
		case Regression:
			if math.IsNaN(ex.Value) || math.IsInf(ex.Value, 0) {
				return &InputError{File: ds.File, Line: ex.Line, Err: fmt.Errorf("the value %v is not finite", ex.Value)}
			}
		}
	}
	return nil
}
