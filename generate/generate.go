package generate

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Decoder is a model decoding R rows at once, each with a cache of the
// tokens fed so far. Logits are row-major [R, V] float32, V = VocabSize().
type Decoder interface {
	// Prefill starts decoding the prompts, [B][L_b] ids (B rows), with
	// the room that the generation will need (refused with an error, before
	// anything is allocated, when its sizes are beyond the decoder), and
	// returns the logits of the token after each prompt, [B, V]. A
	// decoder may refuse prompts of different lengths.
	Prefill(ctx context.Context, prompts [][]int32, room Room) ([]float32, error)
	// Step feeds one token per row, len(tokens) = R, after the tokens fed
	// so far, and returns the logits of the next one, [R, V].
	Step(ctx context.Context, tokens []int32) ([]float32, error)
	// Reorder makes row i a copy of the former row rows[i], cache
	// included; len(rows) becomes R (beam search expands B prompts into
	// B·K rows, then makes each beam follow the one it continues).
	Reorder(rows []int)
	// VocabSize is V, the number of logits per row.
	VocabSize() int
	// PadID is the id fed to rows that have finished while others go on.
	PadID() int32
}

// Room is what a generation will ask of a decoder after Prefill: Reorder
// makes each prompt Beams rows, and Step adds up to NewTokens tokens to
// each row.
type Room struct {
	Beams     int // rows per prompt: NumBeams under beam search, 1 otherwise
	NewTokens int // Options.MaxNewTokens
}

// Decoding strategies (Options.Strategy).
const (
	Greedy = "greedy" // the best id at every step (the default)
	Sample = "sample" // HF's do_sample=True: temperature, top-k, top-p
	Beam   = "beam"   // HF's beam search (num_beams ≥ 1, do_sample=False)
)

// EarlyStopping is HF's early_stopping of beam search.
type EarlyStopping int

const (
	// EarlyStopHeuristic is HF's early_stopping=False (its default): a
	// prompt is done once NumBeams hypotheses are finished and the best
	// running beam, length-normalised at the current length, cannot beat
	// the worst of them.
	EarlyStopHeuristic EarlyStopping = iota
	// EarlyStopOnBeams is early_stopping=True: done as soon as NumBeams
	// hypotheses are finished.
	EarlyStopOnBeams
	// EarlyStopNever is early_stopping="never": done only when no running
	// beam can still beat the worst finished hypothesis at any length up
	// to the maximum (the exact rule).
	EarlyStopNever
)

// LengthNorm says how beam search counts a finished hypothesis's length n
// and divides its summed log-probability by a penalty lp(n).
type LengthNorm int

const (
	// LengthHF is HF's BeamSearchScorer: n counts the prompt and the new
	// ids without the EOS, lp(n) = n^LengthPenalty.
	LengthHF LengthNorm = iota
	// LengthGNMT is Wu et al. 2016 (GNMT) as fairseq and Vaswani et al.
	// use it: n counts the new ids with the EOS (not the prompt, a BOS),
	// lp(n) = ((5+n)/6)^LengthPenalty.
	LengthGNMT
)

// ErrStop, returned by Options.OnToken, ends generation early without an
// error: Generate returns the ids decoded so far.
var ErrStop = errors.New("generate: generation stopped by the callback")

// Options say how Generate decodes.
type Options struct {
	// MaxNewTokens is the number of tokens to add to each prompt at most
	// (> 0).
	MaxNewTokens int
	// EOS, when ≥ 0, ends a row at that id: later steps feed the row the
	// decoder's pad id (as HF's generate does), and decoding stops once
	// every row has ended. In beam search an EOS finishes a hypothesis.
	EOS int
	// Stop, when set, ends row r once Stop(r, ids) is true for its new ids
	// so far (HF's StoppingCriteria, per row): as an EOS does, without
	// one. Not with beam search.
	Stop func(row int, ids []int32) bool

	// Strategy is Greedy (""), Sample or Beam.
	Strategy string

	// Sampling (Sample), applied in HF's order after the repetition
	// penalty: logits / Temperature, then top-k, then top-p, then a draw
	// from the softmax.
	Temperature float64 // > 0 (1: the model's own distribution)
	TopK        int     // keep the TopK best ids (0: all)
	TopP        float64 // keep the smallest set of best ids with probability ≥ TopP, in (0, 1]; 0 means 1 (off)
	// Seed seeds the deterministic random stream of the draws (PCG): the
	// same seed, model and options give the same ids.
	Seed uint64

	// Beam search (Beam): NumBeams ≥ 1 beams per prompt; a finished
	// hypothesis scores its summed log-probabilities divided by
	// lp(n) (Length: HF's n^LengthPenalty by default; HF's default
	// penalty is 1, the zero value here is 0: no normalisation).
	NumBeams      int
	LengthPenalty float64
	Length        LengthNorm
	EarlyStopping EarlyStopping

	// RepetitionPenalty, when not 0 or 1, is HF's repetition_penalty: the
	// score of every id already in the row (prompt or generated) is
	// divided by it when positive and multiplied by it when negative. It
	// must be > 0.
	RepetitionPenalty float64

	// OutputScores keeps, for greedy decoding and sampling, the processed
	// logits that chose each new id in Result.Scores (HF's output_scores).
	OutputScores bool

	// OnToken, when set, sees every step's new ids as they are chosen
	// ([B], a finished row's id is the pad id), in order; an error stops
	// generation and is returned (ErrStop: Generate returns the ids so far
	// and no error). Not with beam search, whose ids are final only at the
	// end.
	OnToken func(step int, ids []int32) error
	// OnStep, when set, sees every step as OnToken does, with each row's
	// chosen id's log-probability and its TopLogProbs most likely ids
	// (StepToken); it is called after OnToken, and its error is handled
	// as OnToken's. Each step then costs a log-softmax of every row's
	// scores (and O(V·TopLogProbs) for the top ids). Not with beam
	// search.
	OnStep func(step int, toks []StepToken) error
	// TopLogProbs is the number of most likely ids each StepToken lists
	// (0: none), at most V.
	TopLogProbs int
}

// Result is what Generate returns.
type Result struct {
	// Sequences are the prompts followed by the new ids, [B][L_b + steps]
	// (a finished row continues with the pad id). Beam search gives each
	// prompt its best hypothesis, ended by the EOS when it finished with
	// one (rows may then differ in length).
	Sequences [][]int32
	// Scores, with Options.OutputScores, are the processed logits each new
	// id was chosen from, [B][steps][V]: the logits after the repetition
	// penalty for greedy, the warped ones for sampling (HF's output
	// scores); nil for beam search.
	Scores [][][]float32
	// BeamScores are the best hypotheses' length-normalised scores (HF's
	// sequences_scores), beam search only.
	BeamScores []float64
}

// Validate checks opts and sets the defaults of its zero values (Strategy
// Greedy, TopP 1, RepetitionPenalty 1) for a vocabulary of V ids.
func (opts *Options) Validate(V int) error {
	if opts.Strategy == "" {
		opts.Strategy = Greedy
	}
	switch opts.Strategy {
	case Greedy:
	case Sample:
		if !(opts.Temperature > 0) || math.IsInf(opts.Temperature, 0) {
			return fmt.Errorf("generate: temperature %g must be a positive number when sampling (1 samples from the model's distribution)", opts.Temperature)
		}
		if opts.TopK < 0 {
			return fmt.Errorf("generate: top_k %d must be ≥ 0 (0 keeps every id)", opts.TopK)
		}
		if opts.TopP == 0 {
			opts.TopP = 1
		}
		if !(opts.TopP > 0 && opts.TopP <= 1) {
			return fmt.Errorf("generate: top_p %g is outside (0, 1]", opts.TopP)
		}
	case Beam:
		if opts.NumBeams < 1 {
			return fmt.Errorf("generate: num_beams %d must be at least 1", opts.NumBeams)
		}
		if opts.OnToken != nil {
			return fmt.Errorf("generate: streaming (OnToken) does not work with beam search: the beams' ids are final only at the end")
		}
		if opts.Stop != nil {
			return fmt.Errorf("generate: a Stop callback does not work with beam search: it ends hypotheses by EOS and MaxNewTokens")
		}
		if opts.OnStep != nil {
			return fmt.Errorf("generate: OnStep does not work with beam search: the beams' ids are final only at the end")
		}
		if opts.EarlyStopping < EarlyStopHeuristic || opts.EarlyStopping > EarlyStopNever {
			return fmt.Errorf("generate: early stopping %d is not one of EarlyStopHeuristic, EarlyStopOnBeams, EarlyStopNever", opts.EarlyStopping)
		}
		if opts.Length != LengthHF && opts.Length != LengthGNMT {
			return fmt.Errorf("generate: length normalisation %d is not LengthHF or LengthGNMT", opts.Length)
		}
		if math.IsNaN(opts.LengthPenalty) || math.IsInf(opts.LengthPenalty, 0) {
			return fmt.Errorf("generate: length_penalty %g is not a finite number", opts.LengthPenalty)
		}
	default:
		return fmt.Errorf("generate: decoding strategy %q is not %s, %s or %s", opts.Strategy, Greedy, Sample, Beam)
	}
	if opts.Strategy != Beam && opts.NumBeams > 1 {
		return fmt.Errorf("generate: num_beams %d needs the %s strategy, not %s", opts.NumBeams, Beam, opts.Strategy)
	}
	if opts.NumBeams < 0 {
		return fmt.Errorf("generate: num_beams %d must be at least 1", opts.NumBeams)
	}
	if opts.RepetitionPenalty == 0 {
		opts.RepetitionPenalty = 1
	}
	if !(opts.RepetitionPenalty > 0) || math.IsInf(opts.RepetitionPenalty, 0) {
		return fmt.Errorf("generate: repetition_penalty %g must be a positive number (1: off)", opts.RepetitionPenalty)
	}
	if opts.MaxNewTokens <= 0 {
		return fmt.Errorf("generate: max new tokens %d must be positive", opts.MaxNewTokens)
	}
	if opts.TopLogProbs < 0 || opts.TopLogProbs > V {
		return fmt.Errorf("generate: top log-probabilities %d is outside [0, %d] (the vocabulary)", opts.TopLogProbs, V)
	}
	if opts.EOS >= V {
		return fmt.Errorf("generate: eos id %d is outside the vocabulary [0, %d)", opts.EOS, V)
	}
	return nil
}

// Beams is the number of rows each prompt decodes: NumBeams (at least 1)
// under beam search, 1 otherwise.
func (opts *Options) Beams() int {
	if opts.Strategy == Beam {
		return max(opts.NumBeams, 1)
	}
	return 1
}

// checkSizes refuses sizes whose products overflow int64 before anything
// is allocated: B·K rows, their logits (·V) and their tokens (·(L+N)).
func checkSizes(B, L, V int, opts *Options) error {
	K, N := int64(opts.Beams()), int64(opts.MaxNewTokens)
	rows := int64(B) * K
	if K != 0 && rows/K != int64(B) {
		return fmt.Errorf("generate: %d prompts × %d beams overflows int64", B, K)
	}
	for _, d := range []int64{int64(V), int64(L) + N} {
		if d < 0 || (d != 0 && rows > math.MaxInt64/d) {
			return fmt.Errorf("generate: %d prompts × %d beams × %d (vocabulary or tokens) overflows int64", B, K, d)
		}
	}
	return nil
}

// Generate continues prompts ([B][L_b] ids, none empty) with dec: greedy
// decoding, sampling or beam search as opts say, until MaxNewTokens new
// ids, or until every row has met its EOS or Stop condition. Options are
// checked (Validate) and the sizes' products bounded before dec allocates
// its cache.
func Generate(ctx context.Context, dec Decoder, prompts [][]int32, opts Options) (*Result, error) {
	V := dec.VocabSize()
	if err := opts.Validate(V); err != nil {
		return nil, err
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("generate: no prompt to continue")
	}
	L := 0
	for r, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("generate: prompt %d is empty: generation needs at least one token to continue", r)
		}
		L = max(L, len(p))
	}
	if err := checkSizes(len(prompts), L, V, &opts); err != nil {
		return nil, err
	}
	logits, err := dec.Prefill(ctx, prompts, Room{Beams: opts.Beams(), NewTokens: opts.MaxNewTokens})
	if err != nil {
		return nil, err
	}
	if opts.Strategy == Beam {
		return beamSearch(ctx, dec, logits, prompts, &opts)
	}
	return sampleOrGreedy(ctx, dec, logits, prompts, &opts)
}
