package labelled

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// PairKind says which columns a contrastive data file has, in
// sentence-transformers' names.
type PairKind int

const (
	// Pairs rows are {"anchor", "positive"} with optional hard negatives,
	// "negative" or "negative_1", "negative_2", … (the same number on
	// every row): MultipleNegativesRankingLoss's input.
	Pairs PairKind = iota
	// ScoredPairs rows are {"sentence1", "sentence2", "score"} with a
	// numeric score: CoSENTLoss's input.
	ScoredPairs
)

func (k PairKind) String() string {
	if k == ScoredPairs {
		return `scored pairs ("sentence1", "sentence2", "score")`
	}
	return `pairs ("anchor", "positive", optional "negative")`
}

// PairRow is one row of a contrastive data file.
type PairRow struct {
	Line int
	// Texts are the anchor, the positive and the hard negatives (Pairs),
	// or sentence1 and sentence2 (ScoredPairs).
	Texts []string
	Score float64 // ScoredPairs only
}

// PairSet is a contrastive data file read by ReadPairs.
type PairSet struct {
	File string
	Kind PairKind
	// Negatives is the number of hard-negative columns of every row (Pairs).
	Negatives int
	Rows      []PairRow
}

// MaxNegatives bounds the hard-negative columns of a row.
const MaxNegatives = 64

// ReadPairs reads a JSONL file of contrastive rows. The kind is the first
// row's: ScoredPairs when it has "sentence1", else Pairs. Every row must
// be a JSON object with the kind's fields as strings (the score a finite
// number) and the first row's number of negatives; other fields are
// ignored; blank lines are skipped. Lines longer than maxLineBytes
// (DefaultMaxLineBytes when 0) are refused. Errors are
// *InputError naming the file, the line and the field.
func ReadPairs(path string, maxLineBytes int) (*PairSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("labelled: %w", err)
	}
	defer f.Close()
	return ReadPairsFrom(f, path, maxLineBytes)
}

// ReadPairsFrom is ReadPairs on r, named name in its errors.
func ReadPairsFrom(r io.Reader, name string, maxLineBytes int) (*PairSet, error) {
	ps := &PairSet{File: name}
	err := EachJSONLine(r, name, maxLineBytes, func(line int, b []byte) error {
		fail := func(format string, a ...any) error {
			return &InputError{File: name, Line: line, Err: fmt.Errorf(format, a...)}
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			return fail("not a JSON object: %v", err)
		}
		if len(ps.Rows) == 0 {
			if _, ok := obj["sentence1"]; ok {
				ps.Kind = ScoredPairs
			}
		}
		str := func(field string) (string, bool, error) {
			raw, ok := obj[field]
			if !ok {
				return "", false, nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", true, fail("field %q must be a string, not %s", field, clip(raw))
			}
			return s, true, nil
		}
		need := func(field string) (string, error) {
			s, ok, err := str(field)
			if err == nil && !ok {
				err = fail("no field %q (%s rows need it)", field, ps.Kind)
			}
			return s, err
		}
		row := PairRow{Line: line}
		if ps.Kind == ScoredPairs {
			for _, field := range []string{"sentence1", "sentence2"} {
				s, err := need(field)
				if err != nil {
					return err
				}
				row.Texts = append(row.Texts, s)
			}
			raw, ok := obj["score"]
			if !ok {
				return fail(`no field "score" (%s rows need it)`, ps.Kind)
			}
			if err := json.Unmarshal(raw, &row.Score); err != nil || math.IsInf(row.Score, 0) {
				return fail(`field "score" must be a finite number, not %s`, clip(raw))
			}
		} else {
			for _, field := range []string{"anchor", "positive"} {
				s, err := need(field)
				if err != nil {
					return err
				}
				row.Texts = append(row.Texts, s)
			}
			if s, ok, err := str("negative"); err != nil {
				return err
			} else if ok {
				row.Texts = append(row.Texts, s)
			}
			for k := 1; k <= MaxNegatives+1; k++ {
				s, ok, err := str("negative_" + strconv.Itoa(k))
				if err != nil {
					return err
				}
				if !ok {
					break
				}
				row.Texts = append(row.Texts, s)
			}
			neg := len(row.Texts) - 2
			switch {
			case neg > MaxNegatives:
				return fail("more than %d hard negatives", MaxNegatives)
			case len(ps.Rows) == 0:
				ps.Negatives = neg
			case neg != ps.Negatives:
				return fail("%d hard negatives; the rows before have %d (every row needs the same columns)", neg, ps.Negatives)
			}
		}
		ps.Rows = append(ps.Rows, row)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ps.Rows) == 0 {
		return nil, &InputError{File: name, Err: ErrEmpty}
	}
	return ps, nil
}

// clip returns a JSON value for an error message, cut at 40 bytes.
func clip(raw json.RawMessage) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	return string(raw)
}
