package experiment

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/model/seq2seq"
)

// ResummarizeTranslate rewrites the tables, CSV files and plot of a
// translate results folder from its results.json, with the statistics over
// seeds recomputed from the runs' scores (aggregateTranslate: results
// written before the chrF comparison over seeds existed gain it).
func ResummarizeTranslate(dir string) (*TranslateResult, error) {
	var res TranslateResult
	if err := readResults(dir, &res); err != nil {
		return nil, err
	}
	aggregateTranslate(&res)
	return &res, writeTranslate(dir, &res)
}

func writeTranslate(dir string, res *TranslateResult) error {
	if err := writeJSON(dir, "results.json", res); err != nil {
		return err
	}
	var rows, runRows, decRows [][]string
	for _, r := range res.Runs {
		for _, c := range r.Curve {
			rows = append(rows, []string{r.Position, strconv.FormatUint(r.Seed, 10), strconv.Itoa(c.Step), ftoa(float64(c.TrainLoss)), ftoa(float64(c.DevNLL)), ftoa(float64(c.DevBLEU)), r.arm()})
		}
		last := math.NaN()
		if n := len(r.Curve); n > 0 {
			last = float64(r.Curve[n-1].DevBLEU)
		}
		runRows = append(runRows, []string{r.Position, strconv.FormatUint(r.Seed, 10), ftoa(last), ftoa(float64(r.DevBLEUAvg)), ftoa(float64(r.Averaged.BLEU)),
			ftoa(float64(r.Averaged.BLEUCI[0])), ftoa(float64(r.Averaged.BLEUCI[1])), ftoa(float64(r.Averaged.ChrF)),
			ftoa(float64(r.Averaged.ChrFCI[0])), ftoa(float64(r.Averaged.ChrFCI[1])), ftoa(r.Seconds), r.arm()})
		if r.Alpha != nil || r.Averaged.Output != nil {
			decRows = append(decRows, decodingRow(r))
		}
	}
	if err := writeCSV(dir, "curves.csv", []string{"position", "seed", "step", "train_loss", "dev_nll", "dev_bleu_greedy", "arm"}, rows); err != nil {
		return err
	}
	if err := writeCSV(dir, "runs.csv", []string{"position", "seed", "dev_bleu_last_greedy", "dev_bleu_averaged_greedy", "test_bleu_averaged", "bleu_ci_lo", "bleu_ci_hi",
		"test_chrf_averaged", "chrf_ci_lo", "chrf_ci_hi", "seconds", "arm"}, runRows); err != nil {
		return err
	}
	if len(decRows) > 0 {
		if err := writeCSV(dir, "decoding.csv", []string{"arm", "position", "seed", "alpha", "dev_bleu_by_alpha", "test_bleu", "test_chrf", "length_ratio", "repeat_4gram", "ref_repeat_4gram",
			"test_bleu_fixed_alpha", "test_chrf_fixed_alpha", "length_ratio_fixed_alpha", "repeat_4gram_fixed_alpha"}, decRows); err != nil {
			return err
		}
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
	for _, r := range res.Runs {
		if r.arm() == TranslatePreLN {
			params = r.Params
			break
		}
	}
	penalty := fmt.Sprintf("length penalty α %g", o.Decode.Alpha)
	if len(o.AlphaGrid) > 0 {
		penalty = fmt.Sprintf("length penalty α chosen per run on dev (below; α %g reported beside it)", o.Decode.Alpha)
	}
	fmt.Fprintf(&md, ". Shared BPE vocabulary of %d tokens. Model: %d + %d pre-LN layers, width %d, %d heads, FFN %d, dropout %g, label smoothing %g, %d parameters. "+
		"%d steps of about %d source + target tokens, AdamW peak rate %g (warm-up %d, cosine decay), weight decay %g, clipping %g. "+
		"Test: beam %d, %s, at most source length + %d tokens, from the average of the last %d checkpoints (%d steps apart); dev BLEU greedy. "+
		"BLEU and chrF as sacreBLEU's corpus_bleu and corpus_chrf defaults; 95%% intervals by bootstrap over the test verses (%d resamples). "+
		"The runs took %.0f s of wall time together (each run's own time, below; runs made in earlier invocations are reused), this summary's invocation %.0f s; CPU %s, %d thread(s) per run.\n\n",
		res.Vocab, o.Model.EncoderLayers, o.Model.DecoderLayers, o.Model.DModel, o.Model.Heads, o.Model.FFN, o.Model.Dropout, o.Model.LabelSmooth, params,
		o.Steps, o.BatchTokens, o.LR, o.Warmup, o.WeightDecay, o.Clip,
		o.Decode.Beam, penalty, o.Decode.MaxExtra, o.AverageLast, o.AverageEvery, o.Bootstrap, runSeconds(res), res.WallSeconds, res.CPU, max(o.Threads, 1))
	if slices.Contains(o.arms(), TranslatePostLN) {
		r, postParams := o.PostLN, 0
		for _, run := range res.Runs {
			if run.arm() == TranslatePostLN {
				postParams = run.Params
				break
			}
		}
		fmt.Fprintf(&md, "Arm %s (the paper's recipe; labelled %s/POSITION): the same model with post-LN layers (LayerNorm after each residual sum, none at the top of the stacks; %d parameters), "+
			"Adam β₂ %g, linear warm-up over %d steps (%g of the steps, the paper's 4,000 of 100,000) to %g, then inverse-square-root decay; weight decay and clipping as above. "+
			"Arm %s is the pre-LN one above, labelled by position alone.\n\n",
			TranslatePostLN, TranslatePostLN, postParams, r.Beta2, r.Warmup(o.Steps), r.WarmupFraction, r.LR, TranslatePreLN)
	}
	if len(o.AlphaGrid) > 0 {
		fmt.Fprintf(&md, "The length penalty is tuned per run: α %v on the dev subset, the best by dev BLEU decoding the test set (the test at α %g is reported beside it).\n\n", o.AlphaGrid, o.Decode.Alpha)
	}
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
	for _, l := range translateLabels(o) {
		b := res.TestBLEU[l]
		fmt.Fprintf(&md, "| %s | %d | %s | %s | %s |\n", l, b.N, sp(b, 2), sp(res.TestChrF[l], 2), sp(res.DevNLL[l], 3))
	}
	md.WriteString("\nPer run: test scores of the averaged checkpoints with 95% bootstrap intervals over the test verses; dev BLEU greedy on the dev subset, from the last weights and from the averaged checkpoints:\n\n| position | seed | test BLEU | test chrF | dev BLEU, last | dev BLEU, averaged | run time (s) |\n|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		last := math.NaN()
		if n := len(r.Curve); n > 0 {
			last = float64(r.Curve[n-1].DevBLEU)
		}
		fmt.Fprintf(&md, "| %s | %d | %.2f [%.2f, %.2f] | %.2f [%.2f, %.2f] | %.2f | %.2f | %.0f |\n", translateLabel(r.arm(), r.Position), r.Seed, r.Averaged.BLEU, r.Averaged.BLEUCI[0], r.Averaged.BLEUCI[1],
			r.Averaged.ChrF, r.Averaged.ChrFCI[0], r.Averaged.ChrFCI[1], last, r.DevBLEUAvg, r.Seconds)
	}
	if len(res.Paired) > 0 {
		md.WriteString("\nRoPE − sinusoidal, same seed, paired bootstrap over the test verses (p: sacreBLEU's paired bootstrap test of equal scores), and the difference of dev NLL per token at the last step:\n\n" +
			"| arm | seed | Δ test BLEU | p | Δ test chrF | p | Δ dev NLL |\n|---|---|---|---|---|---|---|\n")
		for _, p := range res.Paired {
			dc, pc := "–", "–"
			if p.ChrF != nil {
				dc, pc = fmt.Sprintf("%+.2f", p.ChrF.Delta), fmt.Sprintf("%.3f", p.ChrF.PBootstrap)
			}
			arm := p.Arm
			if arm == "" {
				arm = TranslatePreLN
			}
			fmt.Fprintf(&md, "| %s | %d | %+.2f | %.3f | %s | %s | %+.3f |\n", arm, p.Seed, p.Delta, p.PBootstrap, dc, pc, p.DeltaNLL)
		}
	}
	for _, a := range res.ArmSeeds {
		what := "RoPE − sinusoidal"
		if len(o.arms()) > 1 {
			what += " (" + a.Arm + ")"
		}
		pairedLine(&md, what, "test BLEU", "RoPE", a.BLEU, 2)
		pairedLine(&md, what, "test chrF", "RoPE", a.ChrF, 2)
		pairedLine(&md, what, "dev NLL", "RoPE", a.NLL, 3)
	}
	for _, d := range res.ArmDiffs {
		what := fmt.Sprintf("%s − %s (%s)", d.Arm, TranslatePreLN, d.Position)
		pairedLine(&md, what, "test BLEU", d.Arm, d.BLEU, 2)
		pairedLine(&md, what, "test chrF", d.Arm, d.ChrF, 2)
		pairedLine(&md, what, "dev NLL", d.Arm, d.NLL, 3)
	}
	decodingSummary(&md, res)
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
	for _, arm := range res.Options.arms() {
		for _, pos := range res.Options.Positions {
			ss = append(ss, seedBand(res, arm, pos, get))
		}
	}
	return ss
}

// seedBand is seedBands' series of one arm and position.
func seedBand(res *TranslateResult, arm, pos string, get func(TranslateCurve) float64) series {
	s := series{name: translateLabel(arm, pos) + fmt.Sprintf(" (mean of %d seeds, band min–max)", len(res.Options.Seeds)), dashed: pos == seq2seq.Sinusoidal, points: true}
	byStep := map[int][]float64{}
	var steps []int
	for _, r := range res.Runs {
		if r.Position != pos || r.arm() != arm {
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
	return s
}

// decodingRow is a run's line of decoding.csv: the α chosen on dev and the
// dev BLEU of each α tried ("α:BLEU" separated by spaces), then the test
// scores, length ratio and repetition at that α and at the fixed one.
func decodingRow(r TranslateRun) []string {
	nan := math.NaN()
	alpha, grid := nan, ""
	if a := r.Alpha; a != nil {
		alpha = a.Chosen
		var g []string
		for i, x := range a.Grid {
			g = append(g, ftoa(x)+":"+ftoa(float64(a.DevBLEU[i])))
		}
		grid = strings.Join(g, " ")
	}
	out := func(s *TranslateScore) []string {
		if s == nil || s.Output == nil {
			return []string{ftoa(nan), ftoa(nan)}
		}
		return []string{ftoa(float64(s.Output.LengthRatio)), ftoa(float64(s.Output.Repeat))}
	}
	row := []string{r.arm(), r.Position, strconv.FormatUint(r.Seed, 10), ftoa(alpha), grid, ftoa(float64(r.Averaged.BLEU)), ftoa(float64(r.Averaged.ChrF))}
	row = append(row, out(&r.Averaged)...)
	refRep := nan
	if r.Averaged.Output != nil {
		refRep = float64(r.Averaged.Output.RefRepeat)
	}
	row = append(row, ftoa(refRep))
	fb, fc := nan, nan
	if r.FixedAlpha != nil {
		fb, fc = float64(r.FixedAlpha.BLEU), float64(r.FixedAlpha.ChrF)
	}
	row = append(row, ftoa(fb), ftoa(fc))
	return append(row, out(r.FixedAlpha)...)
}

// translateLabels are the arm and position labels of the options, in
// order.
func translateLabels(o TranslateOptions) []string {
	var ls []string
	for _, arm := range o.arms() {
		for _, pos := range o.Positions {
			ls = append(ls, translateLabel(arm, pos))
		}
	}
	return ls
}

// pairedLine is one over-seeds comparison of the summary.
func pairedLine(md *strings.Builder, what, name, higher string, t *PairedTest, dec int) {
	if t == nil {
		return
	}
	d := t.Diff
	fmt.Fprintf(md, "\nOver %d seeds, %s %s: %+.*f ± %.*f (sd), 95%% t-interval [%+.*f, %+.*f]; %s higher on %d seeds, lower on %d; paired t-test p = %.3f, exact sign-flip p = %.3f.\n",
		d.N, what, name, dec, d.Mean, dec, d.SD, dec, d.CILo, dec, d.CIHi, higher, t.Positive, t.Negative, t.PT, t.PSignFlip)
}

// decodingSummary is the summary's table of the length penalty tuned on
// dev, lengths and repetition, for results that have them.
func decodingSummary(md *strings.Builder, res *TranslateResult) {
	have := false
	for _, r := range res.Runs {
		have = have || r.Alpha != nil || r.Averaged.Output != nil
	}
	if !have {
		return
	}
	o := res.Options
	fmt.Fprintf(md, "\nDecoding, per run: the length penalty α chosen on the dev subset (beam %d, averaged checkpoints; the highest dev BLEU over the grid %v, the first of equal ones), "+
		"the test BLEU and chrF at that α and at the fixed α %g, the length ratio (translation over reference tokens, as BLEU counts them; below 1 the brevity penalty applies) "+
		"and the share of translations that repeat a 4-gram of tokens (a loop; the references' own share beside it). Translations of every run: translations/LABEL-seedN.txt (tuned α) and -fixed-alpha.txt.\n\n",
		o.Decode.Beam, o.AlphaGrid, o.Decode.Alpha)
	md.WriteString("| arm/position | seed | α (dev BLEU there) | test BLEU | test chrF | length ratio | repeats a 4-gram (refs) | at α fixed: BLEU | chrF | length ratio | repeats |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	f := func(x Number, dec int) string {
		if math.IsNaN(float64(x)) {
			return "–"
		}
		return fmt.Sprintf("%.*f", dec, x)
	}
	for _, r := range res.Runs {
		alpha := "–"
		if a := r.Alpha; a != nil {
			for i, x := range a.Grid {
				if x == a.Chosen {
					alpha = fmt.Sprintf("%g (%.2f)", x, a.DevBLEU[i])
					break
				}
			}
		}
		ratio, rep := "–", "–"
		if out := r.Averaged.Output; out != nil {
			ratio, rep = f(out.LengthRatio, 3), fmt.Sprintf("%.1f%% (%.1f%%)", 100*out.Repeat, 100*out.RefRepeat)
		}
		fb, fc, fr, frep := "–", "–", "–", "–"
		if fx := r.FixedAlpha; fx != nil {
			fb, fc = f(fx.BLEU, 2), f(fx.ChrF, 2)
			if out := fx.Output; out != nil {
				fr, frep = f(out.LengthRatio, 3), fmt.Sprintf("%.1f%%", 100*out.Repeat)
			}
		}
		fmt.Fprintf(md, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", translateLabel(r.arm(), r.Position), r.Seed, alpha,
			f(r.Averaged.BLEU, 2), f(r.Averaged.ChrF, 2), ratio, rep, fb, fc, fr, frep)
	}
}
