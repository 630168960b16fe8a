package pipeline

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// A RoFormer-Sim folder opened as every command opens it (its own head,
// causal-lm, from config.json) embeds as the reference computes Sim's
// similarity vectors: the UniLM mask over type-0 text (bidirectional) and
// the pooler, within 1e-4 of the family fixture's pooler_output.
func TestEmbedSimPoolerFixture(t *testing.T) {
	for r, row := range testutil.SimRows(t) {
		m, err := Open(row.Dir, OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Head != roformer.HeadCausalLM || m.EncoderMask() != roformer.MaskUniLM {
			t.Fatalf("row %d: head %s, mask %s; want causal-lm under the UniLM mask", r, m.Head, m.EncoderMask())
		}
		enc, err := m.Tokenizer.Encode(row.Text, tokenizer.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := tokenizer.Int32s(enc.IDs); !slices.Equal(got, row.IDs) {
			t.Fatalf("row %d: %q encodes to %v, the fixture's ids are %v", r, row.Text, got, row.IDs)
		}
		vecs, _, err := Embed(context.Background(), m.Model, m.Tokenizer, []EmbedInput{{Text: row.Text}}, EmbedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		testutil.AssertClose(t, "row pooler", vecs[0], row.Pooler, 1e-4, 0)
	}
}

// The same folder without its pooler is a plain causal LM (HF's
// RoFormerForCausalLM): it still encodes causally, so the [CLS] position
// sees only itself and every text gets the same CLS vector, where the Sim
// folder's differ.
func TestEmbedCausalLMStaysCausal(t *testing.T) {
	rows := testutil.SimRows(t)
	row := rows[0]
	l, err := roformer.Load(row.Dir, roformer.HeadCausalLM, roformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Encoder.Pooler = nil
	plain := t.TempDir()
	if err := l.Save(plain); err != nil {
		t.Fatal(err)
	}
	vocab, err := os.ReadFile(filepath.Join(row.Dir, "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plain, "vocab.txt"), vocab, 0o644); err != nil {
		t.Fatal(err)
	}
	texts := []EmbedInput{{Text: row.Text}, {Text: "w5 w6 w7"}}
	for _, c := range []struct {
		dir      string
		mask     roformer.EncoderMask
		sameCLS  bool
		poolWant Pooling
	}{{plain, roformer.MaskCausal, true, PoolMean}, {row.Dir, roformer.MaskUniLM, false, PoolPooler}} {
		m, err := Open(c.dir, OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m.EncoderMask() != c.mask {
			t.Fatalf("%s: mask %s, want %s", c.dir, m.EncoderMask(), c.mask)
		}
		o, err := EmbedOptions{}.WithDefaults(m.Model)
		if err != nil {
			t.Fatal(err)
		}
		if o.Pooling != c.poolWant {
			t.Errorf("%s: default pooling %s, want %s", c.dir, o.Pooling, c.poolWant)
		}
		vecs, _, err := Embed(context.Background(), m.Model, m.Tokenizer, texts, EmbedOptions{Pooling: PoolCLS})
		if err != nil {
			t.Fatal(err)
		}
		d := 0.0
		for j := range vecs[0] {
			d = max(d, math.Abs(float64(vecs[0][j]-vecs[1][j])))
		}
		if same := d < 1e-5; same != c.sameCLS {
			t.Errorf("%s (%s): the two texts' CLS vectors differ by %g; want equal: %v", c.dir, c.mask, d, c.sameCLS)
		}
	}
}
