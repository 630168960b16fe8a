package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/roformer-go/roformer/internal/testutil"
)

// fixtureCase is one string of tokenizer_cases.json.
type fixtureCase struct {
	ID            int    `json:"id"`
	Category      string `json:"category"`
	Text          string `json:"text"`
	Tokens        []string
	TokenIDs      []int `json:"token_ids"`
	InputIDs      []int `json:"input_ids"`
	TokenTypeIDs  []int `json:"token_type_ids"`
	AttentionMask []int `json:"attention_mask"`
}

type fixtureFile struct {
	VocabSize     int            `json:"vocab_size"`
	SpecialTokens map[string]int `json:"special_tokens"`
	RoFormer      struct {
		Cases []fixtureCase `json:"cases"`
		Pairs []struct {
			TextA         string `json:"text_a"`
			TextB         string `json:"text_b"`
			InputIDs      []int  `json:"input_ids"`
			TokenTypeIDs  []int  `json:"token_type_ids"`
			AttentionMask []int  `json:"attention_mask"`
		} `json:"pairs"`
		Batch struct {
			Texts  []string `json:"texts"`
			Kwargs struct {
				Padding    bool `json:"padding"`
				Truncation bool `json:"truncation"`
				MaxLength  int  `json:"max_length"`
			} `json:"kwargs"`
			InputIDs      [][]int `json:"input_ids"`
			TokenTypeIDs  [][]int `json:"token_type_ids"`
			AttentionMask [][]int `json:"attention_mask"`
		} `json:"batch"`
	} `json:"roformer_tokenizer"`
	Bert struct {
		Cases []fixtureCase `json:"cases"`
	} `json:"bert_tokenizer"`
}

// loadFixtures reads ../shared/fixtures/hf-roformer/tokenizer (skipping when
// absent) and returns the cases and the folder.
func loadFixtures(t testing.TB) (*fixtureFile, string) {
	t.Helper()
	dir := testutil.Shared(t, "fixtures", "hf-roformer", "tokenizer")
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx fixtureFile
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	return &fx, dir
}

func fixtureTokenizer(t testing.TB, dir string, kind Kind) *Tokenizer {
	t.Helper()
	v, err := LoadVocab(filepath.Join(dir, "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(v, DefaultConfig(kind))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func checkCase(t *testing.T, tok *Tokenizer, c fixtureCase) {
	t.Helper()
	if got := tok.Tokenize(c.Text); !slices.Equal(got, c.Tokens) {
		t.Errorf("Tokenize(%q)\n got %q\nwant %q", c.Text, got, c.Tokens)
	}
	if got := tok.EncodeIDs(c.Text); !slices.Equal(got, c.TokenIDs) {
		t.Errorf("EncodeIDs(%q) = %v, want %v", c.Text, got, c.TokenIDs)
	}
	enc, err := tok.Encode(c.Text, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(enc.IDs, c.InputIDs) || !slices.Equal(enc.TypeIDs, c.TokenTypeIDs) || !slices.Equal(enc.AttentionMask, c.AttentionMask) {
		t.Errorf("Encode(%q):\n ids %v types %v mask %v\nwant %v %v %v", c.Text, enc.IDs, enc.TypeIDs, enc.AttentionMask, c.InputIDs, c.TokenTypeIDs, c.AttentionMask)
	}
	checkOffsets(t, c.Text, enc)
}

func TestFixturesRoFormer(t *testing.T) {
	fx, dir := loadFixtures(t)
	tok := fixtureTokenizer(t, dir, RoFormer)
	if tok.VocabSize() != fx.VocabSize {
		t.Fatalf("vocab size %d, want %d", tok.VocabSize(), fx.VocabSize)
	}
	for name, id := range fx.SpecialTokens {
		if got, ok := tok.TokenToID(name); !ok || got != id {
			t.Errorf("TokenToID(%s) = %d, %v; want %d", name, got, ok, id)
		}
	}
	if len(fx.RoFormer.Cases) != 42 {
		t.Errorf("%d RoFormer cases, the README promises 42", len(fx.RoFormer.Cases))
	}
	for _, c := range fx.RoFormer.Cases {
		t.Run(c.Category+"_"+itoa(c.ID), func(t *testing.T) { checkCase(t, tok, c) })
	}
	for i, p := range fx.RoFormer.Pairs {
		t.Run("pair_"+itoa(i), func(t *testing.T) {
			enc, err := tok.EncodePair(p.TextA, p.TextB, EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(enc.IDs, p.InputIDs) || !slices.Equal(enc.TypeIDs, p.TokenTypeIDs) || !slices.Equal(enc.AttentionMask, p.AttentionMask) {
				t.Errorf("EncodePair(%q, %q):\n ids %v types %v mask %v\nwant %v %v %v", p.TextA, p.TextB, enc.IDs, enc.TypeIDs, enc.AttentionMask, p.InputIDs, p.TokenTypeIDs, p.AttentionMask)
			}
		})
	}
	t.Run("batch", func(t *testing.T) {
		b := fx.RoFormer.Batch
		if !b.Kwargs.Padding || !b.Kwargs.Truncation {
			t.Fatalf("batch kwargs %+v: expected padding=True truncation=True", b.Kwargs)
		}
		inputs := make([]Input, len(b.Texts))
		for i, s := range b.Texts {
			inputs[i] = Input{Text: s}
		}
		encs, err := tok.EncodeBatch(inputs, EncodeOptions{MaxLength: b.Kwargs.MaxLength, Truncation: TruncateLongestFirst, Padding: PadLongest})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range encs {
			if !slices.Equal(e.IDs, b.InputIDs[i]) || !slices.Equal(e.TypeIDs, b.TokenTypeIDs[i]) || !slices.Equal(e.AttentionMask, b.AttentionMask[i]) {
				t.Errorf("batch row %d (%q):\n ids %v types %v mask %v\nwant %v %v %v", i, b.Texts[i], e.IDs, e.TypeIDs, e.AttentionMask, b.InputIDs[i], b.TokenTypeIDs[i], b.AttentionMask[i])
			}
		}
	})
}

func TestFixturesBert(t *testing.T) {
	fx, dir := loadFixtures(t)
	tok := fixtureTokenizer(t, dir, Bert)
	if len(fx.Bert.Cases) != 21 {
		t.Errorf("%d Bert cases, the README promises 21", len(fx.Bert.Cases))
	}
	for _, c := range fx.Bert.Cases {
		t.Run(c.Category+"_"+itoa(c.ID), func(t *testing.T) { checkCase(t, tok, c) })
	}
}

// checkOffsets checks that every text token's offsets slice the text.
func checkOffsets(t *testing.T, text string, enc *Encoding) {
	t.Helper()
	for i, o := range enc.Offsets {
		if enc.SequenceIDs[i] < 0 {
			if o != [2]int{} {
				t.Errorf("special token %d (%q) has offsets %v, want [0 0]", i, enc.Tokens[i], o)
			}
			continue
		}
		if o[0] < 0 || o[1] > len(text) || o[0] >= o[1] {
			t.Errorf("token %d (%q): offsets %v out of text of %d bytes", i, enc.Tokens[i], o, len(text))
		}
	}
}

func itoa(i int) string {
	return string(appendInt(nil, i))
}

func appendInt(b []byte, i int) []byte {
	if i < 0 {
		b = append(b, '-')
		i = -i
	}
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// TestUnicodeCases compares with testdata/unicode_cases.json: random texts
// over many scripts, controls, marks, private-use and unassigned code points,
// tokenized by a Python restatement of the algorithm that uses CPython's str
// and unicodedata (what HF runs on) and jieba 0.42.1; see
// testdata/gen_unicode_cases.py.
func TestUnicodeCases(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "unicode_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Text     string   `json:"text"`
		Bert     []string `json:"bert"`
		RoFormer []string `json:"roformer"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	v, err := LoadVocab(filepath.Join("testdata", "unicode_vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kind{Bert, RoFormer} {
		tok, err := New(v, DefaultConfig(k))
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, c := range cases {
			want := c.Bert
			if k == RoFormer {
				want = c.RoFormer
			}
			got := tok.Tokenize(c.Text)
			if len(got) == 0 && len(want) == 0 {
				continue
			}
			if !slices.Equal(got, want) {
				if bad++; bad <= 5 {
					t.Errorf("%v case %d: Tokenize(%q)\n got %q\nwant %q", k, i, c.Text, got, want)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%v: %d of %d cases differ", k, bad, len(cases))
		}
	}
}
