package pipeline

import (
	"cmp"
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

var qaWords = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "whale", "ship", "sea", "a", ".", "##s",
	"where", "is", "?", "big", "blue", "swim", "##ming", "in"}

func qaModel(t *testing.T, seed uint64) (*roformer.Model, *tokenizer.Tokenizer) {
	t.Helper()
	return testmodel.Tiny{Words: qaWords, Head: roformer.HeadQA, Seed: seed, Scale: 8, MaxPositions: 64}.Build(t)
}

const (
	qaQuestion = "where is the whale ?"
	// 21 tokens: ø is [UNK] (one character, two bytes), swimming and ships
	// are two tokens each.
	qaLong = "the big whale is swimming in the blue sea . a ship ø the ships is in the sea"
)

func TestQAWindows(t *testing.T) {
	_, tok := qaModel(t, 1)
	// A context that fits: one window, the pair's encoding.
	o, err := QuestionAnsweringOptions{}.resolve(tok)
	if err != nil {
		t.Fatal(err)
	}
	if o.TopK != 1 || o.MaxAnswerLen != 15 || o.MaxSeqLen != 384 || o.DocStride != 128 || o.MaxQuestionLen != 64 {
		t.Errorf("defaults %+v", o)
	}
	_, ws, err := qaWindows(tok, qaQuestion, "the ships", o)
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := tok.EncodePair(qaQuestion, "the ships", tokenizer.EncodeOptions{})
	if len(ws) != 1 || !reflect.DeepEqual(ws[0].ids, pair.IDs) || !reflect.DeepEqual(ws[0].types, pair.TypeIDs) || ws[0].ctx0 != 7 || ws[0].lo != 0 || ws[0].hi != 3 {
		t.Errorf("one window %+v, pair %v %v", ws, pair.IDs, pair.TypeIDs)
	}
	// 5 question tokens, max_seq_len 14: 6 context tokens a window, 2 shared.
	o, _ = QuestionAnsweringOptions{MaxSeqLen: 14, DocStride: 2}.resolve(tok)
	c, ws, err := qaWindows(tok, qaQuestion, qaLong, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.IDs) != 21 {
		t.Fatalf("%d context tokens %v", len(c.IDs), c.Tokens)
	}
	first, _ := tok.EncodePair(qaQuestion, qaLong, tokenizer.EncodeOptions{MaxLength: 14, Truncation: tokenizer.TruncateOnlySecond})
	if !reflect.DeepEqual(ws[0].ids, first.IDs) || !reflect.DeepEqual(ws[0].types, first.TypeIDs) {
		t.Errorf("first window %v %v, truncated pair %v %v", ws[0].ids, ws[0].types, first.IDs, first.TypeIDs)
	}
	var got [][2]int
	for _, w := range ws {
		got = append(got, [2]int{w.lo, w.hi})
		if len(w.ids) > 14 || w.ids[len(w.ids)-1] != tok.SepID() || !reflect.DeepEqual(w.ids[w.ctx0:len(w.ids)-1], c.IDs[w.lo:w.hi]) {
			t.Errorf("window %+v", w)
		}
	}
	if want := [][2]int{{0, 6}, {4, 10}, {8, 14}, {12, 18}, {16, 21}}; !reflect.DeepEqual(got, want) {
		t.Errorf("windows %v, want %v", got, want)
	}
	// HF's doc_stride=0: no overlap; a long question is cut.
	o, _ = QuestionAnsweringOptions{MaxSeqLen: 14, DocStride: -1, MaxQuestionLen: 3}.resolve(tok)
	_, ws, _ = qaWindows(tok, qaQuestion+" "+qaQuestion, qaLong, o)
	if len(ws) != 3 || ws[0].ctx0 != 5 || ws[1].lo != 8 || ws[2].hi != 21 {
		t.Errorf("no stride: %+v", ws)
	}
}

// qaReference is the brute force: every span of context tokens s ≤ e,
// e − s + 1 ≤ max_answer_len, of every window, scored by the softmaxes over
// the window's context positions and [CLS], then widened to whole words.
func qaReference(t *testing.T, m *roformer.Model, tok *tokenizer.Tokenizer, q, text string, opts QuestionAnsweringOptions) []QAAnswer {
	t.Helper()
	o, err := opts.resolve(tok)
	if err != nil {
		t.Fatal(err)
	}
	c, ws, err := qaWindows(tok, q, text, o)
	if err != nil {
		t.Fatal(err)
	}
	chars := charIndex(text)
	var all []QAAnswer
	null := math.Inf(1)
	for _, w := range ws {
		out, err := m.Forward(context.Background(), &roformer.Batch{InputIDs: tokenizer.Int32s(w.ids), TokenTypeIDs: tokenizer.Int32s(w.types), B: 1, T: len(w.ids)}, nil, roformer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		n := w.hi - w.lo
		in := func(i int) bool { return i == 0 || i >= w.ctx0 && i < w.ctx0+n }
		soft := func(z []float32) []float64 {
			mx, sum := math.Inf(-1), 0.0
			for i, v := range z {
				if in(i) {
					mx = math.Max(mx, float64(v))
				}
			}
			p := make([]float64, len(z))
			for i, v := range z {
				if in(i) {
					p[i] = math.Exp(float64(v) - mx)
					sum += p[i]
				}
			}
			for i := range p {
				p[i] /= sum
			}
			return p
		}
		ps, pe := soft(out.StartLogits.Data), soft(out.EndLogits.Data)
		null = math.Min(null, ps[0]*pe[0])
		for s := w.ctx0; s < w.ctx0+n; s++ {
			for e := s; e < w.ctx0+n; e++ {
				if e-s+1 > o.MaxAnswerLen {
					continue
				}
				a, b := w.lo+s-w.ctx0, w.lo+e-w.ctx0
				for a > w.lo && strings.HasPrefix(c.Tokens[a], "##") {
					a--
				}
				for b+1 < w.hi && strings.HasPrefix(c.Tokens[b+1], "##") {
					b++
				}
				from, to := c.Offsets[a][0], c.Offsets[b][1]
				all = append(all, QAAnswer{Score: ps[s] * pe[e], Start: chars[from], End: chars[to], Answer: text[from:to]})
			}
		}
	}
	if o.HandleImpossibleAnswer {
		all = append(all, QAAnswer{Score: null})
	}
	slices.SortStableFunc(all, func(x, y QAAnswer) int { return cmp.Compare(y.Score, x.Score) })
	return all[:min(len(all), o.TopK)]
}

func answersClose(a, b []QAAnswer) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if math.Abs(x.Score-y.Score) > 1e-9*math.Max(1, y.Score) {
			return false
		}
		x.Score, y.Score = 0, 0
		if x != y {
			return false
		}
	}
	return true
}

func TestQuestionAnsweringBruteForce(t *testing.T) {
	ctx := context.Background()
	contexts := []string{"the whale is swimming in the sea", "ø big ships", qaLong}
	for seed := uint64(1); seed <= 4; seed++ {
		m, tok := qaModel(t, seed)
		for _, text := range contexts {
			for _, o := range []QuestionAnsweringOptions{
				{},
				{TopK: 5},
				{TopK: 50, MaxAnswerLen: 3},
				{TopK: 7, MaxAnswerLen: 1, HandleImpossibleAnswer: true},
				{TopK: 4, MaxSeqLen: 14, DocStride: 2}, // windows when the context is long
				{TopK: 3, MaxSeqLen: 12, DocStride: 1, MaxAnswerLen: 2, HandleImpossibleAnswer: true},
				{TopK: 1000, MaxSeqLen: 13, DocStride: 3},
			} {
				got, err := QuestionAnswering(ctx, m, tok, qaQuestion, text, o)
				if err != nil {
					t.Fatal(err)
				}
				want := qaReference(t, m, tok, qaQuestion, text, o)
				if !answersClose(got, want) {
					t.Errorf("seed %d %q %+v:\n got %+v\nwant %+v", seed, text, o, got, want)
				}
				rs := []rune(text)
				for _, a := range got {
					if a.Answer == "" && a.Start == 0 && a.End == 0 && o.HandleImpossibleAnswer {
						continue
					}
					// Character offsets into the context, whole words (a
					// window may cut a word: only with one window).
					whole := o.MaxSeqLen != 0 || ((a.Start == 0 || rs[a.Start-1] == ' ') && (a.End == len(rs) || rs[a.End] == ' '))
					if a.Start >= a.End || a.End > len(rs) || string(rs[a.Start:a.End]) != a.Answer || !whole {
						t.Errorf("seed %d %q: answer %+v not whole words of the context", seed, text, a)
					}
					if o.MaxAnswerLen == 1 && o.MaxSeqLen == 0 && strings.Contains(a.Answer, " ") {
						t.Errorf("seed %d %q: %q is longer than one token", seed, text, a.Answer)
					}
					if a.Score <= 0 || a.Score > 1 {
						t.Errorf("score %v", a.Score)
					}
				}
				if !slices.IsSortedFunc(got, func(x, y QAAnswer) int { return cmp.Compare(y.Score, x.Score) }) {
					t.Errorf("not best first: %+v", got)
				}
			}
		}
	}
}

// TestQAScoresByHand: the [CLS] score and the masking on hand-made logits.
func TestQAScoresByHand(t *testing.T) {
	// [CLS] q [SEP] c c c [SEP]: positions 3, 4, 5 are the context.
	start := []float32{1, 9, 9, 0, 1, 0, 9}
	end := []float32{1, 9, 9, 0, 0, 1, 9}
	ok := []bool{true, false, false, true, true, true, false}
	ps, pe, null := qaProbs(start, end, ok)
	e := math.E
	// start: [CLS], 0, 1, 0 → e, 1, e, 1 over 2 + 2e; end: e, 1, 1, e.
	if math.Abs(null-(e/(2+2*e))*(e/(2+2*e))) > 1e-12 || ps[0] != 0 || pe[0] != 0 || ps[1] != 0 || pe[6] != 0 {
		t.Errorf("null %v ps %v pe %v", null, ps, pe)
	}
	spans := bestSpans(ps, pe, 3, 6, 2, 10)
	// s ≤ e < s + 2: (3,3) (3,4) (4,4) (4,5) (5,5); best (4,5) = e/(2+2e) · e/(2+2e).
	if len(spans) != 5 || spans[0].s != 4 || spans[0].e != 5 || math.Abs(spans[0].score-null) > 1e-12 {
		t.Errorf("spans %+v", spans)
	}
	for _, sp := range spans {
		if sp.e < sp.s || sp.e-sp.s+1 > 2 || sp.s < 3 || sp.e >= 6 {
			t.Errorf("span %+v out of bounds", sp)
		}
	}
}

func TestQuestionAnsweringImpossible(t *testing.T) {
	ctx := context.Background()
	won, lost := 0, 0
	for seed := uint64(1); seed <= 24; seed++ {
		m, tok := qaModel(t, seed)
		o := QuestionAnsweringOptions{HandleImpossibleAnswer: true}
		got, err := QuestionAnswering(ctx, m, tok, qaQuestion, "the sea", o)
		if err != nil {
			t.Fatal(err)
		}
		if want := qaReference(t, m, tok, qaQuestion, "the sea", o); !answersClose(got, want) {
			t.Errorf("seed %d: %+v, want %+v", seed, got, want)
		}
		all, _ := QuestionAnswering(ctx, m, tok, qaQuestion, "the sea", QuestionAnsweringOptions{TopK: 10, HandleImpossibleAnswer: true})
		plain, _ := QuestionAnswering(ctx, m, tok, qaQuestion, "the sea", QuestionAnsweringOptions{})
		if len(all) != 4 {
			t.Fatalf("seed %d: %d answers %+v", seed, len(all), all)
		}
		if got[0].Answer == "" {
			won++
			if got[0] != (QAAnswer{Score: got[0].Score}) || got[0].Score <= plain[0].Score || plain[0].Answer == "" {
				t.Errorf("seed %d: null %+v, best span %+v", seed, got[0], plain[0])
			}
		} else {
			lost++
			if got[0] != plain[0] {
				t.Errorf("seed %d: %+v, without the null answer %+v", seed, got[0], plain[0])
			}
		}
	}
	if won == 0 || lost == 0 {
		t.Errorf("the null answer won %d times, lost %d: the test sees only one side", won, lost)
	}
}

func TestQuestionAnsweringErrors(t *testing.T) {
	ctx := context.Background()
	m, tok := qaModel(t, 1)
	for _, c := range []struct {
		q, text string
		o       QuestionAnsweringOptions
	}{
		{"", "the sea", QuestionAnsweringOptions{}},
		{"where", "", QuestionAnsweringOptions{}},
		{"where", "the sea", QuestionAnsweringOptions{TopK: -1}},
		{"where", "the sea", QuestionAnsweringOptions{MaxAnswerLen: -2}},
		{"where", "the sea", QuestionAnsweringOptions{MaxSeqLen: 10, DocStride: 11}},
		{qaQuestion, qaLong, QuestionAnsweringOptions{MaxSeqLen: 12, DocStride: 4}}, // 4 context tokens a window
		{qaQuestion, qaLong, QuestionAnsweringOptions{MaxSeqLen: 8}},                // no room
	} {
		if a, err := QuestionAnswering(ctx, m, tok, c.q, c.text, c.o); err == nil {
			t.Errorf("%q %q %+v: %+v, want an error", c.q, c.text, c.o, a)
		} else if !errors.Is(err, ErrInput) {
			t.Errorf("%v does not wrap ErrInput", err)
		}
	}
	mlm, _ := tinyModel(t)
	if _, err := QuestionAnswering(ctx, mlm, tok, "where", "the sea", QuestionAnsweringOptions{}); err == nil {
		t.Error("a masked-LM model answered a question")
	}
}
