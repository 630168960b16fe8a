package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func vocabText() string { return strings.Join(testVocabTokens(), "\n") + "\n" }

func TestReadVocab(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"LF", "a\nb\n", []string{"a", "b"}},
		{"no final newline", "a\nb", []string{"a", "b"}},
		{"CRLF", "a\r\nb\r\n", []string{"a", "b"}},
		{"lone CR", "a\rb\n", []string{"a", "b"}},
		{"empty line is a token", "a\n\nb\n", []string{"a", "", "b"}},
		{"spaces kept", " a \n", []string{" a "}},
		{"empty file", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ReadVocab(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Tokens(); !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("tokens %q, want %q", got, tc.want)
			}
		})
	}
	// A repeated token keeps its last id; both ids decode to it.
	v, err := ReadVocab(strings.NewReader("x\ny\nx\n"))
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := v.ID("x"); id != 2 || v.Size() != 3 {
		t.Errorf("repeated token: id %d size %d, want 2 and 3", id, v.Size())
	}
	if _, err := ReadVocab(strings.NewReader("ok\n\xff\n")); !errors.Is(err, ErrBadVocab) {
		t.Errorf("invalid UTF-8: err = %v", err)
	}
	if _, err := NewVocab([]string{"a\nb"}); !errors.Is(err, ErrBadVocab) {
		t.Errorf("token with a newline: err = %v", err)
	}
	if _, err := LoadVocab(filepath.Join(t.TempDir(), "nope.txt")); err == nil {
		t.Error("missing file: want an error")
	}
	// Long lines survive the buffered reader.
	long := strings.Repeat("長", 40000)
	v, err = ReadVocab(strings.NewReader("a\n" + long + "\nb"))
	if err != nil || v.Size() != 3 {
		t.Fatalf("long line: %v, size %d", err, v.Size())
	}
	if tok, _ := v.Token(1); tok != long {
		t.Error("long line mangled")
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	texts := []string{"Hello, World! playing", "中国人今天", "Café [MASK] x", ""}
	for _, kind := range []Kind{Bert, RoFormer} {
		for _, edit := range []func(*Config){
			nil,
			func(c *Config) {
				c.DoLowerCase = false
				b := true
				c.StripAccents = &b
				c.TokenizeChineseChars = false
				c.ModelMaxLength = 512
				c.NeverSplit = []string{"c++"}
				c.AdditionalSpecialTokens = []string{"<x>"}
			},
		} {
			tok := newTestTokenizer(t, kind, edit)
			dir := t.TempDir()
			if err := tok.Save(dir); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{VocabFile, ConfigFile, SpecialTokensFile, TokenizerJSONFile} {
				if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
					t.Fatalf("Save did not write %s: %v", name, err)
				}
			}
			back, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			a, b := tok.Config(), back.Config()
			a.Segmenter, b.Segmenter = nil, nil
			if a.Kind != b.Kind || a.DoLowerCase != b.DoLowerCase || (a.StripAccents == nil) != (b.StripAccents == nil) ||
				a.TokenizeChineseChars != b.TokenizeChineseChars || a.ModelMaxLength != b.ModelMaxLength ||
				!slices.Equal(a.NeverSplit, b.NeverSplit) || !slices.Equal(a.AdditionalSpecialTokens, b.AdditionalSpecialTokens) ||
				a.UnkToken != b.UnkToken || a.MaskToken != b.MaskToken {
				t.Errorf("%v: config changed by Save/Load:\n%+v\n%+v", kind, a, b)
			}
			if !slices.Equal(tok.Vocab().Tokens(), back.Vocab().Tokens()) {
				t.Errorf("%v: vocabulary changed by Save/Load", kind)
			}
			for _, s := range texts {
				e1, _ := tok.Encode(s, EncodeOptions{})
				e2, _ := back.Encode(s, EncodeOptions{})
				if !slices.Equal(e1.IDs, e2.IDs) {
					t.Errorf("%v %q: %v after Save/Load, %v before", kind, s, e2.IDs, e1.IDs)
				}
			}
			// tokenizer.json alone carries the vocabulary and the normalizer.
			os.Remove(filepath.Join(dir, VocabFile))
			os.Remove(filepath.Join(dir, ConfigFile))
			os.Remove(filepath.Join(dir, SpecialTokensFile))
			fromJSON, err := Load(dir)
			if err != nil {
				t.Fatalf("%v: tokenizer.json only: %v", kind, err)
			}
			if !slices.Equal(fromJSON.Vocab().Tokens(), tok.Vocab().Tokens()) || fromJSON.Config().DoLowerCase != a.DoLowerCase {
				t.Errorf("%v: tokenizer.json only: vocabulary or lower-casing differ", kind)
			}
			var tj map[string]any
			raw, _ := os.ReadFile(filepath.Join(dir, TokenizerJSONFile))
			if err := json.Unmarshal(raw, &tj); err != nil {
				t.Fatalf("tokenizer.json is not JSON: %v", err)
			}
		}
	}
}

func TestLoadConfigVariants(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		check func(t *testing.T, tok *Tokenizer)
		err   error
	}{
		{"vocab only: RoFormer", map[string]string{}, func(t *testing.T, tok *Tokenizer) {
			if tok.Kind() != RoFormer || !tok.Config().DoLowerCase || tok.Config().ModelMaxLength != 0 {
				t.Errorf("kind %v lower %v", tok.Kind(), tok.Config().DoLowerCase)
			}
		}, nil},
		{"config.json of a BERT model", map[string]string{"config.json": `{"model_type": "bert"}`}, func(t *testing.T, tok *Tokenizer) {
			if tok.Kind() != Bert {
				t.Errorf("kind %v, want Bert", tok.Kind())
			}
		}, nil},
		{"config.json of a RoFormer model", map[string]string{"config.json": `{"model_type": "roformer"}`}, func(t *testing.T, tok *Tokenizer) {
			if tok.Kind() != RoFormer {
				t.Errorf("kind %v, want RoFormer", tok.Kind())
			}
		}, nil},
		{"class wins over config.json", map[string]string{"config.json": `{"model_type": "roformer"}`, ConfigFile: `{"tokenizer_class": "BertTokenizerFast"}`}, func(t *testing.T, tok *Tokenizer) {
			if tok.Kind() != Bert {
				t.Errorf("kind %v, want Bert", tok.Kind())
			}
		}, nil},
		{"HF's huge model_max_length and AddedToken objects", map[string]string{ConfigFile: `{"model_max_length": 1000000000000000019884624838656, "do_lower_case": false,
			"mask_token": {"__type": "AddedToken", "content": "[MASK]", "lstrip": true}, "strip_accents": null, "tokenizer_class": "RoFormerTokenizer"}`}, func(t *testing.T, tok *Tokenizer) {
			c := tok.Config()
			if c.ModelMaxLength != 0 || c.DoLowerCase || c.MaskToken != "[MASK]" {
				t.Errorf("config %+v", c)
			}
		}, nil},
		{"model_max_length 512", map[string]string{ConfigFile: `{"model_max_length": 512}`}, func(t *testing.T, tok *Tokenizer) {
			if tok.Config().ModelMaxLength != 512 {
				t.Errorf("model_max_length %d", tok.Config().ModelMaxLength)
			}
		}, nil},
		{"special_tokens_map overrides", map[string]string{ConfigFile: `{"unk_token": "[PAD]"}`, SpecialTokensFile: `{"unk_token": "[UNK]", "additional_special_tokens": ["中国"]}`}, func(t *testing.T, tok *Tokenizer) {
			if tok.UnkID() != 1 || !slices.Contains(tok.SpecialTokens(), "中国") {
				t.Errorf("unk id %d, specials %q", tok.UnkID(), tok.SpecialTokens())
			}
		}, nil},
		{"unknown class", map[string]string{ConfigFile: `{"tokenizer_class": "GPT2Tokenizer"}`}, nil, ErrUnsupported},
		{"do_basic_tokenize false", map[string]string{ConfigFile: `{"do_basic_tokenize": false}`}, nil, ErrUnsupported},
		{"bad special token", map[string]string{ConfigFile: `{"unk_token": 3}`}, nil, nil},
		{"missing unk in vocab", map[string]string{ConfigFile: `{"unk_token": "<unk>"}`}, nil, ErrBadVocab},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{VocabFile: vocabText()})
			writeFiles(t, dir, tc.files)
			tok, err := Load(dir)
			if tc.check == nil {
				if err == nil || tc.err != nil && !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, tok)
		})
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "vocab.txt") {
		t.Errorf("empty folder: err = %v", err)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{TokenizerJSONFile: `{"model": {"type": "BPE", "vocab": {}}}`})
	if _, err := Load(dir); !errors.Is(err, ErrUnsupported) {
		t.Errorf("BPE tokenizer.json: err = %v", err)
	}
}

func TestLoadCache(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{VocabFile: vocabText()})
	a, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("second Load of an unchanged folder did not return the cached tokenizer")
	}
	writeFiles(t, dir, map[string]string{ConfigFile: `{"tokenizer_class": "BertTokenizer"}`})
	future := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(dir, ConfigFile), future, future)
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c == a || c.Kind() != Bert {
		t.Error("Load after a change returned the stale tokenizer")
	}
}

// TestFixtureFolderLoad loads the shared fixture folder itself (vocab.txt
// only): RoFormer, as the fixtures were made.
func TestFixtureFolderLoad(t *testing.T) {
	fx, dir := loadFixtures(t)
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Kind() != RoFormer {
		t.Fatalf("kind %v, want RoFormer", tok.Kind())
	}
	for _, c := range fx.RoFormer.Cases {
		if got := tok.EncodeIDs(c.Text); !slices.Equal(got, c.TokenIDs) {
			t.Errorf("%q: %v, want %v", c.Text, got, c.TokenIDs)
		}
	}
}

// Load finds the tokenizer at the top of a model folder, or in its
// tokenizer/ subfolder (the layout `roformer pretrain` writes); Dir names
// the folder it read.
func TestLoadModelFolder(t *testing.T) {
	tok := newTestTokenizer(t, Bert, nil)
	top, nested := t.TempDir(), t.TempDir()
	if err := tok.Save(top); err != nil {
		t.Fatal(err)
	}
	if err := tok.Save(filepath.Join(nested, "tokenizer")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, from string }{{top, top}, {nested, filepath.Join(nested, "tokenizer")}} {
		got, err := Load(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		if from := Dir(c.dir); from != c.from || got.VocabSize() != tok.VocabSize() || got.Kind() != Bert {
			t.Errorf("Load(%s): from %s with %d tokens (%s), want %s with %d (bert)", c.dir, from, got.VocabSize(), got.Kind(), c.from, tok.VocabSize())
		}
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("an empty folder gave a tokenizer")
	}
}
