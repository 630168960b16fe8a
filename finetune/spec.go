package finetune

import (
	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/model/roformer"
)

// Head returns the model head that spec's problem needs: token
// classification for labelled.TokenTags, sequence classification for the
// others.
func Head(spec *labelled.Spec) roformer.Head {
	if spec.Problem == labelled.TokenTags {
		return roformer.HeadTokenCls
	}
	return roformer.HeadSequenceCls
}

// ApplySpec writes spec into a model configuration: num_labels, id2label,
// label2id and problem_type, as HF's from_pretrained(num_labels=…,
// id2label=…, problem_type=…) would.
func ApplySpec(cfg *roformer.Config, spec *labelled.Spec) {
	cfg.SetLabels(append([]string(nil), spec.Labels...))
	cfg.ProblemType = spec.ProblemType()
}

// SpecFromConfig reads the spec of a fine-tuned model from its configuration
// (for models fine-tuned elsewhere, without finetune.json): the problem from
// the head and problem_type, the labels from id2label.
func SpecFromConfig(cfg *roformer.Config, head roformer.Head) labelled.Spec {
	s := labelled.Spec{Labels: cfg.Labels()}
	switch {
	case head == roformer.HeadTokenCls:
		s.Problem = labelled.TokenTags
	case cfg.ProblemType == "regression" || (cfg.ProblemType == "" && cfg.NumLabels == 1):
		s.Problem = labelled.Regression
	case cfg.ProblemType == "multi_label_classification":
		s.Problem = labelled.MultiLabel
	default:
		s.Problem = labelled.SingleLabel
	}
	s.Metric = labelled.DefaultMetric(s.Problem)
	return s
}
