package pipeline

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/internal/testmodel"
	"github.com/roformer-go/roformer/model/roformer"
)

// sparseModel is a masked-LM model over the tiny words and n more, and a
// padded batch of rows of the given lengths (the rest of each row masked
// out).
func sparseModel(t *testing.T, n int, lengths []int) (*roformer.Model, *roformer.Batch) {
	t.Helper()
	words := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	for i := range n {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	T := 0
	for _, l := range lengths {
		T = max(T, l)
	}
	m, _ := testmodel.Tiny{Words: words, Seed: 9, Scale: 3, MaxPositions: max(T, 16)}.Build(t)
	B := len(lengths)
	b := &roformer.Batch{InputIDs: make([]int32, B*T), AttentionMask: make([]int32, B*T), B: B, T: T}
	for i, l := range lengths {
		for p := range l {
			b.InputIDs[i*T+p] = int32(5 + (i*37+p*11)%n)
			b.AttentionMask[i*T+p] = 1
		}
	}
	return m, b
}

// eachBackend runs f with each matrix-product backend of this machine;
// exact says whether a row's product does not depend on the rows computed
// beside it (go-asm and gonum), so that the LM head on a few rows gives the
// whole head's values bit for bit; the libraries (OpenBLAS, oneDNN) choose
// their kernels by the number of rows, and agree within rounding.
func eachBackend(t *testing.T, f func(t *testing.T, exact bool)) {
	for _, be := range blas.Available() {
		t.Run(strings.Fields(be.Name())[0], func(t *testing.T) {
			prev := blas.Set(be)
			defer blas.Set(prev)
			kind := blas.Chosen().Kind
			f(t, kind == blas.KindGo || kind == blas.KindGoAsm)
		})
	}
}

// same says whether got is want: bit for bit when exact, else within 1e-5
// relative.
func same(got, want float64, exact bool) bool {
	if exact {
		return math.Float64bits(got) == math.Float64bits(want)
	}
	return math.Abs(got-want) <= 1e-5*max(1, math.Abs(want))
}

// sparseReference is SparsePool as it was computed before the head ran in
// chunks: the whole head's [B, T, V] logits, maxima in float64.
func sparseReference(out *roformer.Output, mask []int32, i int) []float32 {
	T, V := out.Logits.Shape[1], out.Logits.Shape[2]
	best := make([]float64, V)
	for t := range T {
		if mask[i*T+t] == 0 {
			continue
		}
		for v, x := range out.Logits.Data[(i*T+t)*V : (i*T+t+1)*V] {
			if y := math.Log1p(math.Max(0, float64(x))); y > best[v] {
				best[v] = y
			}
		}
	}
	vec := make([]float32, V)
	for v, y := range best {
		vec[v] = float32(y)
	}
	return vec
}

// The chunked head gives the vectors of the whole head's logits (bit for
// bit on go-asm and gonum) for any chunk, padding left out; the errors name
// what is wrong.
func TestSparsePool(t *testing.T) {
	eachBackend(t, func(t *testing.T, exact bool) {
		ctx := context.Background()
		m, b := sparseModel(t, 60, []int{7, 3, 11, 1})
		full, err := m.Forward(ctx, b, nil, roformer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		enc, err := m.Forward(ctx, b, nil, roformer.Options{SkipHead: true})
		if err != nil {
			t.Fatal(err)
		}
		nonzero := 0
		for _, chunk := range []int{0, 1, 2, 5, 8, 22, 1000} {
			rows := []int{2, 0, 3}
			got, err := SparsePool(m, enc, b.AttentionMask, rows, chunk)
			if err != nil {
				t.Fatal(err)
			}
			for k, i := range rows {
				want := sparseReference(full, b.AttentionMask, i)
				for v := range want {
					if !same(float64(got[k][v]), float64(want[v]), exact) {
						t.Fatalf("chunk %d, row %d, entry %d: %v, the whole head's %v", chunk, i, v, got[k][v], want[v])
					}
					if chunk == 0 && want[v] != 0 {
						nonzero++
					}
				}
			}
		}
		if V := m.Config.VocabSize; nonzero == 0 || nonzero == 3*V {
			t.Errorf("%d of %d entries non-zero: the test cannot tell relu from none", nonzero, 3*V)
		}
		if _, err := SparsePool(m, enc, make([]int32, len(b.AttentionMask)), []int{0}, 4); err == nil {
			t.Error("an all-0 mask: no error")
		}
		if _, err := SparsePool(m, &roformer.Output{}, b.AttentionMask, []int{0}, 4); err == nil {
			t.Error("no hidden state: no error")
		}
		if _, err := SparsePool(m, enc, b.AttentionMask, []int{4}, 4); err == nil {
			t.Error("row 4 of 4: no error")
		}
		if _, err := SparsePool(m, enc, b.AttentionMask[1:], []int{0}, 4); err == nil {
			t.Error("a mask one position short: no error")
		}
	})
}

// SparsePool holds one chunk of logits, not the batch's tokens ×
// vocabulary: 8 rows of 120 tokens over 4,005 entries are 15 MB of logits,
// and a chunk of 64 positions 1 MB. Measured with TotalAlloc, the head's
// own activations included.
func TestSparsePoolAllocatesOneChunk(t *testing.T) {
	lengths := make([]int, 8)
	for i := range lengths {
		lengths[i] = 120
	}
	m, b := sparseModel(t, 4000, lengths)
	enc, err := m.Forward(context.Background(), b, nil, roformer.Options{SkipHead: true})
	if err != nil {
		t.Fatal(err)
	}
	V, chunk := m.Config.VocabSize, 64
	rows := []int{0, 1, 2, 3, 4, 5, 6, 7}
	if _, err := SparsePool(m, enc, b.AttentionMask, rows, chunk); err != nil { // warm: the kernels' pools
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := SparsePool(m, enc, b.AttentionMask, rows, chunk); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	all := int64(len(rows)*120*V) * 4
	// One chunk of logits, the vectors, and the head's activations (a
	// chunk × E each, per call).
	bound := int64(chunk*V)*4 + int64(len(rows)*V)*4 + 2<<20
	got := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("allocated %.1f MB; the batch's logits are %.1f MB; bound %.1f MB", float64(got)/1e6, float64(all)/1e6, float64(bound)/1e6)
	if got > bound {
		t.Errorf("SparsePool allocated %d bytes, over %d (one chunk of %d positions × %d, the vectors and 2 MiB); the batch's logits are %d", got, bound, chunk, V, all)
	}
}
