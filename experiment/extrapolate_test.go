package experiment

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/model/roformer"
)

// miniExtrapolate is the experiment in miniature: a tiny model trained at
// 16 tokens for a few steps, evaluated at 16, 32 and 64.
func miniExtrapolate(t *testing.T, dir string) ExtrapolateOptions {
	text := opticks(t, 60000)
	var docs []data.Document
	for i, p := range strings.Split(string(text), "\n\n") {
		if strings.TrimSpace(p) != "" {
			docs = append(docs, data.Document{Name: "p" + string(rune('a'+i%26)), Text: p})
		}
	}
	o := QuickExtrapolate(dir)
	o.Model = tinyModel()
	o.Model.HiddenDropoutProb, o.Model.AttentionProbsDropoutProb = 0, 0
	o.TrainLen, o.EvalLengths, o.EvalTokens = 16, []int{16, 32, 64}, 256
	o.Seeds, o.Steps, o.Warmup, o.Batch, o.VocabSize = []uint64{1, 2}, 4, 1, 2, 300
	o.FineTune.Len, o.FineTune.Steps, o.FineTune.Warmup, o.FineTune.Batch = 32, 2, 0, 1
	o.Text, o.TextName, o.Docs = text, "Opticks", docs
	return o
}

func TestExtrapolateMiniature(t *testing.T) {
	dir := t.TempDir()
	o := miniExtrapolate(t, dir)
	res, err := Extrapolate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	mustExist(t, dir, "results.json", "summary.md", "curves.csv", "char-lm_loss.png", "char-lm_finetuned.png", "mlm_loss.png", "mlm_finetuned.svg")
	if !res.Complete || len(res.Runs) != 4 {
		t.Fatalf("complete %v, %d runs; want 4 (2 tasks × 2 seeds)", res.Complete, len(res.Runs))
	}
	// rotary × 4 scalings, sinusoidal, learned, 3 fine-tunes
	for _, r := range res.Runs {
		if len(r.Curves) != 9 {
			t.Fatalf("%s seed %d: %d curves, want 9", r.Task, r.Seed, len(r.Curves))
		}
		byName := map[string]ExtrapCurve{}
		for _, c := range r.Curves {
			byName[c.Variant] = c
			if len(c.Loss) != 3 || len(c.Tokens) != 3 {
				t.Fatalf("%s %s: %d losses, want 3", r.Task, c.Variant, len(c.Loss))
			}
		}
		plain := float64(byName["rotary"].Loss[0])
		if !(plain > 0) {
			t.Fatalf("%s: rotary loss at the training length %v", r.Task, plain)
		}
		// At the training length every scaling is the identity.
		for _, v := range []string{"rotary+linear", "rotary+dynamic×2", "rotary+yarn"} {
			if got := float64(byName[v].Loss[0]); math.Abs(got-plain) > 1e-5*plain {
				t.Errorf("%s %s at the training length: %v, want the plain %v", r.Task, v, got, plain)
			}
		}
		// The learned table stops at the training length: n/a, not a crash.
		l := byName["learned"]
		if math.IsNaN(float64(l.Loss[0])) || !math.IsNaN(float64(l.Loss[1])) || !math.IsNaN(float64(l.Loss[2])) || l.NA == "" {
			t.Errorf("%s learned: losses %v, n/a %q; want a number at 16 and n/a past it", r.Task, l.Loss, l.NA)
		}
		if s := byName["sinusoidal"]; math.IsNaN(float64(s.Loss[2])) {
			t.Errorf("%s sinusoidal at 64: n/a", r.Task)
		}
		for _, v := range []string{"rotary ft32", "rotary+linear×4 ft32", "rotary+yarn×4 ft32"} {
			if c, ok := byName[v]; !ok || !c.FineTuned || math.IsNaN(float64(c.Loss[2])) {
				t.Errorf("%s: fine-tuned %s missing or n/a: %+v", r.Task, v, c)
			}
		}
	}
	var sum ExtrapSummary
	for _, s := range res.Summary {
		if s.Task == ExtrapCharLM && s.Variant == "learned" {
			sum = s
		}
	}
	if len(sum.N) != 3 || sum.N[0] != 2 || sum.N[1] != 0 {
		t.Errorf("summary of learned: n %v, want [2 0 0]", sum.N)
	}
	md := readFile(t, dir, "summary.md")
	for _, want := range []string{"n/a", " ± ", "| rotary+yarn |", "### mlm"} {
		if !strings.Contains(md, want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
	t.Log(md)
	if _, err := ResummarizeExtrapolate(dir); err != nil {
		t.Fatal(err)
	}
}

// The evaluation at the training length is the model's plain loss: the
// token-weighted mean of Forward's cross-entropy over the same windows.
func TestExtrapolateEvalIsThePlainLoss(t *testing.T) {
	o := miniExtrapolate(t, t.TempDir())
	ctx := context.Background()
	for _, task := range []string{ExtrapCharLM, ExtrapMLM} {
		var tk *extrapTask
		var err error
		if task == ExtrapCharLM {
			tk, err = charTask(ctx, o)
		} else {
			tk, err = mlmTask(o)
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := roformer.New(extrapConfig(o, tk, roformer.PosRotary), headOf(tk))
		if err != nil {
			t.Fatal(err)
		}
		m.Init(3)
		if _, err := trainExtrap(ctx, m, tk, o.Schedule, o.Batch, o.TrainLen, 3, 1); err != nil {
			t.Fatal(err)
		}
		got, n, err := evalExtrap(ctx, m, tk, o.TrainLen)
		if err != nil {
			t.Fatal(err)
		}
		L := o.TrainLen
		var sum float64
		var count int
		for w := 0; w < len(tk.evalIn)/tk.body(L); w++ {
			ids, labels := make([]int32, L), make([]int32, L)
			tk.window(ids, labels, 0, L, tk.evalIn, tk.evalLab, w*tk.body(L))
			out, err := m.Forward(ctx, &roformer.Batch{InputIDs: ids, B: 1, T: L}, &roformer.Labels{IDs: labels}, roformer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			k := 0
			for i, l := range labels {
				if l >= 0 && (!tk.causal || i > 0) {
					k++
				}
			}
			sum += out.Loss * float64(k)
			count += k
		}
		want := sum / float64(count)
		if count != n || math.Abs(got-want) > 1e-5*want {
			t.Errorf("%s: evaluation %v over %d tokens, Forward's loss %v over %d", task, got, n, want, count)
		}
	}
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// With ScaleEmbedding and only the absolute encodings, the models carry
// scale_embedding, the curves say so, and no rotary scaling is attempted.
func TestExtrapolateScaledBaselines(t *testing.T) {
	dir := t.TempDir()
	o := miniExtrapolate(t, dir)
	o.Encodings, o.ScaleEmbedding, o.Seeds = []roformer.PositionEncoding{roformer.PosSinusoidal, roformer.PosLearned}, true, []uint64{1}
	res, err := Extrapolate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range res.Runs {
		for _, c := range r.Curves {
			names = append(names, r.Task+" "+c.Variant)
		}
	}
	want := fmt.Sprint([]string{"char-lm sinusoidal ×√E", "char-lm learned ×√E", "mlm sinusoidal ×√E", "mlm learned ×√E"})
	if fmt.Sprint(names) != want {
		t.Errorf("curves %v, want %s", names, want)
	}
	for _, task := range []*extrapTask{{vocab: 256, causal: true}} {
		if !extrapConfig(o, task, roformer.PosSinusoidal).ScaleEmbedding || extrapConfig(o, task, roformer.PosRotary).ScaleEmbedding {
			t.Error("scale_embedding must be set for the absolute encodings only")
		}
	}
	mustExist(t, dir, "results.json", "summary.md")
}
