package pipeline

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

func tinyModel(t *testing.T) (*roformer.Model, *tokenizer.Tokenizer) {
	t.Helper()
	words := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "whale", "ship", "sea", "a", ".", "##s"}
	// Scale 40: the predictions far from uniform
	return testmodel.Tiny{Words: words, Seed: 3, Scale: 40}.Build(t)
}

func TestFillMaskAgreesWithForward(t *testing.T) {
	ctx := context.Background()
	m, tok := tinyModel(t)
	text := "the [MASK] sea . the ship [MASK]"
	preds, err := FillMask(ctx, m, tok, text, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(preds) != 2 || len(preds[0]) != 3 {
		t.Fatalf("got %d masks with %d candidates", len(preds), len(preds[0]))
	}
	enc, _ := tok.Encode(text, tokenizer.EncodeOptions{})
	ids := make([]int32, len(enc.IDs))
	for i, id := range enc.IDs {
		ids[i] = int32(id)
	}
	out, err := m.Forward(ctx, &roformer.Batch{InputIDs: ids, B: 1, T: len(ids)}, nil, roformer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.VocabSize
	k := 0
	for pos, id := range enc.IDs {
		if id != tok.MaskID() {
			continue
		}
		row := out.Logits.Data[pos*V : pos*V+V]
		best := 0
		for j := range row {
			if row[j] > row[best] {
				best = j
			}
		}
		if preds[k][0].ID != best {
			t.Errorf("mask %d: top prediction %d, arg-max of the logits %d", k, preds[k][0].ID, best)
		}
		if !(preds[k][0].Score >= preds[k][1].Score && preds[k][1].Score >= preds[k][2].Score) {
			t.Errorf("mask %d: scores not sorted: %+v", k, preds[k])
		}
		sum := 0.0
		mx := float64(row[best])
		for _, v := range row {
			sum += math.Exp(float64(v) - mx)
		}
		if want := 1 / sum; math.Abs(preds[k][0].Score-want) > 1e-9 {
			t.Errorf("mask %d: score %v, softmax %v", k, preds[k][0].Score, want)
		}
		// Two masks: HF decodes with the special tokens, so the other mask
		// stays visible.
		filled := append([]int(nil), enc.IDs...)
		filled[pos] = preds[k][0].ID
		if got, want := preds[k][0].Sequence, tok.Decode(filled, false); got != want || !strings.Contains(got, "[MASK]") || !strings.HasPrefix(got, "[CLS] ") {
			t.Errorf("mask %d: sequence %q, want %q with the other [MASK]", k, got, want)
		}
		k++
	}
}

// One mask: the sequence is the text with the candidate in place, special
// tokens dropped, as HF decodes it.
func TestFillMaskSequenceOneMask(t *testing.T) {
	m, tok := tinyModel(t)
	preds, err := FillMask(context.Background(), m, tok, "the [MASK] sea .", 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range preds[0] {
		if strings.HasPrefix(p.Token, "##") || p.Token == "." || strings.HasPrefix(p.Token, "[") {
			continue // joins the word before it, or is special
		}
		if want := "the " + p.Token + " sea."; p.Sequence != want {
			t.Errorf("candidate %q: sequence %q, want %q", p.Token, p.Sequence, want)
		}
	}
}

func TestFillMaskErrors(t *testing.T) {
	m, tok := tinyModel(t)
	if _, err := FillMask(context.Background(), m, tok, "no mask here", 5); err == nil {
		t.Error("text without [MASK] accepted")
	}
	if _, err := FillMask(context.Background(), m, tok, "the [MASK]", 0); err == nil {
		t.Error("top-k 0 accepted")
	}
}

// FillMask runs the LM head at the masks only: its scores are the softmax
// of the whole head's logits at the masks (bit for bit on go-asm and
// gonum), and a text of 300
// tokens over a vocabulary of 4,005 allocates far less than its 4.8 MB of
// logits (TotalAlloc, the encoder's pass included).
func TestFillMaskHeadAtMasksOnly(t *testing.T) {
	ctx := context.Background()
	words := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	for i := range 4000 {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	m, tok := testmodel.Tiny{Words: words, Seed: 9, Scale: 3, MaxPositions: 512}.Build(t)
	var text []string
	for i := range 298 {
		text = append(text, fmt.Sprintf("w%d", (i*37)%4000))
	}
	text[17], text[250] = "[MASK]", "[MASK]"
	enc, _ := tok.Encode(strings.Join(text, " "), tokenizer.EncodeOptions{})
	ids := make([]int32, len(enc.IDs))
	for i, id := range enc.IDs {
		ids[i] = int32(id)
	}
	V := m.Config.VocabSize
	eachBackend(t, func(t *testing.T, exact bool) {
		preds, err := FillMask(ctx, m, tok, strings.Join(text, " "), 3)
		if err != nil {
			t.Fatal(err)
		}
		out, err := m.Forward(ctx, &roformer.Batch{InputIDs: ids, B: 1, T: len(ids)}, nil, roformer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for k, pos := range []int{18, 251} { // [CLS] first
			probs := kernels.Softmax64(out.Logits.Data[pos*V : (pos+1)*V])
			for _, p := range preds[k] {
				if !same(p.Score, probs[p.ID], exact) {
					t.Errorf("mask %d, token %d: score %v, the whole head's %v", k, p.ID, p.Score, probs[p.ID])
				}
			}
		}
	})
	// The least of three calls, made with the collector off: a collection
	// between two empties the kernels' sync.Pool scratch, which the next
	// call would allocate again.
	logits := int64(len(ids)*V) * 4
	got := int64(math.MaxInt64)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := FillMask(ctx, m, tok, strings.Join(text, " "), 3); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		got = min(got, int64(after.TotalAlloc-before.TotalAlloc))
	}
	t.Logf("allocated %.2f MB; the text's logits are %.2f MB", float64(got)/1e6, float64(logits)/1e6)
	if got > logits/2 {
		t.Errorf("FillMask allocated %d bytes; the text's %d × %d logits are %d: the head ran beyond the masks", got, len(ids), V, logits)
	}
}
