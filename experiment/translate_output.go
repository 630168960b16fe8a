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

// tCrit95 is the two-sided 95% quantile of Student's t with n−1 degrees of
// freedom (n = 2 … 10), for the interval of a mean over seeds.
func tCrit95(n int) float64 {
	t := []float64{math.NaN(), math.NaN(), 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262}
	if n < len(t) {
		return t[n]
	}
	return 1.96
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
	// Dev BLEU against the step: mean over seeds, band from min to max.
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
				byStep[c.Step] = append(byStep[c.Step], float64(c.DevBLEU))
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
	p, err := linePlot("Dev BLEU (greedy) during training, English → Spanish Bible", "step", "BLEU", ss)
	if err != nil {
		return err
	}
	if err := savePlot(p, dir, "bleu"); err != nil {
		return err
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
	pm := func(xs []float64, dec int) string {
		if len(xs) == 1 {
			return fmt.Sprintf("%.*f (one seed)", dec, xs[0])
		}
		m, s := meanStd(xs)
		return fmtPM(m, s, dec)
	}
	md.WriteString("| position | seeds | dev NLL per token, last weights | dev BLEU (greedy), last weights | dev BLEU (greedy), averaged | test BLEU, averaged, beam | test chrF, averaged, beam |\n|---|---|---|---|---|---|---|\n")
	for _, pos := range o.Positions {
		var nll, last, avg, chrf, dev []float64
		for _, r := range res.Runs {
			if r.Position == pos {
				if n := len(r.Curve); n > 0 {
					last = append(last, float64(r.Curve[n-1].DevBLEU))
					nll = append(nll, float64(r.Curve[n-1].DevNLL))
				}
				avg, chrf, dev = append(avg, float64(r.Averaged.BLEU)), append(chrf, float64(r.Averaged.ChrF)), append(dev, float64(r.DevBLEUAvg))
			}
		}
		fmt.Fprintf(&md, "| %s | %d | %s | %s | %s | %s | %s |\n", pos, len(avg), pm(nll, 3), pm(last, 2), pm(dev, 2), pm(avg, 2), pm(chrf, 2))
	}
	md.WriteString("\nPer run (averaged checkpoints, 95% bootstrap intervals):\n\n| position | seed | BLEU | chrF | run time (s) |\n|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		fmt.Fprintf(&md, "| %s | %d | %.2f [%.2f, %.2f] | %.2f [%.2f, %.2f] | %.0f |\n", r.Position, r.Seed, r.Averaged.BLEU, r.Averaged.BLEUCI[0], r.Averaged.BLEUCI[1],
			r.Averaged.ChrF, r.Averaged.ChrFCI[0], r.Averaged.ChrFCI[1], r.Seconds)
	}
	if len(res.Paired) > 0 {
		md.WriteString("\nRoPE − sinusoidal, same seed, paired bootstrap over the test verses (p: sacreBLEU's paired bootstrap test of equal BLEU), and the difference of dev NLL per token at the last step:\n\n| seed | Δ test BLEU | p | Δ dev NLL |\n|---|---|---|---|\n")
		var ds, dn []float64
		for _, p := range res.Paired {
			fmt.Fprintf(&md, "| %d | %+.2f | %.3f | %+.3f |\n", p.Seed, p.Delta, p.PBootstrap, p.DeltaNLL)
			ds, dn = append(ds, float64(p.Delta)), append(dn, float64(p.DeltaNLL))
		}
		if len(ds) > 1 {
			for _, v := range []struct {
				name string
				xs   []float64
				dec  int
			}{{"test BLEU", ds, 2}, {"dev NLL", dn, 3}} {
				m, s := meanStd(v.xs)
				h := tCrit95(len(v.xs)) * s / math.Sqrt(float64(len(v.xs)))
				fmt.Fprintf(&md, "\nMean Δ %s over %d seeds: %+.*f ± %.*f (sd); 95%% t-interval [%+.*f, %+.*f].\n", v.name, len(v.xs), v.dec, m, v.dec, s, v.dec, m-h, v.dec, m+h)
			}
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
