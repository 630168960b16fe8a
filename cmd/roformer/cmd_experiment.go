package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/roformer-go/roformer/experiment"
	"github.com/roformer-go/roformer/model/roformer"
)

func init() {
	register(&command{name: "experiment", summary: "re-run the paper's experiments: relative, decay, mlm-pe, char-lm, long-text (results folder with JSON, CSV, plots)", run: cmdExperiment})
}

// experiments are the sub-commands of `roformer experiment`.
var experiments = []struct{ name, summary string }{
	{"relative", "§3.2 eq. 16, §3.3 eq. 19: rotated scores depend only on the offset; added absolute ones do not"},
	{"decay", "§3.4.3 Fig. 2: RoPE's relative upper bound against the relative distance"},
	{"mlm-pe", "Fig. 3 left: MLM pretraining with rotary, learned, sinusoidal, relative and no positions, several seeds"},
	{"char-lm", "§3.3 eq. 19, Fig. 3 right: character LM with linear attention and Performer, with and without RoPE"},
	{"long-text", "§4.5.4 Table 5: long-document classification at 512, 1024, 2048 tokens, RoPE vs a learned table"},
}

// experimentOptions are the flags shared by the experiments.
type experimentOptions struct {
	name    string
	out     string
	quick   bool
	work    string
	cache   string
	seeds   []uint64
	steps   int
	threads int
	quiet   bool
	resum   string // rewrite this results folder from its results.json (and, for mlm-pe, new targets)

	relative experiment.RelativeOptions
	decay    experiment.DecayOptions
	mlm      experiment.MLMPEOptions
	charLM   experiment.CharLMOptions
	longText experiment.LongTextOptions
}

func cmdExperiment(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			experimentUsage(stderr)
			return errHelp
		}
		experimentUsage(stderr)
		return usagef("name an experiment: relative, decay, mlm-pe, char-lm or long-text")
	}
	name, args := args[0], args[1:]
	o := experimentOptions{name: name}
	fs := newFlags("experiment", name+" [flags]", stderr)
	fs.StringVar(&o.out, "out", "", "results folder (default runs/experiments/"+name+")")
	th := threadsFlag(fs)
	fs.BoolVar(&o.quiet, "quiet", false, "no progress output")
	var seeds, encs, targets, variants, lengths string
	training := name != "decay" && name != "relative"
	if !training {
		fs.BoolVar(&o.quick, "quick", false, "accepted for uniformity: this experiment takes under a second anyway")
	}
	if training {
		fs.BoolVar(&o.quick, "quick", false, "the quick form: a few minutes on 2 cores, same code path, smaller model and fewer steps")
		fs.StringVar(&seeds, "seeds", "", "comma-separated seeds (default: the experiment's)")
		fs.IntVar(&o.steps, "steps", 0, "optimizer steps per run (default: the experiment's)")
		help := "train nothing: rewrite the tables, CSV files and plots of this results folder from its results.json"
		if name == "mlm-pe" {
			help += " (with the steps to --targets recomputed from the stored curves)"
		}
		fs.StringVar(&o.resum, "resummarize", "", help)
	}
	switch name {
	case "relative":
		o.relative = experiment.DefaultRelative("")
		fs.IntVar(&o.relative.Dim, "dim", o.relative.Dim, "head size d (even)")
		fs.IntVar(&o.relative.Positions, "positions", o.relative.Positions, "positions m, n range over 0 … N−1")
		fs.IntVar(&o.relative.MaxOffset, "max-offset", o.relative.MaxOffset, "largest |n − m| compared")
	case "decay":
		o.decay = experiment.DefaultDecay("")
		fs.IntVar(&o.decay.Dim, "dim", o.decay.Dim, "rotated dimensions d (even)")
		fs.Float64Var(&o.decay.Base, "base", o.decay.Base, "frequency base of θ_i = base^(−2i/d)")
		fs.IntVar(&o.decay.MaxDistance, "max-distance", o.decay.MaxDistance, "largest relative distance r")
	case "mlm-pe":
		fs.StringVar(&o.work, "work", "", "keep the run folders (checkpoints, metrics.jsonl) here; default: a temporary folder, removed")
		fs.StringVar(&encs, "encodings", "", "comma-separated position encodings (default: rotary,sinusoidal,learned,relative,none)")
		fs.StringVar(&targets, "targets", "", "comma-separated held-out losses whose first crossing is reported (default: the experiment's)")
		fs.StringVar(&o.mlm.Corpus, "corpus", "", "text file or folder (default: the built-in English corpus)")
	case "char-lm":
		fs.StringVar(&variants, "variants", "", "comma-separated variants ATTENTION-POSITION, e.g. linear-rotary,performer-learned (default: the five of the experiment)")
		fs.StringVar(&o.cache, "cache", filepath.Join(".cache", "experiments"), "folder for the fetched text (npm tarball)")
	case "long-text":
		fs.StringVar(&lengths, "lengths", "", "comma-separated maximum lengths (default 512,1024; the quick form 128,256)")
		fs.StringVar(&encs, "encodings", "", "comma-separated position encodings (default rotary,learned)")
		fs.StringVar(&o.cache, "cache", filepath.Join(".cache", "experiments"), "folder for the fetched corpus (npm tarball)")
	default:
		experimentUsage(stderr)
		return usagef("unknown experiment %q (valid: relative, decay, mlm-pe, char-lm, long-text)", name)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	o.threads = *th
	if o.out == "" {
		o.out = filepath.Join("runs", "experiments", name)
	}
	var err error
	if o.seeds, err = parseUints("--seeds", seeds); err != nil {
		return err
	}
	if o.steps < 0 {
		return usagef("--steps %d must be positive", o.steps)
	}
	switch name {
	case "mlm-pe":
		corpus := o.mlm.Corpus
		if o.quick {
			o.mlm = experiment.QuickMLMPE(o.out)
		} else {
			o.mlm = experiment.DefaultMLMPE(o.out)
		}
		o.mlm.Corpus = corpus
		if o.mlm.Encodings, err = parseEncodings(encs, o.mlm.Encodings); err != nil {
			return err
		}
		if targets != "" {
			if o.mlm.TargetLosses, err = parseFloats("--targets", targets); err != nil {
				return err
			}
		}
	case "char-lm":
		if o.quick {
			o.charLM = experiment.QuickCharLM(o.out)
		} else {
			o.charLM = experiment.DefaultCharLM(o.out)
		}
		if variants != "" {
			if o.charLM.Variants, err = experiment.ParseCharLMVariants(variants); err != nil {
				return usagef("--variants: %v", err)
			}
		}
	case "long-text":
		if o.quick {
			o.longText = experiment.QuickLongText(o.out)
		} else {
			o.longText = experiment.DefaultLongText(o.out)
		}
		if lengths != "" {
			ls, err := parseUints("--lengths", lengths)
			if err != nil {
				return err
			}
			o.longText.Lengths = nil
			for _, l := range ls {
				if l < 3 {
					return usagef("--lengths: %d is too short for [CLS], a token and [SEP]", l)
				}
				o.longText.Lengths = append(o.longText.Lengths, int(l))
			}
		}
		if o.longText.Encodings, err = parseEncodings(encs, o.longText.Encodings); err != nil {
			return err
		}
	}
	if err := setupCompute(o.threads, stderr, o.quiet); err != nil {
		return err
	}
	return runExperiment(ctx, o, stdout, stderr)
}

func experimentUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: roformer experiment NAME [--quick] [--out DIR] [flags]\n\nexperiments:")
	for _, e := range experiments {
		fmt.Fprintf(w, "  %-10s %s\n", e.name, e.summary)
	}
	fmt.Fprintln(w, "\nRun 'roformer experiment NAME -h' for its flags.")
}

// runExperiment runs one experiment with its options set; tests call it directly.
func runExperiment(ctx context.Context, o experimentOptions, stdout, stderr io.Writer) error {
	progress := stderr
	if o.quiet {
		progress = io.Discard
	}
	start := time.Now()
	var err error
	switch o.name {
	case "relative":
		o.relative.Out = o.out
		_, err = experiment.Relative(o.relative)
	case "decay":
		o.decay.Out = o.out
		_, err = experiment.Decay(o.decay)
	case "mlm-pe":
		if o.resum != "" {
			_, err = experiment.ResummarizeMLMPE(o.resum, o.mlm.TargetLosses)
			o.out = o.resum
			break
		}
		m := &o.mlm
		m.Out, m.Work, m.Threads, m.Progress = o.out, o.work, o.threads, progress
		if o.seeds != nil {
			m.Seeds = o.seeds
		}
		if o.steps > 0 {
			m.Train.Steps = o.steps
			m.Train.Warmup = o.steps / 10
		}
		_, err = experiment.MLMPE(ctx, *m)
	case "char-lm":
		if o.resum != "" {
			_, err = experiment.ResummarizeCharLM(o.resum)
			o.out = o.resum
			break
		}
		c := &o.charLM
		c.Out, c.Cache, c.Threads, c.Progress = o.out, o.cache, o.threads, progress
		if o.seeds != nil {
			c.Seeds = o.seeds
		}
		if o.steps > 0 {
			c.Steps = o.steps
			c.Warmup = o.steps / 10
		}
		_, err = experiment.CharLM(ctx, *c)
	case "long-text":
		if o.resum != "" {
			_, err = experiment.ResummarizeLongText(o.resum)
			o.out = o.resum
			break
		}
		l := &o.longText
		l.Out, l.Cache, l.Threads, l.Progress = o.out, o.cache, o.threads, progress
		if o.seeds != nil {
			l.Seeds = o.seeds
		}
		if o.steps > 0 {
			l.Steps = o.steps
			l.Warmup = o.steps / 10
		}
		_, err = experiment.LongText(ctx, *l)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %v", errInterrupted, err)
		}
		return err
	}
	fmt.Fprintf(stdout, "experiment %s done in %s: results in %s (summary.md, JSON, CSV, PNG and SVG plots)\n", o.name, time.Since(start).Round(time.Second), o.out)
	return nil
}

func parseUints(flagName, s string) ([]uint64, error) {
	if s == "" {
		return nil, nil
	}
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, usagef("%s: %q is not a non-negative integer", flagName, f)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFloats(flagName, s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, usagef("%s: %q is not a number", flagName, f)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseEncodings(s string, def []roformer.PositionEncoding) ([]roformer.PositionEncoding, error) {
	if s == "" {
		return def, nil
	}
	var out []roformer.PositionEncoding
	for _, f := range strings.Split(s, ",") {
		pe, err := roformer.ParsePositionEncoding(strings.TrimSpace(f))
		if err != nil {
			return nil, usagef("--encodings: %v", err)
		}
		out = append(out, pe)
	}
	return out, nil
}
