package roformer

import (
	"fmt"
	"slices"
	"strings"
)

// Head names an output head, with the names the CLI uses.
type Head string

const (
	HeadBase           Head = "base"
	HeadMaskedLM       Head = "masked-lm"
	HeadCausalLM       Head = "causal-lm"
	HeadSequenceCls    Head = "sequence-classification"
	HeadTokenCls       Head = "token-classification"
	HeadQA             Head = "question-answering"
	HeadMultipleChoice Head = "multiple-choice"
)

// Heads lists every head, in the order of headKinds.
var Heads = func() []Head {
	hs := make([]Head, len(headKinds))
	for i, k := range headKinds {
		hs[i] = k.head
	}
	return hs
}()

// ParseHead maps a CLI name to a Head.
func ParseHead(s string) (Head, error) {
	for _, h := range Heads {
		if string(h) == s {
			return h, nil
		}
	}
	names := make([]string, len(Heads))
	for i, h := range Heads {
		names[i] = string(h)
	}
	return "", fmt.Errorf("roformer: unknown head %q (valid: %s)", s, strings.Join(names, ", "))
}

// HFClass returns the transformers class that this head corresponds to.
func (h Head) HFClass() string { return kindOf(h).hfClass }

// Outputs names the tensors the head returns, as HF names them
// (Output.Named gives each).
func (h Head) Outputs() []string { return kindOf(h).outputs }

// Choices reports whether the head reads the rows of a batch as examples ×
// Options.NumChoices (input_ids [B][C][L] in HF's layout).
func (h Head) Choices() bool { return kindOf(h).choices }

// HeadForConfig returns the head a config.json's architectures name: the
// first of them that this package knows, else HeadBase.
func HeadForConfig(cfg *Config) Head {
	for _, arch := range cfg.Architectures {
		if i := slices.IndexFunc(headKinds, func(k headKind) bool { return k.hfClass == arch }); i >= 0 {
			return headKinds[i].head
		}
	}
	return HeadBase
}

// headKind is one head: what HF calls it, and how it is built, run and
// trained. headKinds is the one place that lists the heads; each head's
// functions live in its own file (head_lm.go, head_classify.go, head_qa.go,
// head_choice.go). Adding a head is a file with its parameters' struct and
// these functions, one row here, and the field that holds its parameters in
// Model (whose hf tag names them in the state dict).
type headKind struct {
	head    Head
	hfClass string
	outputs []string // Output's tensors, by HF name
	causal  bool     // applies the causal mask whatever the config says
	choices bool     // the batch rows are examples × Options.NumChoices
	build   func(m *Model)
	linears func(m *Model) []linearShape // its linear layers, for SetPrecision
	forward func(m *Model, out *Output, x []float32, b *Batch, labels *Labels, opts Options, se *Session) error
	train   func(m *Model, dx, x []float32, s *State, b *Batch, labels *Labels, opts StepOptions) (*StepResult, error)
}

var headKinds = []headKind{
	{head: HeadBase, hfClass: "RoFormerModel", outputs: []string{"last_hidden_state"}},
	{head: HeadMaskedLM, hfClass: "RoFormerForMaskedLM", outputs: []string{"logits"}, build: buildLM, linears: lmLinears, forward: lmForward, train: lmTrain},
	{head: HeadCausalLM, hfClass: "RoFormerForCausalLM", outputs: []string{"logits"}, causal: true, build: buildLM, linears: lmLinears, forward: lmForward, train: lmTrain},
	{head: HeadSequenceCls, hfClass: "RoFormerForSequenceClassification", outputs: []string{"logits"}, build: buildSeqCls, linears: seqClsLinears, forward: seqClsForward, train: seqClsTrain},
	{head: HeadTokenCls, hfClass: "RoFormerForTokenClassification", outputs: []string{"logits"}, build: buildTokenCls, linears: tokenClsLinears, forward: tokenClsForward, train: tokenClsTrain},
	{head: HeadQA, hfClass: "RoFormerForQuestionAnswering", outputs: []string{"start_logits", "end_logits"}, build: buildQA, linears: qaLinears, forward: qaForward, train: qaTrain},
	{head: HeadMultipleChoice, hfClass: "RoFormerForMultipleChoice", outputs: []string{"logits"}, choices: true, build: buildChoice, linears: choiceLinears, forward: choiceForward, train: choiceTrain},
}

// kindOf returns h's row of headKinds (HeadBase's for an unknown head).
func kindOf(h Head) *headKind {
	for i := range headKinds {
		if headKinds[i].head == h {
			return &headKinds[i]
		}
	}
	return &headKinds[0]
}

// checkChoices checks that a batch for a multiple-choice head holds whole
// examples of numChoices rows each.
func (m *Model) checkChoices(b *Batch, numChoices int) error {
	if kindOf(m.Head).choices && (numChoices <= 0 || b.B%numChoices != 0) {
		return fmt.Errorf("roformer: multiple choice needs rows = examples × choices; %d rows, %d choices", b.B, numChoices)
	}
	return nil
}
