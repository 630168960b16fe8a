package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/roformer-go/roformer/metrics"
)

func init() {
	register(&command{name: "bleu", summary: "score translations with BLEU and chrF as sacreBLEU 2.6.0 does (one segment a line; several references; bootstrap intervals)", run: cmdBleu})
}

type bleuOptions struct {
	hyp       string
	refs      []string
	baseline  string
	tokenize  string
	lowercase bool
	bootstrap int
	seed      uint64
}

// stringsFlag is a flag that may be given several times.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

var _ flag.Value = (*stringsFlag)(nil)

func cmdBleu(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bleu", "--hyp HYP --ref REF [--ref REF2 ...] [--bootstrap N] [--baseline BASE]", stderr)
	var o bleuOptions
	var refs stringsFlag
	fs.StringVar(&o.hyp, "hyp", "", "the translations, one segment a line (required)")
	fs.Var(&refs, "ref", "a reference file, one segment a line, as many lines as --hyp (required; repeat for several references)")
	fs.StringVar(&o.baseline, "baseline", "", "another system's translations of the same segments: a paired bootstrap test of --hyp against it")
	fs.StringVar(&o.tokenize, "tokenize", "13a", "BLEU tokenizer: 13a (mteval-v13a, sacreBLEU's default), intl (mteval-v14 international), none or char")
	fs.BoolVar(&o.lowercase, "lowercase", false, "case-insensitive BLEU and chrF")
	fs.IntVar(&o.bootstrap, "bootstrap", 0, "bootstrap resamples for 95% confidence intervals (sacreBLEU uses 1000; 0: none; with --baseline: default 1000)")
	fs.Uint64Var(&o.seed, "seed", metrics.DefaultBootstrapSeed, "seed of the bootstrap resampling")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o.refs = refs
	switch {
	case o.hyp == "":
		return usagef("--hyp is required")
	case len(o.refs) == 0:
		return usagef("--ref is required (repeat it for several references)")
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case o.bootstrap < 0:
		return usagef("--bootstrap %d must be 0 or positive", o.bootstrap)
	}
	switch o.tokenize {
	case "13a", "intl", "none", "char":
	default:
		return usagef("--tokenize %q (valid: 13a, intl, none, char)", o.tokenize)
	}
	if o.baseline != "" && o.bootstrap == 0 {
		o.bootstrap = 1000
	}
	return runBleu(ctx, o, stdout)
}

// bleuResult is the JSON line of roformer bleu.
type bleuResult struct {
	BLEU       float64   `json:"bleu"`
	CHRF       float64   `json:"chrf"`
	Precisions []float64 `json:"precisions"`
	Counts     []float64 `json:"counts"`
	Totals     []float64 `json:"totals"`
	BP         float64   `json:"bp"`
	Ratio      float64   `json:"ratio"`
	HypLen     int       `json:"hyp_len"`
	RefLen     int       `json:"ref_len"`
	Segments   int       `json:"segments"`
	References int       `json:"references"`
	// The signatures are sacreBLEU's, for the settings used.
	BLEUSignature string `json:"bleu_signature"`
	CHRFSignature string `json:"chrf_signature"`
	Matches       string `json:"matches"`

	BLEUCI *ciJSON     `json:"bleu_ci,omitempty"`
	CHRFCI *ciJSON     `json:"chrf_ci,omitempty"`
	Paired *pairedJSON `json:"paired,omitempty"`
}

type ciJSON struct {
	Mean    float64 `json:"mean"`
	CI      float64 `json:"ci"` // half-width of the 95% interval
	Lower   float64 `json:"lower"`
	Upper   float64 `json:"upper"`
	Samples int     `json:"samples"`
	Seed    uint64  `json:"seed"`
}

type pairedJSON struct {
	Baseline     string  `json:"baseline"`
	BaselineBLEU float64 `json:"baseline_bleu"`
	BaselineCHRF float64 `json:"baseline_chrf"`
	PBLEU        float64 `json:"p_bleu"`
	PCHRF        float64 `json:"p_chrf"`
	Samples      int     `json:"samples"`
	Seed         uint64  `json:"seed"`
}

func ci(iv metrics.Interval, seed uint64) *ciJSON {
	return &ciJSON{Mean: iv.Mean, CI: iv.CI, Lower: iv.Lower, Upper: iv.Upper, Samples: iv.Samples, Seed: seed}
}

// readSegments reads one segment a line ("\n" or "\r\n" ends a line; a last
// line without one counts).
func readSegments(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%s is empty: it has no segment", path)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
		if !utf8.ValidString(lines[i]) {
			return nil, fmt.Errorf("%s: line %d is not valid UTF-8", path, i+1)
		}
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, fmt.Errorf("%s holds NUL bytes: not a text file", path)
	}
	return lines, nil
}

func runBleu(ctx context.Context, o bleuOptions, w io.Writer) error {
	hyps, err := readSegments(o.hyp)
	if err != nil {
		return err
	}
	var refs [][]string
	for _, p := range o.refs {
		r, err := readSegments(p)
		if err != nil {
			return err
		}
		if len(r) != len(hyps) {
			return fmt.Errorf("%s has %d segments, %s %d: each reference file needs one line per hypothesis", p, len(r), o.hyp, len(hyps))
		}
		refs = append(refs, r)
	}
	var base []string
	if o.baseline != "" {
		if base, err = readSegments(o.baseline); err != nil {
			return err
		}
		if len(base) != len(hyps) {
			return fmt.Errorf("%s has %d segments, %s %d: the baseline must translate the same segments", o.baseline, len(base), o.hyp, len(hyps))
		}
	}
	bm := metrics.BLEU{Tokenize: o.tokenize, Lowercase: o.lowercase}
	cm := metrics.CHRF{Lowercase: o.lowercase}
	b, err := bm.Corpus(hyps, refs)
	if err != nil {
		return err
	}
	c, err := cm.Corpus(hyps, refs)
	if err != nil {
		return err
	}
	kase := "mixed"
	if o.lowercase {
		kase = "lc"
	}
	res := bleuResult{BLEU: b.Score, CHRF: c.Score, Precisions: b.Precisions, Counts: b.Counts, Totals: b.Totals,
		BP: b.BP, Ratio: b.Ratio, HypLen: b.SysLen, RefLen: b.RefLen, Segments: len(hyps), References: len(refs),
		BLEUSignature: fmt.Sprintf("nrefs:%d|case:%s|eff:no|tok:%s|smooth:exp", len(refs), kase, o.tokenize),
		CHRFSignature: fmt.Sprintf("nrefs:%d|case:%s|eff:yes|nc:6|nw:0|space:no", len(refs), kase),
		Matches:       "sacreBLEU 2.6.0"}
	fmt.Fprintf(w, "BLEU = %s\n", b)
	fmt.Fprintf(w, "%s = %.2f\n", c.Name(), c.Score)
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.bootstrap > 0 {
		if base != nil {
			pb, err := metrics.PairedBootstrap(bm, base, hyps, refs, o.bootstrap, o.seed)
			if err != nil {
				return err
			}
			pc, err := metrics.PairedBootstrap(cm, base, hyps, refs, o.bootstrap, o.seed)
			if err != nil {
				return err
			}
			res.BLEUCI, res.CHRFCI = ci(pb.System, o.seed), ci(pc.System, o.seed)
			res.Paired = &pairedJSON{Baseline: o.baseline, BaselineBLEU: pb.Baseline, BaselineCHRF: pc.Baseline,
				PBLEU: pb.P, PCHRF: pc.P, Samples: o.bootstrap, Seed: o.seed}
			for _, r := range []struct {
				name string
				p    metrics.Paired
			}{{"BLEU", pb}, {c.Name(), pc}} {
				fmt.Fprintf(w, "%s: system %.2f (μ = %.2f ± %.2f), baseline %.2f, difference %+.2f, p = %.4f (paired bootstrap, %d resamples, seed %d)\n",
					r.name, r.p.System.Score, r.p.System.Mean, r.p.System.CI, r.p.Baseline, r.p.System.Score-r.p.Baseline, r.p.P, o.bootstrap, o.seed)
			}
		} else {
			bi, err := metrics.Bootstrap(bm, hyps, refs, o.bootstrap, o.seed)
			if err != nil {
				return err
			}
			chi, err := metrics.Bootstrap(cm, hyps, refs, o.bootstrap, o.seed)
			if err != nil {
				return err
			}
			res.BLEUCI, res.CHRFCI = ci(bi, o.seed), ci(chi, o.seed)
			fmt.Fprintf(w, "95%% intervals (bootstrap, %d resamples, seed %d): BLEU μ = %.2f ± %.2f, %s μ = %.2f ± %.2f\n",
				o.bootstrap, o.seed, bi.Mean, bi.CI, c.Name(), chi.Mean, chi.CI)
		}
	}
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}
