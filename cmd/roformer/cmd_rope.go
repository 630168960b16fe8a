package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/roformer-go/roformer/model/roformer"
)

func init() {
	register(&command{name: "rope", summary: "print the rotary frequencies a model uses for a sequence length (rope_theta, rope_scaling)", run: cmdRope})
}

type ropeOptions struct {
	model  string
	seqLen int
}

func cmdRope(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rope", "--model DIR --seq-len N", stderr)
	var o ropeOptions
	fs.StringVar(&o.model, "model", "", "model folder (its config.json; required)")
	fs.IntVar(&o.seqLen, "seq-len", 0, "tokens in the sequence (dynamic and longrope scaling depend on it; default max_position_embeddings)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case o.model == "":
		return usagef("--model is required")
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case o.seqLen < 0:
		return usagef("--seq-len %d must be positive", o.seqLen)
	}
	return runRope(o, stdout)
}

// ropeResult is the JSON line of roformer rope.
type ropeResult struct {
	RopeType        string    `json:"rope_type"`
	SeqLen          int       `json:"seq_len"`
	InvFreq         []float64 `json:"inv_freq"`
	AttentionFactor float64   `json:"attention_factor"`
}

func runRope(o ropeOptions, w io.Writer) error {
	if err := resolveModel(&o.model); err != nil {
		return err
	}
	cfg, err := roformer.LoadConfig(filepath.Join(o.model, "config.json"))
	if err != nil {
		return err
	}
	if cfg.PosEnc() != roformer.PosRotary {
		return fmt.Errorf("%s: position_embedding_type is %s: the model has no rotary embedding", o.model, cfg.PosEnc())
	}
	r, err := cfg.Rotary()
	if err != nil {
		return fmt.Errorf("%s: %w", o.model, err)
	}
	n := o.seqLen
	if n == 0 {
		n = cfg.MaxPositionEmbeddings
	}
	inv, af := r.Frequencies(n)
	rc := r.Config()
	fmt.Fprintf(w, "rope: %s, base %g, %d of %d dimensions per head turned, max_position_embeddings %d, %d tokens\n",
		cfg.RopeType(), rc.Base, rc.RotaryDims, rc.HeadSize, cfg.MaxPositionEmbeddings, n)
	line, err := json.Marshal(ropeResult{RopeType: cfg.RopeType(), SeqLen: n, InvFreq: inv, AttentionFactor: af})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}
