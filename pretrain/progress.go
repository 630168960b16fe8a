package pretrain

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// barThrottle is the least time between two renders of the bar (tests set 0).
var barThrottle = 100 * time.Millisecond

// progress shows the run: a progress bar on a terminal (step, loss, lr,
// tokens/s, ETA), plain log lines otherwise.
type progress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func newProgress(w io.Writer, terminal bool, done, total int) *progress {
	if w == nil {
		w = io.Discard
	}
	p := &progress{w: w}
	if terminal && done < total {
		p.bar = progressbar.NewOptions(total-done,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(24),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("step"),
			progressbar.OptionShowIts(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(barThrottle),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

// stepDone advances the bar by one step and shows the latest numbers.
func (p *progress) stepDone(step, total int, loss, lr, tokPerSec float64) {
	if p.bar == nil {
		return
	}
	p.bar.Add(1)
	p.bar.Describe(fmt.Sprintf("step %d/%d loss %.4f lr %.2e %.0f tok/s", step, total, loss, lr, tokPerSec))
}

// printf writes a line above the bar, or plainly without one.
func (p *progress) printf(format string, a ...any) {
	if p.bar != nil {
		p.bar.Clear()
	}
	fmt.Fprintf(p.w, format+"\n", a...)
}

// logLine prints the fixed-format step line when there is no bar (the bar
// shows the same numbers).
func (p *progress) logLine(s string) {
	if p.bar == nil {
		fmt.Fprintln(p.w, s)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
}

// formatDuration prints d as 1h02m03s, 2m03s or 3s.
func formatDuration(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	switch {
	case s >= 3600:
		return fmt.Sprintf("%dh%02dm%02ds", s/3600, s/60%60, s%60)
	case s >= 60:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		return fmt.Sprintf("%ds", s)
	}
}
