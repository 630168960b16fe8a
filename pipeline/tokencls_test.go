package pipeline

import (
	"context"
	"fmt"
	"github.com/roformer-go/roformer/kernels"
	"math"
	"reflect"
	"testing"

	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

var nerLabels = []string{"O", "B-PER", "I-PER", "B-LOC", "I-LOC"}

// anna is "anna lives in kraków" as tokens ann ##a lives in krak ##ów, with
// hand-chosen probabilities: the word "anna" disagrees with itself.
func anna() []PreEntity {
	return []PreEntity{
		{Word: "ann", Scores: []float64{0.1, 0.7, 0.1, 0.05, 0.05}, Start: 0, End: 3, Index: 1},
		{Word: "##a", Scores: []float64{0.1, 0, 0, 0.9, 0}, Start: 3, End: 4, Index: 2, IsSubword: true},
		{Word: "lives", Scores: []float64{0.9, 0.025, 0.025, 0.025, 0.025}, Start: 5, End: 10, Index: 3},
		{Word: "in", Scores: []float64{0.8, 0.05, 0.05, 0.05, 0.05}, Start: 11, End: 13, Index: 4},
		{Word: "krak", Scores: []float64{0.1, 0.1, 0.1, 0.6, 0.1}, Start: 14, End: 18, Index: 5},
		{Word: "##ów", Scores: []float64{0.1, 0.1, 0.1, 0.1, 0.6}, Start: 18, End: 20, Index: 6, IsSubword: true},
	}
}

func ip(i int) *int { return &i }

func TestAggregateByHand(t *testing.T) {
	cases := []struct {
		agg  Aggregation
		want []Entity
	}{
		{AggregateNone, []Entity{
			{Entity: "B-PER", Score: 0.7, Index: ip(1), Word: "ann", Start: 0, End: 3},
			{Entity: "B-LOC", Score: 0.9, Index: ip(2), Word: "##a", Start: 3, End: 4},
			{Entity: "B-LOC", Score: 0.6, Index: ip(5), Word: "krak", Start: 14, End: 18},
			{Entity: "I-LOC", Score: 0.6, Index: ip(6), Word: "##ów", Start: 18, End: 20},
		}},
		// Token by token: B-LOC after B-PER starts a group; the O tokens
		// form a group that is left out; B-LOC I-LOC join (mean score).
		{AggregateSimple, []Entity{
			{EntityGroup: "PER", Score: 0.7, Word: "ann", Start: 0, End: 3},
			{EntityGroup: "LOC", Score: 0.9, Word: "##a", Start: 3, End: 4},
			{EntityGroup: "LOC", Score: 0.6, Word: "kraków", Start: 14, End: 20},
		}},
		// The first token's label: anna is B-PER 0.7, kraków B-LOC 0.6.
		{AggregateFirst, []Entity{
			{EntityGroup: "PER", Score: 0.7, Word: "anna", Start: 0, End: 4},
			{EntityGroup: "LOC", Score: 0.6, Word: "kraków", Start: 14, End: 20},
		}},
		// The mean: anna [0.1 0.35 0.05 0.475 0.025] → B-LOC 0.475; kraków
		// [0.1 0.1 0.1 0.35 0.35] → the first best, B-LOC 0.35. Two B-
		// words: two groups.
		{AggregateAverage, []Entity{
			{EntityGroup: "LOC", Score: 0.475, Word: "anna", Start: 0, End: 4},
			{EntityGroup: "LOC", Score: 0.35, Word: "kraków", Start: 14, End: 20},
		}},
		// The surest token: ##a (0.9) → B-LOC 0.9; krak and ##ów tie at
		// 0.6, the first wins → B-LOC 0.6.
		{AggregateMax, []Entity{
			{EntityGroup: "LOC", Score: 0.9, Word: "anna", Start: 0, End: 4},
			{EntityGroup: "LOC", Score: 0.6, Word: "kraków", Start: 14, End: 20},
		}},
	}
	for _, c := range cases {
		got := Aggregate(anna(), nerLabels, c.agg, []string{"O"})
		if !entitiesClose(got, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.agg, show(got), show(c.want))
		}
	}
	// B- always begins a group, I- of the same tag continues one; a label
	// without a prefix is its own tag; nothing ignored keeps O.
	pre := []PreEntity{
		{Word: "a", Scores: []float64{0.2, 0.8, 0, 0, 0}, Start: 0, End: 1},
		{Word: "b", Scores: []float64{0.4, 0.6, 0, 0, 0}, Start: 2, End: 3},
		{Word: "c", Scores: []float64{0.3, 0.3, 0.4, 0, 0}, Start: 4, End: 5},
		{Word: "d", Scores: []float64{1, 0, 0, 0, 0}, Start: 6, End: 7},
	}
	want := []Entity{
		{EntityGroup: "PER", Score: 0.8, Word: "a", Start: 0, End: 1},
		{EntityGroup: "PER", Score: 0.5, Word: "b c", Start: 2, End: 5},
		{EntityGroup: "O", Score: 1, Word: "d", Start: 6, End: 7},
	}
	if got := Aggregate(pre, nerLabels, AggregateSimple, []string{}); !entitiesClose(got, want) {
		t.Errorf("B-/I-:\n got %s\nwant %s", show(got), show(want))
	}
}

func entitiesClose(a, b []Entity) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if math.Abs(x.Score-y.Score) > 1e-12 {
			return false
		}
		x.Score, y.Score = 0, 0
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func show(es []Entity) string {
	s := ""
	for _, e := range es {
		idx := -1
		if e.Index != nil {
			idx = *e.Index
		}
		s += "{" + e.Entity + e.EntityGroup + " " + e.Word + " " + itoa(e.Start) + "-" + itoa(e.End) + " i" + itoa(idx) + " " + ftoa(e.Score) + "} "
	}
	return s
}

func itoa(i int) string     { return fmtSprint(i) }
func ftoa(f float64) string { return fmtSprint(f) }

func TestTokenClassificationAgreesWithForward(t *testing.T) {
	ctx := context.Background()
	words := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "whale", "ship", "sea", "a", ".", "##s"}
	m, tok := testmodel.Tiny{Words: words, Head: roformer.HeadTokenCls, Seed: 4, Scale: 40, Labels: nerLabels}.Build(t)
	text := "the whales ø ship"
	got, err := TokenClassification(ctx, m, tok, text, TokenClassificationOptions{IgnoreLabels: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := tok.Encode(text, tokenizer.EncodeOptions{})
	out, err := m.Forward(ctx, &roformer.Batch{InputIDs: tokenizer.Int32s(enc.IDs), B: 1, T: len(enc.IDs)}, nil, roformer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// [CLS] the whale ##s [UNK] ship [SEP]: five text tokens, character
	// offsets (ø is one character, two bytes), the unknown one's word is
	// its text.
	wantWords := []string{"the", "whale", "##s", "ø", "ship"}
	wantSpans := [][2]int{{0, 3}, {4, 9}, {9, 10}, {11, 12}, {13, 17}}
	if len(got) != 5 {
		t.Fatalf("%d entities: %s", len(got), show(got))
	}
	for k, e := range got {
		i := k + 1
		p := kernels.Softmax64(out.Logits.Data[i*5 : i*5+5])
		best := kernels.Argmax(p)
		if *e.Index != i || e.Entity != nerLabels[best] || math.Abs(e.Score-p[best]) > 1e-9 ||
			e.Word != wantWords[k] || e.Start != wantSpans[k][0] || e.End != wantSpans[k][1] {
			t.Errorf("token %d: %s, want %s %.6f %q %v", i, show([]Entity{e}), nerLabels[best], p[best], wantWords[k], wantSpans[k])
		}
	}
	if _, err := TokenClassification(ctx, m, tok, text, TokenClassificationOptions{Aggregation: "bogus"}); err == nil {
		t.Error("a bogus aggregation strategy passed")
	}
	mlm, _ := tinyModel(t)
	if _, err := TokenClassification(ctx, mlm, tok, text, TokenClassificationOptions{}); err == nil {
		t.Error("a masked-LM model classified tokens")
	}
}

func fmtSprint(v any) string { return fmt.Sprint(v) }
