package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/tensor"
)

func init() {
	register(&command{name: "forward", summary: "run a model folder on token ids and print HF's outputs as JSON", run: cmdForward})
}

type forwardOptions struct {
	model, head, input, output string
	precision                  string
	threads                    int
	quiet                      bool
}

func cmdForward(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("forward", "--model DIR --head HEAD --input IN.json [--output OUT.json]", stderr)
	var o forwardOptions
	fs.StringVar(&o.model, "model", "", "model folder: config.json and model.safetensors or pytorch_model.bin (required)")
	fs.StringVar(&o.head, "head", "base", "head: base, masked-lm, causal-lm, sequence-classification, token-classification, question-answering, multiple-choice")
	fs.StringVar(&o.input, "input", "", "JSON file with input_ids [B][L] ([B][C][L] for multiple-choice), optional attention_mask and token_type_ids (required; - for stdin)")
	fs.StringVar(&o.output, "output", "", "write the outputs here instead of stdout")
	fs.BoolVar(&o.quiet, "quiet", false, "do not print the BLAS line on stderr")
	computeFlags(fs, &o.precision, &o.threads)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.model == "" || o.input == "" {
		return usagef("--model and --input are required")
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if err := setupCompute(o.threads, stderr, o.quiet); err != nil {
		return err
	}
	if o.output != "" {
		return writeFileVia(o.output, func(w io.Writer) error { return runForward(ctx, o, w) })
	}
	return runForward(ctx, o, stdout)
}

// forwardInput is IN.json. Integer arrays are decoded as raw JSON so that
// both [B][L] and [B][C][L] are accepted and ragged rows are reported.
type forwardInput struct {
	InputIDs       json.RawMessage `json:"input_ids"`
	AttentionMask  json.RawMessage `json:"attention_mask"`
	TokenTypeIDs   json.RawMessage `json:"token_type_ids"`
	PositionIDs    json.RawMessage `json:"position_ids"`
	Labels         json.RawMessage `json:"labels"`
	StartPositions []int32         `json:"start_positions"`
	EndPositions   []int32         `json:"end_positions"`
}

// intArray decodes a rectangular integer array of the given rank and
// returns its values flat with its shape.
func intArray(name string, raw json.RawMessage, rank int) ([]int32, []int, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	var flat []int32
	var shape []int
	var walk func(v any, depth int, path string) error
	walk = func(v any, depth int, path string) error {
		if depth == rank {
			n, ok := v.(json.Number)
			if !ok {
				return fmt.Errorf("%s%s is %s, want an integer", name, path, jsonKind(v))
			}
			i, err := strconv.ParseInt(string(n), 10, 32)
			if err != nil {
				return fmt.Errorf("%s%s = %s is not a 32-bit integer", name, path, n)
			}
			flat = append(flat, int32(i))
			return nil
		}
		arr, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s%s is %s, want an array (%d dimensions expected)", name, path, jsonKind(v), rank)
		}
		if len(shape) == depth {
			shape = append(shape, len(arr))
		} else if shape[depth] != len(arr) {
			return fmt.Errorf("%s is ragged: %s%s has %d entries, earlier rows have %d", name, name, path, len(arr), shape[depth])
		}
		if len(arr) == 0 {
			return fmt.Errorf("%s%s is empty", name, path)
		}
		for i, e := range arr {
			if err := walk(e, depth+1, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(v, 0, ""); err != nil {
		return nil, nil, err
	}
	return flat, shape, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func runForward(ctx context.Context, o forwardOptions, w io.Writer) error {
	head, err := roformer.ParseHead(o.head)
	if err != nil {
		return usageError{err}
	}
	var raw []byte
	if o.input == "-" {
		raw, err = io.ReadAll(os.Stdin)
	} else {
		raw, err = os.ReadFile(o.input)
	}
	if err != nil {
		return err
	}
	var in forwardInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("%s: %w", o.input, err)
	}
	if len(in.InputIDs) == 0 {
		return fmt.Errorf("%s: input_ids missing", o.input)
	}
	rank := 2
	if head.Choices() {
		rank = 3
	}
	ids, shape, err := intArray("input_ids", in.InputIDs, rank)
	if err != nil {
		return fmt.Errorf("%s: %w", o.input, err)
	}
	b := &roformer.Batch{InputIDs: ids, T: shape[rank-1], B: len(ids) / shape[rank-1]}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *[]int32
	}{{"attention_mask", in.AttentionMask, &b.AttentionMask}, {"token_type_ids", in.TokenTypeIDs, &b.TokenTypeIDs}, {"position_ids", in.PositionIDs, &b.PositionIDs}} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		vals, sh, err := intArray(f.name, f.raw, rank)
		if err != nil {
			return fmt.Errorf("%s: %w", o.input, err)
		}
		if !tensor.SameShape(sh, shape) {
			return fmt.Errorf("%s: %s has shape %v, input_ids %v", o.input, f.name, sh, shape)
		}
		*f.dst = vals
	}
	l, err := openModel(&o.model, o.precision, pipeline.OpenOptions{Head: head, NoTokenizer: true})
	if err != nil {
		if errors.Is(err, roformer.ErrHeadMissing) {
			return fmt.Errorf("%w\n(the folder holds no trained %s head; fine-tune one first, or use --head base)", err, head)
		}
		return err
	}
	opts := roformer.Options{}
	if head.Choices() {
		opts.NumChoices = shape[1]
	}
	labels, err := forwardLabels(&in, head, &l.Config)
	if err != nil {
		return fmt.Errorf("%s: %w", o.input, err)
	}
	res, err := l.Forward(ctx, b, labels, opts)
	if err != nil {
		return err
	}
	outs := map[string]*tensor.Tensor{}
	for _, name := range head.Outputs() {
		outs[name] = res.Named(name)
	}
	if res.PoolerOutput != nil && head == roformer.HeadBase {
		outs["pooler_output"] = res.PoolerOutput // RoFormer-Sim's pooler
	}
	return writeOutputs(w, outs, res)
}

// forwardLabels reads the optional labels of IN.json for the head's loss.
// For sequence classification the model's configuration decides how they
// are read, as HF decides the loss: floats for regression (num_labels 1 or
// problem_type regression, so [2, 3] are targets, not class ids) and for
// multi-label problems; otherwise integers are class ids and floats mean a
// multi-label problem.
func forwardLabels(in *forwardInput, head roformer.Head, cfg *roformer.Config) (*roformer.Labels, error) {
	if head == roformer.HeadQA {
		if in.StartPositions == nil && in.EndPositions == nil {
			return nil, nil
		}
		return &roformer.Labels{StartPositions: in.StartPositions, EndPositions: in.EndPositions}, nil
	}
	if len(in.Labels) == 0 || string(in.Labels) == "null" {
		return nil, nil
	}
	switch head {
	case roformer.HeadMaskedLM, roformer.HeadCausalLM, roformer.HeadTokenCls:
		ids, _, err := intArray("labels", in.Labels, 2)
		return &roformer.Labels{IDs: ids}, err
	case roformer.HeadMultipleChoice:
		ids, _, err := intArray("labels", in.Labels, 1)
		return &roformer.Labels{IDs: ids}, err
	case roformer.HeadSequenceCls:
		floatsOnly := cfg.NumLabels == 1 || cfg.ProblemType == "regression" || cfg.ProblemType == "multi_label_classification"
		if !floatsOnly {
			if ids, _, err := intArray("labels", in.Labels, 1); err == nil {
				return &roformer.Labels{IDs: ids}, nil
			}
		}
		var fl []float32
		if err := json.Unmarshal(in.Labels, &fl); err == nil {
			return &roformer.Labels{Floats: fl}, nil
		}
		var rows [][]float32
		if err := json.Unmarshal(in.Labels, &rows); err != nil {
			return nil, fmt.Errorf("labels: want integers [B], floats [B] or [B][num_labels]: %w", err)
		}
		var fl2 []float32
		for _, r := range rows {
			fl2 = append(fl2, r...)
		}
		return &roformer.Labels{Floats: fl2}, nil
	}
	return nil, fmt.Errorf("labels: the %s head has no loss", head)
}

// writeOutputs writes {"name": {"shape": [...], "data": [...]}, ..., "loss": x}
// with float32 values in their shortest round-trip form.
func writeOutputs(w io.Writer, outs map[string]*tensor.Tensor, res *roformer.Output) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	bw.WriteString("{")
	first := true
	for _, name := range []string{"last_hidden_state", "pooler_output", "logits", "start_logits", "end_logits"} {
		t, ok := outs[name]
		if !ok {
			continue
		}
		if !first {
			bw.WriteString(",")
		}
		first = false
		fmt.Fprintf(bw, "\n  %q: {\"shape\": [", name)
		for i, d := range t.Shape {
			if i > 0 {
				bw.WriteString(", ")
			}
			bw.WriteString(strconv.Itoa(d))
		}
		bw.WriteString("], \"data\": [")
		buf := make([]byte, 0, 32)
		for i, v := range t.Data {
			if i > 0 {
				bw.WriteString(",")
			}
			buf = appendFloat32(buf[:0], v)
			bw.Write(buf)
		}
		bw.WriteString("]}")
	}
	if res.HasLoss {
		fmt.Fprintf(bw, ",\n  \"loss\": %s", appendFloat32(nil, float32(res.Loss)))
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// appendFloat32 formats v as the shortest decimal that parses back to the
// same float32; NaN and ±Inf (not JSON numbers) become null.
func appendFloat32(b []byte, v float32) []byte {
	f := float64(v)
	if f != f || f > 3.5e38 || f < -3.5e38 {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 32)
}

// writeFileVia writes path atomically through fill (atomicfile.Write), so
// a failure leaves no half-written output; fill's error comes back as it is.
func writeFileVia(path string, fill func(io.Writer) error) error {
	return atomicfile.Write(path, fill)
}
