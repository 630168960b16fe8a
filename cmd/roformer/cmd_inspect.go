package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tensor"
)

func init() {
	register(&command{name: "inspect", summary: "describe a model folder: config, parameters, tensors, which heads it can run", run: cmdInspect})
}

// maxInspectLabels is the number of label names inspect prints.
const maxInspectLabels = 64

type inspectOptions struct {
	model   string
	tensors bool
}

func cmdInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", "--model DIR", stderr)
	var o inspectOptions
	fs.StringVar(&o.model, "model", "", "model folder (required)")
	fs.BoolVar(&o.tensors, "tensors", true, "list every tensor with dtype and shape")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.model == "" {
		return usagef("--model is required")
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	return runInspect(ctx, o, stdout)
}

func runInspect(_ context.Context, o inspectOptions, w io.Writer) error {
	if err := resolveModel(&o.model); err != nil {
		return err
	}
	cfg, err := roformer.LoadConfig(filepath.Join(o.model, "config.json"))
	if err != nil {
		return err
	}
	f, err := checkpoint.ReadDir(o.model)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "model folder  %s\n", o.model)
	fmt.Fprintf(w, "weights       %s (%s, %d tensors)\n", f.Path, f.Format, len(f.Tensors))
	printInspectConfig(w, &cfg)
	shapes := map[string][]int{}
	total := 0
	for n, e := range f.Tensors {
		shapes[n] = e.Shape
		total += len(e.Data)
	}
	fmt.Fprintf(w, "stored        %d values\n\nheads:\n", total)
	// Compare config.json with the tensors before allocating a model of its
	// size: an encoder that does not fit is an error, a head that does not
	// is reported on its line.
	if err := cfg.CheckShapes(roformer.HeadBase, shapes); err != nil {
		return fmt.Errorf("roformer: %s does not fit %s: %w", filepath.Join(o.model, "config.json"), f.Path, err)
	}
	if err := printInspectHeads(w, &cfg, f.TensorMap(), shapes); err != nil {
		return err
	}
	if o.tensors {
		fmt.Fprintln(w, "\ntensors:")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for _, n := range f.Names {
			e := f.Tensors[n]
			fmt.Fprintf(tw, "  %s\t%s\t%v\n", n, e.DType, e.Shape)
		}
		tw.Flush()
	}
	return nil
}

// printInspectConfig prints the config's sizes, labels and other keys.
func printInspectConfig(w io.Writer, cfg *roformer.Config) {
	fmt.Fprintf(w, "config        vocab %d, embedding %d, hidden %d, layers %d, heads %d (head size %d), intermediate %d, act %s\n",
		cfg.VocabSize, cfg.EmbeddingSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.HeadSize(), cfg.IntermediateSize, cfg.HiddenAct)
	fmt.Fprintf(w, "              type vocab %d, max_position_embeddings %d (not a limit: RoPE is computed for any length), layer_norm_eps %g, rotary_value %v, is_decoder %v\n",
		cfg.TypeVocabSize, cfg.MaxPositionEmbeddings, cfg.LayerNormEps, cfg.RotaryValue, cfg.IsDecoder)
	if labels := cfg.Labels(); len(labels) <= maxInspectLabels {
		fmt.Fprintf(w, "labels        %d %v", cfg.NumLabels, labels)
	} else {
		fmt.Fprintf(w, "labels        %d %v …", cfg.NumLabels, labels[:maxInspectLabels])
	}
	if cfg.ProblemType != "" {
		fmt.Fprintf(w, ", problem_type %s", cfg.ProblemType)
	}
	fmt.Fprintln(w)
	if len(cfg.Extra) > 0 {
		keys := make([]string, 0, len(cfg.Extra))
		for k := range cfg.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(w, "other keys    %s\n", strings.Join(keys, ", "))
	}
}

// printInspectHeads prints, for every head, whether the checkpoint's
// tensors src (with their shapes) load it; cfg already fits the encoder.
func printInspectHeads(w io.Writer, cfg *roformer.Config, src map[string]*tensor.Tensor, shapes map[string][]int) error {
	for _, h := range roformer.Heads {
		if err := cfg.CheckShapes(h, shapes); err != nil {
			fmt.Fprintf(w, "  %-24s cannot load: %v\n", h, err)
			continue
		}
		m, err := roformer.New(*cfg, h)
		if err != nil {
			return err
		}
		rep, err := m.Bind(src, roformer.BindOptions{AllowMissingHead: true})
		switch {
		case err != nil:
			fmt.Fprintf(w, "  %-24s cannot load: %v\n", h, err)
		case len(rep.MissingHead) > 0:
			fmt.Fprintf(w, "  %-24s no head weights (missing %s); a fine-tune would initialise them\n", h, strings.Join(rep.MissingHead, ", "))
		default:
			fmt.Fprintf(w, "  %-24s ready, %d parameters (%s)\n", h, m.NumParams(), h.HFClass())
			if h == roformer.HeadBase {
				for _, n := range rep.Notes {
					fmt.Fprintf(w, "  %-24s note: %s\n", "", n)
				}
			}
		}
	}
	return nil
}
