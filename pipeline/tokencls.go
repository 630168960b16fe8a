package pipeline

import (
	"context"
	"fmt"
	"github.com/roformer-go/roformer/kernels"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// Aggregation is the aggregation_strategy of HF's token-classification
// pipeline: how tokens' predictions become entities.
type Aggregation string

const (
	// AggregateNone answers every token (but special tokens) with its best
	// label: Entity.Entity, Entity.Index set.
	AggregateNone Aggregation = "none"
	// AggregateSimple groups adjacent tokens of the same entity (B-X I-X…,
	// or equal labels without a B- prefix), token by token: a word's
	// pieces may land in different groups.
	AggregateSimple Aggregation = "simple"
	// AggregateFirst labels each word (a token and its "##" pieces) with
	// its first token's best label and score, then groups as simple.
	AggregateFirst Aggregation = "first"
	// AggregateAverage labels each word with the best label of its
	// tokens' mean probabilities, then groups as simple.
	AggregateAverage Aggregation = "average"
	// AggregateMax labels each word with the best label of its token
	// whose best probability is highest, then groups as simple.
	AggregateMax Aggregation = "max"
)

// ParseAggregation reads an aggregation strategy ("" is none).
func ParseAggregation(s string) (Aggregation, error) {
	switch a := Aggregation(strings.ToLower(s)); a {
	case "":
		return AggregateNone, nil
	case AggregateNone, AggregateSimple, AggregateFirst, AggregateAverage, AggregateMax:
		return a, nil
	}
	return "", fmt.Errorf("pipeline: aggregation strategy %q is not none, simple, first, average or max", s)
}

// Entity is one answer of TokenClassification, with HF's fields: Entity
// and Index without aggregation, EntityGroup with it. Start and End are
// character (Unicode code point) offsets into the text, as Python's string
// indices; Word is the tokens joined back (HF's convert_tokens_to_string).
type Entity struct {
	Entity      string  `json:"entity,omitempty"`
	EntityGroup string  `json:"entity_group,omitempty"`
	Score       float64 `json:"score"`
	Index       *int    `json:"index,omitempty"` // the token's position in the model's input ([CLS] is 0)
	Word        string  `json:"word"`
	Start       int     `json:"start"`
	End         int     `json:"end"`
}

// TokenClassificationOptions are the token-classification pipeline's
// options.
type TokenClassificationOptions struct {
	Aggregation Aggregation // "" is AggregateNone
	// IgnoreLabels are labels (entity groups, after aggregation) left out
	// of the answer; nil means HF's default ["O"], an empty slice none.
	IgnoreLabels []string
}

// TokenClassification runs the token-classification model on text and
// answers its entities as HF's TokenClassificationPipeline does (HF 4.x,
// with a fast WordPiece tokenizer): a softmax over the labels per token,
// special tokens left out, tokens grouped into words by their "##"
// continuation pieces, then aggregated by opts.Aggregation. The text is not
// truncated: its tokens must fit the model.
func TokenClassification(ctx context.Context, m *roformer.Model, tok *tokenizer.Tokenizer, text string, opts TokenClassificationOptions) ([]Entity, error) {
	if m.Head != roformer.HeadTokenCls {
		return nil, fmt.Errorf("pipeline: token classification needs the token-classification head, the model has %s", m.Head)
	}
	agg, err := ParseAggregation(string(opts.Aggregation))
	if err != nil {
		return nil, err
	}
	enc, err := tok.Encode(text, tokenizer.EncodeOptions{Truncation: tokenizer.TruncateNone})
	if err != nil {
		return nil, err
	}
	T := len(enc.IDs)
	out, err := m.Forward(ctx, &roformer.Batch{InputIDs: tokenizer.Int32s(enc.IDs), TokenTypeIDs: tokenizer.Int32s(enc.TypeIDs), B: 1, T: T}, nil, roformer.Options{})
	if err != nil {
		return nil, err
	}
	labels := m.Config.Labels()
	N := len(labels)
	if len(out.Logits.Data) != T*N {
		return nil, fmt.Errorf("pipeline: the model gives %d logits for %d tokens and %d labels", len(out.Logits.Data), T, N)
	}
	chars := charIndex(text)
	var pre []PreEntity
	for i, id := range enc.IDs {
		if enc.SpecialTokensMask[i] == 1 {
			continue
		}
		o := enc.Offsets[i]
		word := enc.Tokens[i]
		sub := tok.IsContinuation(id)
		if id == tok.UnkID() { // HF: the text's characters, a word of its own
			word, sub = text[o[0]:o[1]], false
		}
		pre = append(pre, PreEntity{Word: word, Scores: kernels.Softmax64(out.Logits.Data[i*N : i*N+N]),
			Start: chars[o[0]], End: chars[o[1]], Index: i, IsSubword: sub})
	}
	ignore := opts.IgnoreLabels
	if ignore == nil {
		ignore = []string{"O"}
	}
	return Aggregate(pre, labels, agg, ignore), nil
}

// PreEntity is one token before aggregation: its text, its probabilities
// over the labels, its character offsets, its position in the input, and
// whether it continues the word before it (HF's pre-entities).
type PreEntity struct {
	Word       string
	Scores     []float64
	Start, End int
	Index      int
	IsSubword  bool
}

// Aggregate turns pre-entities into entities as HF's pipeline does
// (aggregate, then drop the ignored labels). labels name the scores'
// positions.
func Aggregate(pre []PreEntity, labels []string, agg Aggregation, ignore []string) []Entity {
	var ents []entity
	switch agg {
	case AggregateNone, AggregateSimple, "":
		for _, p := range pre {
			k := kernels.Argmax(p.Scores)
			ents = append(ents, entity{label: labels[k], score: p.Scores[k], index: p.Index, words: []string{p.Word}, start: p.Start, end: p.End})
		}
	default:
		// HF's aggregate_words: a word is a token and the subword tokens
		// after it.
		for i := 0; i < len(pre); {
			j := i + 1
			for j < len(pre) && pre[j].IsSubword {
				j++
			}
			ents = append(ents, aggregateWord(pre[i:j], labels, agg))
			i = j
		}
	}
	var res []Entity
	if agg == AggregateNone || agg == "" {
		for _, e := range ents {
			idx := e.index
			res = append(res, Entity{Entity: e.label, Score: e.score, Index: &idx, Word: e.words[0], Start: e.start, End: e.end})
		}
	} else {
		res = groupEntities(ents)
	}
	return slices.DeleteFunc(res, func(e Entity) bool {
		return slices.Contains(ignore, e.Entity) || slices.Contains(ignore, e.EntityGroup)
	})
}

// entity is a token's or a word's label before grouping.
type entity struct {
	label      string
	score      float64
	index      int
	words      []string
	start, end int
}

func aggregateWord(toks []PreEntity, labels []string, agg Aggregation) entity {
	var scores []float64
	switch agg {
	case AggregateFirst:
		scores = toks[0].Scores
	case AggregateMax:
		best := 0
		for i, t := range toks {
			if slices.Max(t.Scores) > slices.Max(toks[best].Scores) {
				best = i
			}
		}
		scores = toks[best].Scores
	case AggregateAverage:
		scores = make([]float64, len(labels))
		for _, t := range toks {
			for k, v := range t.Scores {
				scores[k] += v
			}
		}
		for k := range scores {
			scores[k] /= float64(len(toks))
		}
	}
	k := kernels.Argmax(scores)
	words := make([]string, len(toks))
	for i, t := range toks {
		words[i] = t.Word
	}
	return entity{label: labels[k], score: scores[k], words: []string{tokensToString(words)}, start: toks[0].Start, end: toks[len(toks)-1].End}
}

// tag splits a label as HF's get_tag: "B-X" → (B, X), "I-X" → (I, X),
// anything else → (I, label).
func tag(label string) (bi, t string) {
	if rest, ok := strings.CutPrefix(label, "B-"); ok {
		return "B", rest
	}
	if rest, ok := strings.CutPrefix(label, "I-"); ok {
		return "I", rest
	}
	return "I", label
}

// groupEntities is HF's group_entities: adjacent entities of one tag join
// a group unless the later one begins (B-); a group's score is its
// members' mean.
func groupEntities(ents []entity) []Entity {
	var out []Entity
	var group []entity
	flush := func() {
		if len(group) == 0 {
			return
		}
		label := group[0].label
		if _, rest, ok := strings.Cut(label, "-"); ok {
			label = rest
		}
		sum := 0.0
		var words []string
		for _, e := range group {
			sum += e.score
			words = append(words, e.words...)
		}
		out = append(out, Entity{EntityGroup: label, Score: sum / float64(len(group)), Word: tokensToString(words),
			Start: group[0].start, End: group[len(group)-1].end})
		group = nil
	}
	for _, e := range ents {
		if len(group) > 0 {
			bi, t := tag(e.label)
			_, lastT := tag(group[len(group)-1].label)
			if t != lastT || bi == "B" {
				flush()
			}
		}
		group = append(group, e)
	}
	flush()
	return out
}

// tokensToString is WordPiece's convert_tokens_to_string: the tokens
// joined by spaces, " ##" removed.
func tokensToString(toks []string) string {
	return strings.TrimSpace(strings.ReplaceAll(strings.Join(toks, " "), " ##", ""))
}

// charIndex maps each byte offset of text (and len(text)) to its character
// offset.
func charIndex(text string) []int {
	idx := make([]int, len(text)+1)
	c := 0
	for b := 0; b < len(text); {
		_, n := utf8.DecodeRuneInString(text[b:])
		for k := 0; k < n; k++ {
			idx[b+k] = c
		}
		b += n
		c++
	}
	idx[len(text)] = c
	return idx
}
