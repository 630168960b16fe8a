package data

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// Batch is B sequences of length T, each slice [B*T] row-major: element
// (b, t) is at b*T + t.
type Batch struct {
	InputIDs      []int32 // masked token ids
	TokenTypeIDs  []int32 // segment ids, all 0 (single-segment MLM)
	AttentionMask []int32 // 1 for tokens, 0 for padding
	Labels        []int32 // original id at masked positions, IgnoreIndex (-100) elsewhere
	B, T          int
	// Seed is for the model's own randomness (dropout masks) on this batch:
	// a pure function of the loader seed and the batch's place in the
	// stream, so that a resumed run draws the same dropout without saving
	// any model state. It is 0 for evaluation batches.
	Seed uint64
}

// Labelled returns the number of positions whose label is not IgnoreIndex.
func (b *Batch) Labelled() int {
	n := 0
	for _, l := range b.Labels {
		if l != IgnoreIndex {
			n++
		}
	}
	return n
}

// Tokens returns the number of non-padding positions.
func (b *Batch) Tokens() int {
	n := 0
	for _, a := range b.AttentionMask {
		n += int(a)
	}
	return n
}

// newBatch builds a batch from rows (each at most T long), padding with PAD
// and masking with m.
func newBatch(rows [][]int32, T int, v *Vocab, m *Masker) *Batch {
	B := len(rows)
	b := &Batch{
		InputIDs:      make([]int32, B*T),
		TokenTypeIDs:  make([]int32, B*T),
		AttentionMask: make([]int32, B*T),
		Labels:        make([]int32, B*T),
		B:             B, T: T,
	}
	for r, s := range rows {
		in, lab, att := b.InputIDs[r*T:(r+1)*T], b.Labels[r*T:(r+1)*T], b.AttentionMask[r*T:(r+1)*T]
		m.Mask(in, lab, s)
		for t := range s {
			att[t] = 1
		}
		for t := len(s); t < T; t++ {
			in[t], lab[t] = int32(v.PAD), IgnoreIndex
		}
	}
	return b
}

// Position is where a Loader stands: the epoch and the index, within that
// epoch's shuffled order, of the next sequence to serve.
type Position struct {
	Epoch int
	Index int
}

// LoaderOptions controls a Loader.
type LoaderOptions struct {
	BatchSize int    // B, sequences per batch
	SeqLen    int    // T; every sequence must be at most this long
	Seed      uint64 // drives the epoch orders and the masks
	Mask      MaskOptions
}

// The PCG streams of the generators derived from the seed.
const (
	streamOrder = 0x6f72646572 // "order", plus the epoch number
	streamMask  = 0x6d61736b   // "mask"
	streamEval  = 0x6576616c   // "eval"
)

// Loader serves training batches forever: each epoch visits every sequence
// once in an order that is a pure function of (Seed, epoch) — a Fisher–Yates
// permutation from PCG(Seed, streamOrder+epoch) — and a batch that reaches
// the end of an epoch continues into the next one. Masks are drawn when a
// batch is served (dynamic masking, as in RoBERTa), from a Masker seeded
// with Seed. The Loader's state is its Position and its Masker's generator.
type Loader struct {
	seqs  [][]int32
	v     Vocab
	opt   LoaderOptions
	pos   Position
	order []int // order of pos.Epoch
	mask  *Masker
}

// NewLoader returns a Loader at epoch 0, index 0.
func NewLoader(seqs [][]int32, v Vocab, opt LoaderOptions) (*Loader, error) {
	if len(seqs) == 0 {
		return nil, fmt.Errorf("%w: no sequences to load", ErrEmptyCorpus)
	}
	if opt.BatchSize < 1 || opt.SeqLen < 3 {
		return nil, fmt.Errorf("data: batch size %d and sequence length %d must be >= 1 and >= 3", opt.BatchSize, opt.SeqLen)
	}
	for i, s := range seqs {
		if len(s) > opt.SeqLen {
			return nil, fmt.Errorf("data: sequence %d has %d tokens, more than the sequence length %d", i, len(s), opt.SeqLen)
		}
	}
	m, err := NewMasker(v, opt.Mask, opt.Seed, streamMask)
	if err != nil {
		return nil, err
	}
	l := &Loader{seqs: seqs, v: v, opt: opt, mask: m}
	l.order = epochOrder(len(seqs), opt.Seed, 0)
	return l, nil
}

// epochOrder returns the permutation of n sequences for one epoch.
func epochOrder(n int, seed uint64, epoch int) []int {
	return rand.New(rand.NewPCG(seed, streamOrder+uint64(epoch))).Perm(n)
}

// Len returns the number of sequences per epoch.
func (l *Loader) Len() int { return len(l.seqs) }

// Position returns the position of the next sequence.
func (l *Loader) Position() Position { return l.pos }

// Next returns the next batch of BatchSize sequences and advances.
func (l *Loader) Next() *Batch {
	seed := batchSeed(l.opt.Seed, l.pos)
	rows := make([][]int32, l.opt.BatchSize)
	for r := range rows {
		rows[r] = l.seqs[l.order[l.pos.Index]]
		l.pos.Index++
		if l.pos.Index == len(l.seqs) {
			l.pos = Position{Epoch: l.pos.Epoch + 1}
			l.order = epochOrder(len(l.seqs), l.opt.Seed, l.pos.Epoch)
		}
	}
	b := newBatch(rows, l.opt.SeqLen, &l.v, l.mask)
	b.Seed = seed
	return b
}

// batchSeed mixes the loader seed and a stream position with SplitMix64's
// finaliser (Steele, Lea and Flood 2014), never returning 0.
func batchSeed(seed uint64, p Position) uint64 {
	x := seed ^ (uint64(p.Epoch)+1)*0x9E3779B97F4A7C15 ^ (uint64(p.Index)+1)*0xD1B54A32D192ED03
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	if x == 0 {
		x = 1
	}
	return x
}

// loaderMagic opens a serialised Loader state.
const loaderMagic = "RFLOAD\x00\x01"

// MarshalBinary returns the Loader state: magic, epoch and index (uint64
// little-endian), the number of sequences (to catch a different corpus) and
// the masking generator's state.
func (l *Loader) MarshalBinary() ([]byte, error) {
	g, err := l.mask.MarshalBinary()
	if err != nil {
		return nil, err
	}
	b := append([]byte(loaderMagic), make([]byte, 24)...)
	binary.LittleEndian.PutUint64(b[8:], uint64(l.pos.Epoch))
	binary.LittleEndian.PutUint64(b[16:], uint64(l.pos.Index))
	binary.LittleEndian.PutUint64(b[24:], uint64(len(l.seqs)))
	return append(b, g...), nil
}

// UnmarshalBinary restores a state from MarshalBinary. The Loader must have
// been built over the same sequences with the same options.
func (l *Loader) UnmarshalBinary(b []byte) error {
	if len(b) < 32 || string(b[:8]) != loaderMagic {
		return fmt.Errorf("data: not a loader state (%d bytes, bad magic)", len(b))
	}
	epoch := int(binary.LittleEndian.Uint64(b[8:]))
	index := int(binary.LittleEndian.Uint64(b[16:]))
	if n := int(binary.LittleEndian.Uint64(b[24:])); n != len(l.seqs) {
		return fmt.Errorf("data: loader state is for %d sequences, this corpus has %d", n, len(l.seqs))
	}
	if index < 0 || index >= len(l.seqs) || epoch < 0 {
		return fmt.Errorf("data: loader state position epoch %d index %d is out of range", epoch, index)
	}
	if err := l.mask.UnmarshalBinary(b[32:]); err != nil {
		return err
	}
	l.pos = Position{Epoch: epoch, Index: index}
	l.order = epochOrder(len(l.seqs), l.opt.Seed, epoch)
	return nil
}

// EvalBatches returns up to n batches (all when n ≤ 0) of the evaluation
// sequences in their stored order, masked by a Masker seeded with
// (seed, streamEval). The result is a pure function of the arguments, so
// every evaluation of a run, resumed or not, scores the same masks. The last
// batch may have fewer than batchSize rows.
func EvalBatches(seqs [][]int32, v Vocab, batchSize, seqLen int, n int, seed uint64, opt MaskOptions) ([]*Batch, error) {
	if batchSize < 1 {
		return nil, fmt.Errorf("data: batch size %d must be >= 1", batchSize)
	}
	m, err := NewMasker(v, opt, seed, streamEval)
	if err != nil {
		return nil, err
	}
	var out []*Batch
	for lo := 0; lo < len(seqs) && (n <= 0 || len(out) < n); lo += batchSize {
		rows := seqs[lo:min(lo+batchSize, len(seqs))]
		for i, s := range rows {
			if len(s) > seqLen {
				return nil, fmt.Errorf("data: eval sequence %d has %d tokens, more than the sequence length %d", lo+i, len(s), seqLen)
			}
		}
		out = append(out, newBatch(rows, seqLen, &v, m))
	}
	return out, nil
}
