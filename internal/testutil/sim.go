package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SimRow is one row of the RoFormer-Sim pooler fixture
// (../shared/fixtures/roformer-family/sim_a) made into text: Dir is a copy
// of the Sim folder (config.json and model.safetensors as they are:
// RoFormerForCausalLM, is_decoder true, a pooler) with a vocab.txt under
// which Text encodes to exactly the fixture row's ids ([CLS] = 2, the row's
// words, and the row's last real id as [SEP]; padding dropped), and Pooler
// is the reference's pooler_output for the row [H].
type SimRow struct {
	Dir, Text string
	IDs       []int32
	Pooler    []float32
}

// SimRows returns the fixture's rows as SimRows (one folder each, since the
// rows end in different ids), or skips the test without ../shared.
func SimRows(t testing.TB) []SimRow {
	t.Helper()
	src := Shared(t, "fixtures", "roformer-family", "sim_a")
	var f struct {
		Pooler struct {
			Inputs struct {
				InputIDs      [][]int32 `json:"input_ids"`
				AttentionMask [][]int32 `json:"attention_mask"`
			} `json:"inputs"`
			Outputs map[string]struct {
				Shape []int     `json:"shape"`
				Data  []float32 `json:"data"`
			} `json:"outputs"`
		} `json:"pooler"`
	}
	ReadJSON(t, filepath.Join(src, "fixture.json"), &f)
	var cfg struct {
		VocabSize int `json:"vocab_size"`
	}
	ReadJSON(t, filepath.Join(src, "model", "config.json"), &cfg)
	want := f.Pooler.Outputs["pooler_output"]
	rows := f.Pooler.Inputs.InputIDs
	if len(want.Shape) != 2 || want.Shape[0] != len(rows) || len(want.Data) != want.Shape[0]*want.Shape[1] {
		t.Fatalf("sim_a pooler_output has shape %v for %d rows", want.Shape, len(rows))
	}
	H := want.Shape[1]
	out := make([]SimRow, len(rows))
	for r, row := range rows {
		var ids []int32
		for i, id := range row {
			if f.Pooler.Inputs.AttentionMask[r][i] == 1 {
				ids = append(ids, id)
			}
		}
		sep := ids[len(ids)-1]
		if ids[0] != 2 || len(ids) < 3 {
			t.Fatalf("sim_a row %d: %v does not start with [CLS] = 2", r, ids)
		}
		vocab := make([]string, cfg.VocabSize)
		for i := range vocab {
			vocab[i] = fmt.Sprintf("w%d", i)
		}
		vocab[0], vocab[1], vocab[2], vocab[sep] = "[PAD]", "[UNK]", "[CLS]", "[SEP]"
		mask := cfg.VocabSize - 1
		for _, id := range ids {
			if int(id) == mask {
				t.Fatalf("sim_a row %d uses id %d, taken here for [MASK]", r, mask)
			}
		}
		vocab[mask] = "[MASK]"
		var words []string
		for _, id := range ids[1 : len(ids)-1] {
			words = append(words, vocab[id])
		}
		dir := t.TempDir()
		for _, name := range []string{"config.json", "model.safetensors"} {
			raw, err := os.ReadFile(filepath.Join(src, "model", name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(strings.Join(vocab, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out[r] = SimRow{Dir: dir, Text: strings.Join(words, " "), IDs: ids, Pooler: want.Data[r*H : (r+1)*H]}
	}
	return out
}
