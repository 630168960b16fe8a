package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/roformer-go/roformer/internal/boundedfile"
)

// The files of a Hugging Face tokenizer folder.
const (
	VocabFile         = "vocab.txt"
	ConfigFile        = "tokenizer_config.json"
	SpecialTokensFile = "special_tokens_map.json"
	TokenizerJSONFile = "tokenizer.json"
	modelConfigFile   = "config.json"
)

// Dir returns the folder Load reads the tokenizer of the model folder dir
// from: dir when it holds tokenizer_config.json or tokenizer.json; else
// dir/tokenizer when that holds tokenizer_config.json (the layout
// `roformer pretrain` writes); else dir.
func Dir(dir string) string {
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if !exists(filepath.Join(dir, ConfigFile)) && !exists(filepath.Join(dir, TokenizerJSONFile)) &&
		exists(filepath.Join(dir, "tokenizer", ConfigFile)) {
		return filepath.Join(dir, "tokenizer")
	}
	return dir
}

// Load reads the tokenizer of a model folder (from the folder Dir names),
// the way HF's AutoTokenizer.from_pretrained reads a slow tokenizer:
//
//   - the vocabulary from vocab.txt, or else from the WordPiece model of
//     tokenizer.json (whose ids must run 0 … n−1);
//   - options from tokenizer_config.json (do_lower_case, strip_accents,
//     tokenize_chinese_chars, never_split, model_max_length, the special
//     tokens), overridden by special_tokens_map.json; without
//     tokenizer_config.json, the BertNormalizer of tokenizer.json;
//   - the class from tokenizer_config.json's tokenizer_class
//     (RoFormerTokenizer[Fast] or BertTokenizer[Fast]); without it, RoFormer
//     when config.json says model_type "roformer" or is absent, Bert when it
//     names another model type. tokenizer.json never decides it: HF writes
//     a BertPreTokenizer there for RoFormer too, since jieba cannot be
//     serialized.
//
// Load caches: loading an unchanged folder again returns the same
// *Tokenizer (the files' sizes and modification times are compared).
func Load(dir string) (*Tokenizer, error) {
	abs, err := filepath.Abs(Dir(dir))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	stamp := folderStamp(abs)
	cacheMu.Lock()
	if c, ok := cache[abs]; ok && c.stamp == stamp {
		cacheMu.Unlock()
		return c.tok, nil
	}
	cacheMu.Unlock()
	tok, err := load(abs)
	if err != nil {
		return nil, err
	}
	cacheMu.Lock()
	cache[abs] = cached{stamp, tok}
	cacheMu.Unlock()
	return tok, nil
}

type cached struct {
	stamp string
	tok   *Tokenizer
}

var (
	cacheMu sync.Mutex
	cache   = map[string]cached{}
)

// folderStamp identifies the state of the files Load reads.
func folderStamp(dir string) string {
	var b strings.Builder
	for _, name := range []string{VocabFile, ConfigFile, SpecialTokensFile, TokenizerJSONFile, modelConfigFile} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
			fmt.Fprintf(&b, "%s:%d:%d;", name, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

// tokenizerConfig is tokenizer_config.json. Special tokens may be strings
// or AddedToken objects ({"content": ..., "__type": "AddedToken"}).
type tokenizerConfig struct {
	TokenizerClass          *string      `json:"tokenizer_class"`
	DoLowerCase             *bool        `json:"do_lower_case"`
	StripAccents            *bool        `json:"strip_accents"`
	TokenizeChineseChars    *bool        `json:"tokenize_chinese_chars"`
	NeverSplit              []string     `json:"never_split"`
	ModelMaxLength          *json.Number `json:"model_max_length"`
	UnkToken                *addedToken  `json:"unk_token"`
	SepToken                *addedToken  `json:"sep_token"`
	PadToken                *addedToken  `json:"pad_token"`
	ClsToken                *addedToken  `json:"cls_token"`
	MaskToken               *addedToken  `json:"mask_token"`
	AdditionalSpecialTokens []addedToken `json:"additional_special_tokens"`
	DoBasicTokenize         *bool        `json:"do_basic_tokenize"`
}

// addedToken is a special token written as a string or as an object.
type addedToken struct{ Content string }

func (a *addedToken) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(b, &a.Content); err == nil {
		return nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("special token %s is neither a string nor an AddedToken object", b)
	}
	a.Content = obj.Content
	return nil
}

// specialTokensMap is special_tokens_map.json.
type specialTokensMap struct {
	UnkToken                *addedToken  `json:"unk_token"`
	SepToken                *addedToken  `json:"sep_token"`
	PadToken                *addedToken  `json:"pad_token"`
	ClsToken                *addedToken  `json:"cls_token"`
	MaskToken               *addedToken  `json:"mask_token"`
	AdditionalSpecialTokens []addedToken `json:"additional_special_tokens"`
}

// hfTokenizerJSON is the part of a tokenizers-library tokenizer.json that a
// WordPiece tokenizer needs.
type hfTokenizerJSON struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer *struct {
		Type               string `json:"type"`
		CleanText          *bool  `json:"clean_text"`
		HandleChineseChars *bool  `json:"handle_chinese_chars"`
		StripAccents       *bool  `json:"strip_accents"`
		Lowercase          *bool  `json:"lowercase"`
	} `json:"normalizer"`
	Model struct {
		Type                    string         `json:"type"`
		UnkToken                string         `json:"unk_token"`
		ContinuingSubwordPrefix *string        `json:"continuing_subword_prefix"`
		MaxInputCharsPerWord    int            `json:"max_input_chars_per_word"`
		Vocab                   wordPieceVocab `json:"vocab"`
	} `json:"model"`
}

// Limits on the JSON files of a tokenizer folder, far above any real one
// (tokenizer.json: a few MB, 33 MB for the largest BPE vocabularies;
// tokenizer_config.json and the others: a few KB).
const (
	MaxTokenizerJSONBytes = 256 << 20 // tokenizer.json
	MaxSmallJSONBytes     = 16 << 20  // tokenizer_config.json, special_tokens_map.json, config.json
)

// wordPieceVocab is tokenizer.json's model.vocab, token → id, decoded one
// entry at a time so that a vocabulary of more than MaxVocabTokens tokens is
// refused before it is all held. A repeated token keeps its last id, as
// json.Unmarshal into a map does.
type wordPieceVocab map[string]int

func (v *wordPieceVocab) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("model.vocab is not an object of token → id")
	}
	m := wordPieceVocab{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("model.vocab: %w", err)
		}
		tok, _ := t.(string)
		var num json.Number
		if err := dec.Decode(&num); err != nil {
			return fmt.Errorf("model.vocab: the id of %.40q is not a number", tok)
		}
		id, err := strconv.Atoi(num.String())
		if err != nil || id < 0 || id >= maxVocabTokens {
			return fmt.Errorf("model.vocab: the id %.40s of %.40q is not an integer in [0, %d) (MaxVocabTokens)", num, tok, maxVocabTokens)
		}
		m[tok] = id
		if len(m) > maxVocabTokens {
			return fmt.Errorf("model.vocab has more than %d tokens (MaxVocabTokens)", maxVocabTokens)
		}
	}
	*v = m
	return nil
}

// readLimited reads the file at path if it is at most limit bytes long;
// ok is false when it does not exist.
func readLimited(path string, limit int64) (data []byte, ok bool, err error) {
	data, err = boundedfile.Read(path, limit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("tokenizer: %w", err)
	}
	return data, true, nil
}

// readJSON decodes the file at path into v if it exists, refusing a file
// over MaxTokenizerJSONBytes (tokenizer.json) or MaxSmallJSONBytes (the
// others).
func readJSON(path string, v any) (bool, error) {
	limit := int64(MaxSmallJSONBytes)
	if filepath.Base(path) == TokenizerJSONFile {
		limit = MaxTokenizerJSONBytes
	}
	raw, ok, err := readLimited(path, limit)
	if !ok || err != nil {
		return false, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return true, nil
}

// load reads dir without the cache.
func load(dir string) (*Tokenizer, error) {
	var tc tokenizerConfig
	hasTC, err := readJSON(filepath.Join(dir, ConfigFile), &tc)
	if err != nil {
		return nil, err
	}
	var tj hfTokenizerJSON
	hasTJ, err := readJSON(filepath.Join(dir, TokenizerJSONFile), &tj)
	if err != nil {
		return nil, err
	}
	cfg := DefaultConfig(RoFormer)
	if cfg.Kind, err = loadKind(dir, &tc, hasTC); err != nil {
		return nil, err
	}
	v, err := loadVocab(dir, &tj, hasTJ)
	if err != nil {
		return nil, err
	}
	// Options: tokenizer.json's normalizer, then tokenizer_config.json,
	// then special_tokens_map.json.
	if hasTJ {
		if err := tj.apply(&cfg, filepath.Join(dir, TokenizerJSONFile)); err != nil {
			return nil, err
		}
	}
	if hasTC {
		if err := tc.apply(&cfg, filepath.Join(dir, ConfigFile)); err != nil {
			return nil, err
		}
	}
	var sm specialTokensMap
	if ok, err := readJSON(filepath.Join(dir, SpecialTokensFile), &sm); err != nil {
		return nil, err
	} else if ok {
		applySpecial(&cfg, sm.UnkToken, sm.SepToken, sm.PadToken, sm.ClsToken, sm.MaskToken, sm.AdditionalSpecialTokens)
	}
	tok, err := New(v, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return tok, nil
}

// loadKind returns the tokenizer class: tokenizer_config.json's
// tokenizer_class, else Bert when config.json names a model type other than
// roformer, else RoFormer.
func loadKind(dir string, tc *tokenizerConfig, hasTC bool) (Kind, error) {
	if hasTC && tc.TokenizerClass != nil {
		k, err := ParseKind(*tc.TokenizerClass)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
		}
		return k, nil
	}
	var mc struct {
		ModelType string `json:"model_type"`
	}
	hasMC, err := readJSON(filepath.Join(dir, modelConfigFile), &mc)
	if err != nil {
		return 0, err
	}
	if hasMC && mc.ModelType != "" && mc.ModelType != "roformer" {
		return Bert, nil
	}
	return RoFormer, nil
}

// loadVocab reads vocab.txt, else the WordPiece vocabulary of
// tokenizer.json.
func loadVocab(dir string, tj *hfTokenizerJSON, hasTJ bool) (*Vocab, error) {
	vocabPath := filepath.Join(dir, VocabFile)
	if _, err := os.Stat(vocabPath); err == nil {
		return LoadVocab(vocabPath)
	}
	if hasTJ {
		v, err := vocabFromTokenizerJSON(tj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, TokenizerJSONFile), err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("tokenizer: %s has neither %s nor %s", dir, VocabFile, TokenizerJSONFile)
}

// apply sets cfg from tokenizer.json (read from path): its BertNormalizer
// and its WordPiece model's unk_token and max_input_chars_per_word.
func (tj *hfTokenizerJSON) apply(cfg *Config, path string) error {
	if n := tj.Normalizer; n != nil && n.Type == "BertNormalizer" {
		if n.Lowercase != nil {
			cfg.DoLowerCase = *n.Lowercase
		}
		cfg.StripAccents = n.StripAccents
		if n.HandleChineseChars != nil {
			cfg.TokenizeChineseChars = *n.HandleChineseChars
		}
	}
	if tj.Model.UnkToken != "" {
		cfg.UnkToken = tj.Model.UnkToken
	}
	if n := tj.Model.MaxInputCharsPerWord; n > MaxWordChars {
		return fmt.Errorf("tokenizer: %s: model.max_input_chars_per_word %d is more than the limit of %d", path, n, MaxWordChars)
	} else if n > 0 {
		cfg.MaxInputCharsPerWord = n
	}
	if p := tj.Model.ContinuingSubwordPrefix; p != nil && *p != continuationPrefix {
		return fmt.Errorf("%w: %s: continuing_subword_prefix %q (only %q)", ErrUnsupported, path, *p, continuationPrefix)
	}
	return nil
}

// apply sets cfg from tokenizer_config.json (read from path).
func (tc *tokenizerConfig) apply(cfg *Config, path string) error {
	if tc.DoBasicTokenize != nil && !*tc.DoBasicTokenize {
		return fmt.Errorf("%w: %s: do_basic_tokenize false", ErrUnsupported, path)
	}
	if tc.DoLowerCase != nil {
		cfg.DoLowerCase = *tc.DoLowerCase
	}
	if tc.StripAccents != nil {
		cfg.StripAccents = tc.StripAccents
	}
	if tc.TokenizeChineseChars != nil {
		cfg.TokenizeChineseChars = *tc.TokenizeChineseChars
	}
	cfg.NeverSplit = tc.NeverSplit
	if tc.ModelMaxLength != nil {
		n, err := parseModelMaxLength(*tc.ModelMaxLength)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		cfg.ModelMaxLength = n
	}
	applySpecial(cfg, tc.UnkToken, tc.SepToken, tc.PadToken, tc.ClsToken, tc.MaskToken, tc.AdditionalSpecialTokens)
	return nil
}

func applySpecial(cfg *Config, unk, sep, pad, cls, mask *addedToken, extra []addedToken) {
	for _, s := range []struct {
		from *addedToken
		to   *string
	}{{unk, &cfg.UnkToken}, {sep, &cfg.SepToken}, {pad, &cfg.PadToken}, {cls, &cfg.ClsToken}, {mask, &cfg.MaskToken}} {
		if s.from != nil && s.from.Content != "" {
			*s.to = s.from.Content
		}
	}
	if extra != nil {
		cfg.AdditionalSpecialTokens = cfg.AdditionalSpecialTokens[:0]
		for _, a := range extra {
			if a.Content != "" {
				cfg.AdditionalSpecialTokens = append(cfg.AdditionalSpecialTokens, a.Content)
			}
		}
	}
}

// MaxModelMaxLength is the largest model_max_length taken as a limit;
// larger values mean none, as HF's int(1e30) does (no model takes 2^24
// tokens, and padding to the limit would allocate it).
const MaxModelMaxLength = 1 << 24

// parseModelMaxLength reads model_max_length; HF writes int(1e30) (or a
// larger value) for "no limit", which maps to 0, as does any value over
// MaxModelMaxLength.
func parseModelMaxLength(n json.Number) (int, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil && i >= 0 {
		if i > MaxModelMaxLength {
			return 0, nil
		}
		return int(i), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return 0, fmt.Errorf("tokenizer: model_max_length %s is not a non-negative number", n)
	}
	if f > MaxModelMaxLength {
		return 0, nil // VERY_LARGE_INTEGER: no limit
	}
	return int(f), nil
}

func vocabFromTokenizerJSON(tj *hfTokenizerJSON) (*Vocab, error) {
	if tj.Model.Type != "WordPiece" {
		return nil, fmt.Errorf("%w: tokenizer.json model type %q (only WordPiece)", ErrUnsupported, tj.Model.Type)
	}
	byID := map[int]string{}
	for tok, id := range tj.Model.Vocab {
		byID[id] = tok
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || a.ID >= maxVocabTokens {
			return nil, fmt.Errorf("%w: tokenizer.json added_tokens: the id %d of %.40q is not in [0, %d) (MaxVocabTokens)", ErrBadVocab, a.ID, a.Content, maxVocabTokens)
		}
		if _, ok := byID[a.ID]; !ok {
			byID[a.ID] = a.Content
		}
	}
	tokens := make([]string, len(byID))
	for id, tok := range byID {
		if id < 0 || id >= len(byID) {
			return nil, fmt.Errorf("%w: ids are not 0 … %d (found id %d for %q)", ErrBadVocab, len(byID)-1, id, tok)
		}
		tokens[id] = tok
	}
	return NewVocab(tokens)
}

// Save writes the tokenizer to dir (created if needed) as HF's
// save_pretrained does: vocab.txt, tokenizer_config.json,
// special_tokens_map.json and a WordPiece tokenizer.json. For a RoFormer
// tokenizer, tokenizer.json carries a BertPreTokenizer like HF's (jieba
// cannot be written there); tokenizer_config.json names RoFormerTokenizer,
// which is what Load and HF go by.
func (t *Tokenizer) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if err := t.vocab.Save(filepath.Join(dir, VocabFile)); err != nil {
		return err
	}
	var strip any // null follows do_lower_case
	if t.cfg.StripAccents != nil {
		strip = *t.cfg.StripAccents
	}
	// HF writes VERY_LARGE_INTEGER = int(1e30) for "no limit".
	var maxLen any = json.Number("1000000000000000019884624838656")
	if t.cfg.ModelMaxLength > 0 {
		maxLen = t.cfg.ModelMaxLength
	}
	var never any // null when empty
	if len(t.cfg.NeverSplit) > 0 {
		never = t.cfg.NeverSplit
	}
	tc := map[string]any{
		"tokenizer_class":              t.cfg.Kind.String(),
		"do_lower_case":                t.cfg.DoLowerCase,
		"do_basic_tokenize":            true,
		"strip_accents":                strip,
		"tokenize_chinese_chars":       t.cfg.TokenizeChineseChars,
		"never_split":                  never,
		"model_max_length":             maxLen,
		"clean_up_tokenization_spaces": true,
	}
	sm := map[string]any{}
	for _, s := range []struct{ key, tok string }{
		{"unk_token", t.cfg.UnkToken}, {"sep_token", t.cfg.SepToken}, {"pad_token", t.cfg.PadToken},
		{"cls_token", t.cfg.ClsToken}, {"mask_token", t.cfg.MaskToken},
	} {
		if s.tok != "" {
			tc[s.key], sm[s.key] = s.tok, s.tok
		}
	}
	if len(t.cfg.AdditionalSpecialTokens) > 0 {
		tc["additional_special_tokens"] = t.cfg.AdditionalSpecialTokens
		sm["additional_special_tokens"] = t.cfg.AdditionalSpecialTokens
	}
	for _, f := range []struct {
		name string
		v    any
	}{{ConfigFile, tc}, {SpecialTokensFile, sm}} {
		b, err := json.MarshalIndent(f.v, "", "  ")
		if err != nil {
			return fmt.Errorf("tokenizer: %s: %w", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, TokenizerJSONFile), t.tokenizerJSON(), 0o644); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		cacheMu.Lock()
		delete(cache, abs)
		cacheMu.Unlock()
	}
	return nil
}

// tokenizerJSON renders the tokenizers-library form of the tokenizer:
// BertNormalizer, BertPreTokenizer, WordPiece model (vocab in id order),
// TemplateProcessing [CLS] $A [SEP] $B:1 [SEP]:1 and a WordPiece decoder.
func (t *Tokenizer) tokenizerJSON() []byte {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var b bytes.Buffer
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	sep0 := ""
	for _, s := range t.SpecialTokens() {
		id, ok := t.vocab.ID(s)
		if !ok {
			continue
		}
		b.WriteString(sep0)
		sep0 = ","
		fmt.Fprintf(&b, "\n    {\"id\": %d, \"content\": %s, \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}", id, q(s))
	}
	strip := "null"
	if t.cfg.StripAccents != nil {
		strip = strconv.FormatBool(*t.cfg.StripAccents)
	}
	fmt.Fprintf(&b, "\n  ],\n  \"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": true, \"handle_chinese_chars\": %t, \"strip_accents\": %s, \"lowercase\": %t},\n",
		t.cfg.TokenizeChineseChars, strip, t.cfg.DoLowerCase)
	b.WriteString("  \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},\n")
	cls, sep := q(t.cfg.ClsToken), q(t.cfg.SepToken)
	fmt.Fprintf(&b, "  \"post_processor\": {\"type\": \"TemplateProcessing\", "+
		"\"single\": [{\"SpecialToken\": {\"id\": %[1]s, \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": %[2]s, \"type_id\": 0}}], "+
		"\"pair\": [{\"SpecialToken\": {\"id\": %[1]s, \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": %[2]s, \"type_id\": 0}}, {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}, {\"SpecialToken\": {\"id\": %[2]s, \"type_id\": 1}}], "+
		"\"special_tokens\": {%[1]s: {\"id\": %[1]s, \"ids\": [%[3]d], \"tokens\": [%[1]s]}, %[2]s: {\"id\": %[2]s, \"ids\": [%[4]d], \"tokens\": [%[2]s]}}},\n",
		cls, sep, t.clsID, t.sepID)
	b.WriteString("  \"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true},\n")
	fmt.Fprintf(&b, "  \"model\": {\"type\": \"WordPiece\", \"unk_token\": %s, \"continuing_subword_prefix\": \"##\", \"max_input_chars_per_word\": %d, \"vocab\": {",
		q(t.cfg.UnkToken), t.cfg.MaxInputCharsPerWord)
	seen := map[string]bool{}
	first := true
	for id, tok := range t.vocab.tokens {
		if seen[tok] { // a repeated token keeps its last id (as in ids)
			continue
		}
		if last, _ := t.vocab.ID(tok); last != id {
			continue
		}
		seen[tok] = true
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "\n    %s: %d", q(tok), id)
	}
	b.WriteString("\n  }}\n}\n")
	return b.Bytes()
}
