package data

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
)

// PackOptions controls Pack.
type PackOptions struct {
	SeqLen  int // T: the length of every sequence, [CLS] and [SEP] included; at least 3
	Workers int // goroutines that tokenize documents; 0 or 1 tokenizes serially
}

// Packed is a corpus turned into sequences of token ids. Each sequence is
// [CLS] t1 … tn [SEP] with n ≤ SeqLen−2, unpadded.
type Packed struct {
	Seqs   [][]int32
	SeqLen int
	Tokens int // non-special tokens over all sequences
}

// Pack tokenizes every line of every document and packs the ids into
// sequences of at most SeqLen tokens, BERT-style: consecutive lines of a
// document fill one sequence, never across documents. With room
// R = SeqLen − 2 and a sequence holding n tokens, the next line of m tokens
// is appended when n + m ≤ R. Otherwise, when the sequence is at least half
// full (2n ≥ R) it is closed and the line starts the next one; when it is
// less than half full the line is split, its first R − n tokens closing this
// sequence. A line longer than R is thus cut into full sequences, and no
// sequence is less than half full except the last of a document. Blank lines
// are skipped. The result depends only on the inputs.
func Pack(docs []Document, enc Encoder, v Vocab, opt PackOptions) (*Packed, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if opt.SeqLen < 3 {
		return nil, fmt.Errorf("data: sequence length %d must be at least 3 ([CLS] token [SEP])", opt.SeqLen)
	}
	ids := make([][][]int, len(docs)) // document → line → ids
	errs := make([]error, len(docs))
	encode := func(d int) {
		for n, line := range strings.Split(docs[d].Text, "\n") {
			line = strings.TrimRight(line, "\r")
			if strings.TrimSpace(line) == "" {
				continue
			}
			t := enc.EncodeIDs(line)
			for _, id := range t {
				if id < 0 || id >= v.Size {
					errs[d] = fmt.Errorf("data: %s line %d: token id %d is outside the vocabulary [0, %d)",
						docs[d].Name, n+1, id, v.Size)
					return
				}
			}
			if len(t) > 0 {
				ids[d] = append(ids[d], t)
			}
		}
	}
	if opt.Workers <= 1 {
		for d := range docs {
			encode(d)
		}
	} else {
		next := make(chan int)
		var wg sync.WaitGroup
		for w := 0; w < opt.Workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for d := range next {
					encode(d)
				}
			}()
		}
		for d := range docs {
			next <- d
		}
		close(next)
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	p := &Packed{SeqLen: opt.SeqLen}
	room := opt.SeqLen - 2
	for _, lines := range ids {
		cur := make([]int32, 0, opt.SeqLen)
		flush := func() {
			if len(cur) == 0 {
				return
			}
			s := make([]int32, 0, len(cur)+2)
			s = append(s, int32(v.CLS))
			s = append(s, cur...)
			s = append(s, int32(v.SEP))
			p.Seqs = append(p.Seqs, s)
			p.Tokens += len(cur)
			cur = cur[:0]
		}
		for _, line := range lines {
			for len(line) > 0 {
				if len(cur)+len(line) <= room {
					cur = appendIDs(cur, line)
					break
				}
				if 2*len(cur) >= room {
					flush()
					continue
				}
				k := room - len(cur)
				cur = appendIDs(cur, line[:k])
				line = line[k:]
				flush()
			}
		}
		flush()
	}
	if len(p.Seqs) == 0 {
		return nil, fmt.Errorf("%w: the %d documents gave no tokens", ErrEmptyCorpus, len(docs))
	}
	return p, nil
}

func appendIDs(dst []int32, src []int) []int32 {
	for _, id := range src {
		dst = append(dst, int32(id))
	}
	return dst
}

// SplitEval holds out every k-th sequence (indices k−1, 2k−1, …) for
// evaluation and returns the rest for training, both in their original
// order. Taking every k-th sequence rather than the tail spreads the held-out
// set over all documents. k ≤ 0 holds out nothing; k = 1 is refused since
// it would leave nothing to train on.
func SplitEval(seqs [][]int32, k int) (train, eval [][]int32, err error) {
	if k == 1 {
		return nil, nil, fmt.Errorf("data: holding out every 1st sequence leaves no training data")
	}
	for i, s := range seqs {
		if k > 1 && i%k == k-1 {
			eval = append(eval, s)
		} else {
			train = append(train, s)
		}
	}
	if len(train) == 0 {
		return nil, nil, fmt.Errorf("%w: no training sequences", ErrEmptyCorpus)
	}
	return train, eval, nil
}

// Fingerprint returns a SHA-256 digest of the sequences (lengths and ids, in
// order), so a resumed run can check that it packs the same data.
func Fingerprint(seqs [][]int32) string {
	h := sha256.New()
	var b [4]byte
	for _, s := range seqs {
		binary.LittleEndian.PutUint32(b[:], uint32(len(s)))
		h.Write(b[:])
		for _, id := range s {
			binary.LittleEndian.PutUint32(b[:], uint32(id))
			h.Write(b[:])
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
