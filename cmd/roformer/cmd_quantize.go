package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
)

func init() {
	register(&command{name: "quantize", summary: "write a model folder with its weights stored in int8 or bf16, loaded as they are", run: cmdQuantize})
}

type quantizeOptions struct {
	model, out, precision string
}

func cmdQuantize(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("quantize", "--model DIR --out DIR [--precision int8|bf16]", stderr)
	var o quantizeOptions
	fs.StringVar(&o.model, "model", "", "model folder or sentence-transformers folder to read (required)")
	fs.StringVar(&o.out, "out", "", "new or empty folder to write (required)")
	fs.StringVar(&o.precision, "precision", "int8", "int8 (codes and per-channel scales of every linear layer; served in int8 as stored) or bf16 (every tensor bfloat16; served with --precision bf16)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.model == "" || o.out == "" {
		return usagef("--model and --out are required")
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	p, err := parsePrecision(o.precision)
	if err != nil {
		return err
	}
	if p != roformer.PrecisionInt8 && p != roformer.PrecisionBF16 {
		return usagef("--precision %s: want int8 or bf16", p)
	}
	if err := resolveModel(&o.model); err != nil {
		return err
	}
	res, err := pipeline.Quantize(o.model, o.out, p)
	if err != nil {
		return err
	}
	ratio := 0.0
	if res.WeightBytes > 0 {
		ratio = float64(res.QuantizedBytes) / float64(res.WeightBytes)
	}
	fmt.Fprintf(stdout, "wrote %s: %s weights in %s, %.1f MB (%.2f× the %.1f MB of %s)\n",
		res.Dir, p, filepath.Join(res.Transformer, "model.safetensors"), float64(res.QuantizedBytes)/1e6, ratio,
		float64(res.WeightBytes)/1e6, strings.Join(res.Read, ", "))
	if len(res.Copied) > 0 {
		fmt.Fprintf(stdout, "copied: %s\n", strings.Join(res.Copied, ", "))
	}
	if len(res.Left) > 0 {
		fmt.Fprintf(stdout, "left out: %s\n", strings.Join(res.Left, ", "))
	}
	return nil
}
