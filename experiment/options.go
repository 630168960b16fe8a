package experiment

import "io"

// Common are the settings every experiment verb takes from the command
// line besides its own, in one place: where the results go, where fetched
// data and run folders are kept, the threads, the progress writer, and
// replacements of the experiment's seeds and number of steps. Each
// experiment's options take them with Apply, which sets those that
// experiment has.
type Common struct {
	Out      string    // results folder
	Cache    string    // folder for fetched npm tarballs (char-lm, long-text, extrapolate)
	Work     string    // mlm-pe's run folders (checkpoints, metrics); empty: a temporary folder, removed
	Threads  int       // worker goroutines, recorded in results.json
	Progress io.Writer // progress lines; nil: none
	// Seeds, when not nil, replace the experiment's seeds; Steps, when > 0,
	// its optimizer steps, with a warm-up of Steps/10 (training
	// experiments: mlm-pe, char-lm, long-text, extrapolate).
	Seeds []uint64
	Steps int
}

// replace applies Seeds and Steps to a training experiment's settings.
func (c Common) replace(seeds *[]uint64, steps, warmup *int) {
	if c.Seeds != nil {
		*seeds = c.Seeds
	}
	if c.Steps > 0 {
		*steps, *warmup = c.Steps, c.Steps/10
	}
}

// Apply sets the results folder (the experiment's only common setting).
func (o *RelativeOptions) Apply(c Common) { o.Out = c.Out }

// Apply sets the results folder (the experiment's only common setting).
func (o *DecayOptions) Apply(c Common) { o.Out = c.Out }

// Apply sets the results and run folders, threads and progress, and
// replaces the seeds and steps when c says so.
func (o *MLMPEOptions) Apply(c Common) {
	o.Out, o.Work, o.Threads, o.Progress = c.Out, c.Work, c.Threads, c.Progress
	c.replace(&o.Seeds, &o.Train.Steps, &o.Train.Warmup)
}

// Apply sets the results folder, cache, threads and progress, and replaces
// the seeds and steps when c says so.
func (o *CharLMOptions) Apply(c Common) {
	o.Out, o.Cache, o.Threads, o.Progress = c.Out, c.Cache, c.Threads, c.Progress
	c.replace(&o.Seeds, &o.Steps, &o.Warmup)
}

// Apply sets the results folder, cache, threads and progress, and replaces
// the seeds and steps when c says so.
func (o *LongTextOptions) Apply(c Common) {
	o.Out, o.Cache, o.Threads, o.Progress = c.Out, c.Cache, c.Threads, c.Progress
	c.replace(&o.Seeds, &o.Steps, &o.Warmup)
}

// Apply sets the results folder, cache, threads and progress, and replaces
// the seeds and the training steps when c says so (the fine-tune keeps its
// own).
func (o *ExtrapolateOptions) Apply(c Common) {
	o.Out, o.Cache, o.Threads, o.Progress = c.Out, c.Cache, c.Threads, c.Progress
	c.replace(&o.Seeds, &o.Steps, &o.Warmup)
}

// Apply sets the results, cache and run folders, threads and progress, and
// replaces the seeds and steps when c says so.
func (o *TranslateOptions) Apply(c Common) {
	o.Out, o.Cache, o.Threads, o.Progress = c.Out, c.Cache, c.Threads, c.Progress
	if c.Work != "" {
		o.Work = c.Work
	}
	c.replace(&o.Seeds, &o.Steps, &o.Warmup)
}
