package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/roformer-go/roformer/experiment"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/model/seq2seq"
)

func init() {
	register(&command{name: "experiment", summary: "re-run the paper's experiments: relative, decay, mlm-pe, char-lm, long-text, long-text-zh, extrapolate, finetune-compare, translate (results folder with JSON, CSV, plots)", run: cmdExperiment})
}

// experiments are the sub-commands of `roformer experiment`.
var experiments = []struct{ name, summary string }{
	{"relative", "§3.2 eq. 16, §3.3 eq. 19: rotated scores depend only on the offset; added absolute ones do not"},
	{"decay", "§3.4.3 Fig. 2: RoPE's relative upper bound against the relative distance"},
	{"mlm-pe", "Fig. 3 left: MLM pretraining with rotary, learned, sinusoidal, relative and no positions, several seeds"},
	{"char-lm", "§3.3 eq. 19, Fig. 3 right: character LM with linear attention and Performer, with and without RoPE"},
	{"long-text", "§4.5.4 Table 5: long-document classification at 512, 1024, 2048 tokens, RoPE vs a learned table"},
	{"long-text-zh", "§4.5 in Chinese: Tang or Song poet? pretrained RoFormer fine-tuned at 512 and 1024 with an equal-token control"},
	{"extrapolate", "issue #16: train at 128, evaluate at 128 … 4096 with no/linear/dynamic/yarn RoPE scaling, sinusoidal and learned, and after a short fine-tune"},
	{"finetune-compare", "§4.3: rotary vs learned (BERT) positions, each pretrained the same way (or mlm-pe's runs, --pretrained), fine-tuned on every built-in task, several seeds, paired tests per task; bag-of-words alongside"},
	{"translate", "§4.1: English→Spanish Bible translation with an encoder-decoder, RoPE vs sinusoidal, BLEU/chrF with bootstrap intervals, several seeds"},
}

// experimentOptions are the flags of one experiment verb.
type experimentOptions struct {
	name  string
	quick bool
	quiet bool
	resum string // rewrite this results folder from its results.json (and, for mlm-pe, new targets)
	// The settings every experiment takes (--out, --cache, --work,
	// --threads, --seeds, --steps; Progress follows --quiet), registered
	// once and handed to the experiment's options with Apply.
	experiment.Common

	relative    experiment.RelativeOptions
	decay       experiment.DecayOptions
	mlm         experiment.MLMPEOptions
	charLM      experiment.CharLMOptions
	longText    experiment.LongTextOptions
	longZh      experiment.LongTextZhOptions
	extrap      experiment.ExtrapolateOptions
	ftComp      experiment.FinetuneCompareOptions
	scratch     bool   // finetune-compare: add the rotary model fine-tuned without pretraining
	merge       string // finetune-compare: results folders to join into Out
	ftEpochs    int    // finetune-compare: epochs of every task (0: the experiment's)
	maxTrain    int    // finetune-compare: training examples per task (-1: the experiment's)
	pretrained  string // finetune-compare: an mlm-pe work folder whose runs are fine-tuned
	ftSeeds     string // finetune-compare: fine-tuning seeds per pretraining seed
	extrapScale bool   // extrapolate: scale_embedding in the absolute-position models
	also        string // long-text-zh, extrapolate --resummarize: results folders whose arms the plots also show
	transl      experiment.TranslateOptions
}

// experimentLists are the comma-separated flags, parsed after the others.
type experimentLists struct {
	seeds, encs, targets, variants, lengths, tasks, positions, arms string
	alphaGrid                                                       string
	pretrainSeeds                                                   string
	pretrainSteps                                                   int
}

func cmdExperiment(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			experimentUsage(stderr)
			return errHelp
		}
		experimentUsage(stderr)
		return usagef("name an experiment: relative, decay, mlm-pe, char-lm, long-text, long-text-zh, extrapolate, finetune-compare or translate")
	}
	name, args := args[0], args[1:]
	o := experimentOptions{name: name}
	fs := newFlags("experiment", name+" [flags]", stderr)
	th := threadsFlag(fs)
	lists, ok := o.flags(fs)
	if !ok {
		experimentUsage(stderr)
		return usagef("unknown experiment %q (valid: relative, decay, mlm-pe, char-lm, long-text, long-text-zh, extrapolate, finetune-compare, translate)", name)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	o.Threads = *th
	if o.Out == "" {
		o.Out = filepath.Join("runs", "experiments", name)
	}
	if err := o.finish(lists); err != nil {
		return err
	}
	if err := setupCompute(o.Threads, stderr, o.quiet); err != nil {
		return err
	}
	return runExperiment(ctx, o, stdout, stderr)
}

// flags registers the common flags on fs, then those of experiment o.name;
// false for an unknown name.
func (o *experimentOptions) flags(fs *flag.FlagSet) (*experimentLists, bool) {
	var l experimentLists
	name := o.name
	fs.StringVar(&o.Out, "out", "", "results folder (default runs/experiments/"+name+")")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress output")
	if name == "decay" || name == "relative" {
		fs.BoolVar(&o.quick, "quick", false, "accepted for uniformity: this experiment takes under a second anyway")
	} else {
		fs.BoolVar(&o.quick, "quick", false, "the quick form: a few minutes on 2 cores, same code path, smaller model and fewer steps")
		fs.StringVar(&l.seeds, "seeds", "", "comma-separated seeds (default: the experiment's)")
		fs.IntVar(&o.Steps, "steps", 0, "optimizer steps per run (default: the experiment's)")
		help := "train nothing: rewrite the tables, CSV files and plots of this results folder from its results.json"
		if name == "mlm-pe" {
			help += " (with the steps to --targets recomputed from the stored curves)"
		}
		fs.StringVar(&o.resum, "resummarize", "", help)
	}
	if fetched, ok := map[string]string{"char-lm": "text", "long-text": "corpus", "long-text-zh": "poetry", "extrapolate": "char-lm text"}[name]; ok {
		fs.StringVar(&o.Cache, "cache", filepath.Join(".cache", "experiments"), "folder for the fetched "+fetched+" (npm tarball)")
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
		fs.StringVar(&o.Work, "work", "", "keep the run folders (checkpoints, metrics.jsonl) here; default: a temporary folder, removed")
		fs.StringVar(&l.encs, "encodings", "", "comma-separated position encodings (default: rotary,sinusoidal,learned,relative,none)")
		fs.StringVar(&l.targets, "targets", "", "comma-separated held-out losses whose first crossing is reported (default: the experiment's)")
		fs.StringVar(&o.mlm.Corpus, "corpus", "", "text file or folder (default: the built-in English corpus)")
	case "char-lm":
		fs.StringVar(&l.variants, "variants", "", "comma-separated variants ATTENTION-POSITION[-scaled|-vaswani][-lrK] (-scaled: HF word table ×√E; -vaswani: N(0, 1/E) word table ×√E, as Vaswani et al.; -lrK: learned table at K times the rate), e.g. linear-rotary,performer-sinusoidal-vaswani,performer-learned-lr10 (default: the eight of the experiment)")
	case "long-text":
		fs.StringVar(&l.lengths, "lengths", "", "comma-separated maximum lengths (default 512,1024; the quick form 128,256)")
		fs.StringVar(&l.encs, "encodings", "", "comma-separated position encodings (default rotary,learned)")
	case "long-text-zh":
		fs.StringVar(&l.arms, "arms", "", "comma-separated fine-tuning arms ENCODING-LENGTH-WINDOWS, e.g. rotary-512-8,rotary-1024-4,learned-512-8 (default: rotary at 512 × 8, 1024 × 4, 512 × 4 windows a step)")
		fs.StringVar(&o.also, "also", "", "with --resummarize: comma-separated results folders whose arms the plot also shows (e.g. the learned-table run made on its own)")
		fs.IntVar(&l.pretrainSteps, "pretrain-steps", 0, "masked-LM pretraining steps (default: the experiment's, 300; the quick form 100); --steps sets the fine-tuning steps")
		fs.StringVar(&l.pretrainSeeds, "pretrain-seeds", "", "comma-separated pretraining seeds, each pretraining its own model per encoding with the --seeds fine-tuned from it (default 1)")
		fs.StringVar(&o.merge, "merge", "", "train nothing: join these comma-separated results folders (the same settings with other --pretrain-seeds or --seeds, made side by side) into --out")
	case "extrapolate":
		fs.StringVar(&l.lengths, "lengths", "", "comma-separated evaluation lengths, each at least the training length 128 (default 128,256,512,1024,2048,4096)")
		fs.StringVar(&l.tasks, "tasks", "", "comma-separated tasks: char-lm, mlm (default both)")
		fs.StringVar(&l.encs, "encodings", "", "comma-separated position encodings (default rotary,sinusoidal,learned)")
		fs.StringVar(&o.also, "also", "", "with --resummarize: comma-separated results folders whose curves the plots without a fine-tune also show (e.g. the --scale-embedding run)")
		fs.BoolVar(&o.extrapScale, "scale-embedding", false, "multiply the word embeddings by √E in the sinusoidal and learned models (scale_embedding)")
	case "finetune-compare":
		fs.StringVar(&o.Cache, "cache", defaultCacheDir(), "folder the built-in tasks are fetched into (as for roformer finetune)")
		fs.StringVar(&o.Work, "work", "", "keep the pretrained models here; default: a temporary folder, removed")
		fs.StringVar(&l.tasks, "tasks", "", "comma-separated built-in tasks (default sentiment,spam,paraphrase-matched,topics; the recorded 400-step run used paraphrase)")
		fs.StringVar(&l.encs, "encodings", "", "comma-separated position encodings, the first compared with the others (default rotary,learned)")
		fs.BoolVar(&o.scratch, "scratch", false, "also fine-tune the rotary model from its random initialisation (no pretraining), as a control")
		fs.IntVar(&o.ftEpochs, "finetune-epochs", 0, "fine-tuning epochs of every task (default: the experiment's per task)")
		fs.IntVar(&o.maxTrain, "max-train", -1, "training examples per task, a fixed sample (0: all; default: the experiment's)")
		fs.StringVar(&o.merge, "merge", "", "train nothing: join these comma-separated results folders (runs of the same settings on different --seeds, made side by side) into --out")
		fs.StringVar(&o.pretrained, "pretrained", "", "pretrain nothing: fine-tune the finished runs ENCODING-seedN of this mlm-pe work folder (its --work) for each --encodings and --seeds, with mlm-pe's vocabulary rebuilt and checked against each run's held-out loss, and dropout 0.1")
		fs.StringVar(&o.ftSeeds, "finetune-seeds", "", "comma-separated fine-tuning seeds run on every pretraining seed (default: one, the pretraining's own); they share that pretraining, so figures and paired tests average them within it")
	case "translate":
		fs.StringVar(&o.Cache, "cache", defaultCacheDir(), "folder the Bible modules (Debian sword-text-kjv, sword-text-sparv) are fetched into (as for roformer finetune)")
		fs.StringVar(&o.Work, "work", "", "run folders (translations, averaged model), reused when complete; default OUT/runs")
		fs.StringVar(&l.positions, "positions", "", "comma-separated position encodings: rotary, sinusoidal (default both)")
		fs.StringVar(&l.arms, "arms", "", "comma-separated training recipes: pre-ln (pre-LN layers, AdamW β₂ 0.999, cosine decay; the default), post-ln (the paper's: post-LN layers, Adam β₂ 0.98, peak 5e-4 after a linear warm-up over 4% of the steps, inverse-square-root decay)")
		fs.StringVar(&l.alphaGrid, "alpha-grid", "", "comma-separated length penalties α tried per run on the dev subset, the best by dev BLEU decoding the test set, e.g. 0,0.2,0.4,0.6,0.8,1,1.2,1.4 (default: none, α 0.6 fixed)")
	default:
		return nil, false
	}
	return &l, true
}

// finish parses the list flags and sets the training experiment's options:
// its --quick form or the recorded run, with the flags applied.
func (o *experimentOptions) finish(l *experimentLists) error {
	var err error
	if o.Seeds, err = parseUints("--seeds", l.seeds); err != nil {
		return err
	}
	if o.Steps < 0 {
		return usagef("--steps %d must be positive", o.Steps)
	}
	switch o.name {
	case "mlm-pe":
		corpus := o.mlm.Corpus
		o.mlm = pick(o.quick, experiment.QuickMLMPE, experiment.DefaultMLMPE)(o.Out)
		o.mlm.Corpus = corpus
		if o.mlm.Encodings, err = parseEncodings(l.encs, o.mlm.Encodings); err != nil {
			return err
		}
		if l.targets != "" {
			if o.mlm.TargetLosses, err = parseFloats("--targets", l.targets); err != nil {
				return err
			}
		}
	case "char-lm":
		o.charLM = pick(o.quick, experiment.QuickCharLM, experiment.DefaultCharLM)(o.Out)
		if l.variants != "" {
			if o.charLM.Variants, err = experiment.ParseCharLMVariants(l.variants); err != nil {
				return usagef("--variants: %v", err)
			}
		}
	case "long-text":
		o.longText = pick(o.quick, experiment.QuickLongText, experiment.DefaultLongText)(o.Out)
		if o.longText.Lengths, err = parseLengths(l.lengths, o.longText.Lengths); err != nil {
			return err
		}
		if o.longText.Encodings, err = parseEncodings(l.encs, o.longText.Encodings); err != nil {
			return err
		}
	case "long-text-zh":
		o.longZh = pick(o.quick, experiment.QuickLongTextZh, experiment.DefaultLongTextZh)(o.Out)
		if l.pretrainSteps < 0 {
			return usagef("--pretrain-steps %d must be positive", l.pretrainSteps)
		}
		if l.pretrainSteps > 0 {
			o.longZh.Pretrain.Steps, o.longZh.Pretrain.Warmup = l.pretrainSteps, l.pretrainSteps/10
		}
		if l.pretrainSeeds != "" {
			if o.longZh.PretrainSeeds, err = parseUints("--pretrain-seeds", l.pretrainSeeds); err != nil {
				return err
			}
		}
		if l.arms != "" {
			if o.longZh.Arms, err = experiment.ParseZhArms(l.arms); err != nil {
				return usagef("--arms: %v", err)
			}
		}
	case "finetune-compare":
		o.ftComp = pick(o.quick, experiment.QuickFinetuneCompare, experiment.DefaultFinetuneCompare)(o.Out)
		o.ftComp.Scratch = o.scratch
		if o.pretrained != "" {
			o.ftComp.UsePretrained(o.pretrained)
		}
		if o.ftComp.FinetuneSeeds, err = parseUints("--finetune-seeds", o.ftSeeds); err != nil {
			return err
		}
		if o.ftEpochs < 0 {
			return usagef("--finetune-epochs %d must be positive", o.ftEpochs)
		}
		if o.ftEpochs > 0 {
			for t := range o.ftComp.Epochs {
				o.ftComp.Epochs[t] = o.ftEpochs
			}
			o.ftComp.Finetune.Epochs = o.ftEpochs
		}
		if o.maxTrain >= 0 {
			o.ftComp.MaxTrain = o.maxTrain
		}
		if o.ftComp.Encodings, err = parseEncodings(l.encs, o.ftComp.Encodings); err != nil {
			return err
		}
		o.ftComp.Tasks = parseTasks(l.tasks, o.ftComp.Tasks)
	case "translate":
		o.transl = pick(o.quick, experiment.QuickTranslate, experiment.DefaultTranslate)(o.Out)
		if l.positions != "" {
			o.transl.Positions = nil
			for _, p := range strings.Split(l.positions, ",") {
				p = strings.TrimSpace(p)
				if p != seq2seq.Rotary && p != seq2seq.Sinusoidal {
					return usagef("--positions: position %q is not %s or %s", p, seq2seq.Rotary, seq2seq.Sinusoidal)
				}
				o.transl.Positions = append(o.transl.Positions, p)
			}
		}
		if l.arms != "" {
			for _, a := range strings.Split(l.arms, ",") {
				a = strings.TrimSpace(a)
				if !slices.Contains(experiment.TranslateArms, a) {
					return usagef("--arms: arm %q is not %s", a, strings.Join(experiment.TranslateArms, " or "))
				}
				o.transl.Arms = append(o.transl.Arms, a)
			}
		}
		if l.alphaGrid != "" {
			if o.transl.AlphaGrid, err = parseFloats("--alpha-grid", l.alphaGrid); err != nil {
				return err
			}
		}
	case "extrapolate":
		o.extrap = pick(o.quick, experiment.QuickExtrapolate, experiment.DefaultExtrapolate)(o.Out)
		o.extrap.ScaleEmbedding = o.extrapScale
		if o.extrap.Encodings, err = parseEncodings(l.encs, o.extrap.Encodings); err != nil {
			return err
		}
		if o.extrap.EvalLengths, err = parseLengths(l.lengths, o.extrap.EvalLengths); err != nil {
			return err
		}
		o.extrap.Tasks = parseTasks(l.tasks, o.extrap.Tasks)
	}
	return nil
}

// pick returns quick when the --quick form is asked for, else def.
func pick[T any](q bool, quick, def T) T {
	if q {
		return quick
	}
	return def
}

// parseTasks reads --tasks, a comma-separated list of names (def when
// empty).
func parseTasks(s string, def []string) []string {
	if s == "" {
		return def
	}
	var out []string
	for _, t := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(t))
	}
	return out
}

// parseLengths reads --lengths (def when empty).
func parseLengths(s string, def []int) ([]int, error) {
	if s == "" {
		return def, nil
	}
	ls, err := parseUints("--lengths", s)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, l := range ls {
		if l < 3 {
			return nil, usagef("--lengths: %d is too short for [CLS], a token and [SEP]", l)
		}
		out = append(out, int(l))
	}
	return out, nil
}

func experimentUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: roformer experiment NAME [--quick] [--out DIR] [flags]\n\nexperiments:")
	for _, e := range experiments {
		fmt.Fprintf(w, "  %-16s %s\n", e.name, e.summary)
	}
	fmt.Fprintln(w, "\nRun 'roformer experiment NAME -h' for its flags.")
}

// runExperiment runs one experiment with its options set; tests call it directly.
func runExperiment(ctx context.Context, o experimentOptions, stdout, stderr io.Writer) error {
	o.Progress = stderr
	if o.quiet {
		o.Progress = io.Discard
	}
	start := time.Now()
	if err := o.run(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %v", errInterrupted, err)
		}
		return err
	}
	fmt.Fprintf(stdout, "experiment %s done in %s: results in %s (summary.md, JSON, CSV, PNG and SVG plots)\n", o.name, time.Since(start).Round(time.Second), o.Out)
	return nil
}

// run hands the common settings to the experiment's options and runs it.
func (o *experimentOptions) run(ctx context.Context) error {
	if o.resum != "" {
		return o.resummarize()
	}
	if o.merge != "" && o.name == "long-text-zh" {
		_, err := experiment.MergeLongTextZh(o.Out, strings.Split(o.merge, ","))
		return err
	}
	if o.merge != "" {
		o.ftComp.Apply(o.Common)
		_, err := experiment.MergeFinetuneCompare(ctx, o.ftComp, strings.Split(o.merge, ","))
		return err
	}
	var err error
	switch o.name {
	case "relative":
		o.relative.Apply(o.Common)
		_, err = experiment.Relative(o.relative)
	case "decay":
		o.decay.Apply(o.Common)
		_, err = experiment.Decay(o.decay)
	case "mlm-pe":
		o.mlm.Apply(o.Common)
		_, err = experiment.MLMPE(ctx, o.mlm)
	case "char-lm":
		o.charLM.Apply(o.Common)
		_, err = experiment.CharLM(ctx, o.charLM)
	case "long-text":
		o.longText.Apply(o.Common)
		_, err = experiment.LongText(ctx, o.longText)
	case "long-text-zh":
		o.longZh.Apply(o.Common)
		_, err = experiment.LongTextZh(ctx, o.longZh)
	case "extrapolate":
		o.extrap.Apply(o.Common)
		_, err = experiment.Extrapolate(ctx, o.extrap)
	case "finetune-compare":
		o.ftComp.Apply(o.Common)
		_, err = experiment.FinetuneCompare(ctx, o.ftComp)
	case "translate":
		o.transl.Apply(o.Common)
		_, err = experiment.Translate(ctx, o.transl)
	}
	return err
}

// alsoDirs is the --also list; nil when empty.
func (o *experimentOptions) alsoDirs() []string {
	if o.also == "" {
		return nil
	}
	return strings.Split(o.also, ",")
}

// resummarize trains nothing: it rewrites the summaries of the results
// folder of --resummarize (a training experiment's), which becomes o.Out.
func (o *experimentOptions) resummarize() error {
	o.Out = o.resum
	var err error
	switch o.name {
	case "mlm-pe":
		_, err = experiment.ResummarizeMLMPE(o.resum, o.mlm.TargetLosses)
	case "char-lm":
		_, err = experiment.ResummarizeCharLM(o.resum)
	case "long-text":
		_, err = experiment.ResummarizeLongText(o.resum)
	case "long-text-zh":
		_, err = experiment.ResummarizeLongTextZh(o.resum, o.alsoDirs()...)
	case "extrapolate":
		_, err = experiment.ResummarizeExtrapolate(o.resum, o.alsoDirs()...)
	case "finetune-compare":
		_, err = experiment.ResummarizeFinetuneCompare(o.resum)
	case "translate":
		_, err = experiment.ResummarizeTranslate(o.resum)
	}
	return err
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
