package experiment

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/model/seq2seq"
)

// ResummarizeTranslate rewrites the tables, CSV files and plot of a
// translate results folder from its results.json.
func ResummarizeTranslate(dir string) (*TranslateResult, error) {
	var res TranslateResult
	if err := readResults(dir, &res); err != nil {
		return nil, err
	}
	return &res, writeTranslate(dir, &res)
}

func writeTranslate(dir string, res *TranslateResult) error {
	if err := writeJSON(dir, "results.json", res); err != nil {
		return err
	}
	var rows, runRows [][]string
	for _, r := range res.Runs {
		for _, c := range r.Curve {
			rows = append(rows, []string{r.Position, strconv.FormatUint(r.Seed, 10), strconv.Itoa(c.Step), ftoa(float64(c.TrainLoss)), ftoa(float64(c.DevNLL)), ftoa(float64(c.DevBLEU))})
		}
		last := math.NaN()
		if n := len(r.Curve); n > 0 {
			last = float64(r.Curve[n-1].DevBLEU)
		}
		runRows = append(runRows, []string{r.Position, strconv.FormatUint(r.Seed, 10), ftoa(last), ftoa(float64(r.DevBLEUAvg)), ftoa(float64(r.Averaged.BLEU)),
			ftoa(float64(r.Averaged.BLEUCI[0])), ftoa(float64(r.Averaged.BLEUCI[1])), ftoa(float64(r.Averaged.ChrF)),
			ftoa(float64(r.Averaged.ChrFCI[0])), ftoa(float64(r.Averaged.ChrFCI[1])), ftoa(r.Seconds)})
	}
	if err := writeCSV(dir, "curves.csv", []string{"position", "seed", "step", "train_loss", "dev_nll", "dev_bleu_greedy"}, rows); err != nil {
		return err
	}
	if err := writeCSV(dir, "runs.csv", []string{"position", "seed", "dev_bleu_last_greedy", "dev_bleu_averaged_greedy", "test_bleu_averaged", "bleu_ci_lo", "bleu_ci_hi",
		"test_chrf_averaged", "chrf_ci_lo", "chrf_ci_hi", "seconds"}, runRows); err != nil {
		return err
	}
	// Dev BLEU and NLL against the step: mean over seeds, band from min to max.
	for _, pl := range []struct {
		base, title, y string
		get            func(TranslateCurve) float64
	}{
		{"bleu", "Dev BLEU (greedy) during training, English → Spanish Bible", "BLEU", func(c TranslateCurve) float64 { return float64(c.DevBLEU) }},
		{"nll", "Dev NLL per target token (teacher-forced) during training, English → Spanish Bible", "nats per token", func(c TranslateCurve) float64 { return float64(c.DevNLL) }},
	} {
		p, err := linePlot(pl.title, "step", pl.y, seedBands(res, pl.get))
		if err != nil {
			return err
		}
		if err := savePlot(p, dir, pl.base); err != nil {
			return err
		}
	}
	return writeFile(dir, "summary.md", []byte(translateSummary(res)))
}

func translateSummary(res *TranslateResult) string {
	o := res.Options
	var md strings.Builder
	fmt.Fprintf(&md, "**Not WMT14.** The paper trains Transformer-base (65M parameters) on WMT14 English→German (4.5M sentence pairs) for 100k steps and reports newstest2014 BLEU. "+
		"This is a small model on a small corpus: %s; %d training pairs (both sides ≤ %d subword tokens), %d dev pairs, %d test pairs",
		res.Source, res.Split[0], o.MaxTokens, res.Split[1], res.Split[2])
	if o.TestSubset > 0 {
		fmt.Fprintf(&md, " (the first %d test verses only: the quick form)", o.TestSubset)
	}
	params := 0
	if len(res.Runs) > 0 {
		params = res.Runs[0].Params
	}
	fmt.Fprintf(&md, ". Shared BPE vocabulary of %d tokens. Model: %d + %d pre-LN layers, width %d, %d heads, FFN %d, dropout %g, label smoothing %g, %d parameters. "+
		"%d steps of about %d source + target tokens, AdamW peak rate %g (warm-up %d, cosine decay), weight decay %g, clipping %g. "+
		"Test: beam %d, length penalty α %g, at most source length + %d tokens, from the average of the last %d checkpoints (%d steps apart); dev BLEU greedy. "+
		"BLEU and chrF as sacreBLEU's corpus_bleu and corpus_chrf defaults; 95%% intervals by bootstrap over the test verses (%d resamples). "+
		"The runs took %.0f s of wall time together (each run's own time, below; runs made in earlier invocations are reused), this summary's invocation %.0f s; CPU %s, %d thread(s) per run.\n\n",
		res.Vocab, o.Model.EncoderLayers, o.Model.DecoderLayers, o.Model.DModel, o.Model.Heads, o.Model.FFN, o.Model.Dropout, o.Model.LabelSmooth, params,
		o.Steps, o.BatchTokens, o.LR, o.Warmup, o.WeightDecay, o.Clip,
		o.Decode.Beam, o.Decode.Alpha, o.Decode.MaxExtra, o.AverageLast, o.AverageEvery, o.Bootstrap, runSeconds(res), res.WallSeconds, res.CPU, max(o.Threads, 1))
	sp := func(x Spread, dec int) string {
		switch x.N {
		case 0:
			return "–"
		case 1:
			return fmt.Sprintf("%.*f (one seed)", dec, x.Mean)
		}
		return fmt.Sprintf("%.*f ± %.*f [%.*f, %.*f]", dec, x.Mean, dec, x.SD, dec, x.CILo, dec, x.CIHi)
	}
	md.WriteString("Mean ± sd over seeds [95% t-interval of the mean]; test on the averaged checkpoints with beam search, dev NLL per target token of the last weights (teacher-forced, all dev verses).\n\n")
	md.WriteString("| position | seeds | test BLEU | test chrF | dev NLL |\n|---|---|---|---|---|\n")
	for _, pos := range o.Positions {
		b := res.TestBLEU[pos]
		fmt.Fprintf(&md, "| %s | %d | %s | %s | %s |\n", pos, b.N, sp(b, 2), sp(res.TestChrF[pos], 2), sp(res.DevNLL[pos], 3))
	}
	md.WriteString("\nPer run: test scores of the averaged checkpoints with 95% bootstrap intervals over the test verses; dev BLEU greedy on the dev subset, from the last weights and from the averaged checkpoints:\n\n| position | seed | test BLEU | test chrF | dev BLEU, last | dev BLEU, averaged | run time (s) |\n|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		last := math.NaN()
		if n := len(r.Curve); n > 0 {
			last = float64(r.Curve[n-1].DevBLEU)
		}
		fmt.Fprintf(&md, "| %s | %d | %.2f [%.2f, %.2f] | %.2f [%.2f, %.2f] | %.2f | %.2f | %.0f |\n", r.Position, r.Seed, r.Averaged.BLEU, r.Averaged.BLEUCI[0], r.Averaged.BLEUCI[1],
			r.Averaged.ChrF, r.Averaged.ChrFCI[0], r.Averaged.ChrFCI[1], last, r.DevBLEUAvg, r.Seconds)
	}
	if len(res.Paired) > 0 {
		md.WriteString("\nRoPE − sinusoidal, same seed, paired bootstrap over the test verses (p: sacreBLEU's paired bootstrap test of equal BLEU), and the difference of dev NLL per token at the last step:\n\n| seed | Δ test BLEU | p | Δ dev NLL |\n|---|---|---|---|\n")
		for _, p := range res.Paired {
			fmt.Fprintf(&md, "| %d | %+.2f | %.3f | %+.3f |\n", p.Seed, p.Delta, p.PBootstrap, p.DeltaNLL)
		}
		for _, v := range []struct {
			name string
			t    *PairedTest
			dec  int
		}{{"test BLEU", res.SeedsBLEU, 2}, {"dev NLL", res.SeedsNLL, 3}} {
			if v.t == nil {
				continue
			}
			d := v.t.Diff
			fmt.Fprintf(&md, "\nOver %d seeds, RoPE − sinusoidal %s: %+.*f ± %.*f (sd), 95%% t-interval [%+.*f, %+.*f]; RoPE higher on %d seeds, lower on %d; paired t-test p = %.3f, exact sign-flip p = %.3f.\n",
				d.N, v.name, v.dec, d.Mean, v.dec, d.SD, v.dec, d.CILo, v.dec, d.CIHi, v.t.Positive, v.t.Negative, v.t.PT, v.t.PSignFlip)
		}
	}
	return md.String()
}

// runSeconds is the sum of the runs' own wall times.
func runSeconds(res *TranslateResult) float64 {
	t := 0.0
	for _, r := range res.Runs {
		t += r.Seconds
	}
	return t
}

// seedBands is one series per position of get(curve point) against the
// step: the mean over seeds with a band from the minimum to the maximum.
func seedBands(res *TranslateResult, get func(TranslateCurve) float64) []series {
	var ss []series
	for _, pos := range res.Options.Positions {
		s := series{name: pos + fmt.Sprintf(" (mean of %d seeds, band min–max)", len(res.Options.Seeds)), dashed: pos == seq2seq.Sinusoidal, points: true}
		byStep := map[int][]float64{}
		var steps []int
		for _, r := range res.Runs {
			if r.Position != pos {
				continue
			}
			for _, c := range r.Curve {
				if byStep[c.Step] == nil {
					steps = append(steps, c.Step)
				}
				byStep[c.Step] = append(byStep[c.Step], get(c))
			}
		}
		for _, st := range steps {
			v := byStep[st]
			m, _ := meanStd(v)
			if math.IsNaN(m) {
				continue
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, x := range v {
				if !math.IsNaN(x) {
					lo, hi = math.Min(lo, x), math.Max(hi, x)
				}
			}
			s.x, s.y, s.lo, s.hi = append(s.x, float64(st)), append(s.y, m), append(s.lo, lo), append(s.hi, hi)
		}
		ss = append(ss, s)
	}
	return ss
}
