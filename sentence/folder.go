package sentence

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/internal/boundedfile"
)

// The module types of modules.json this package runs.
const (
	TypeTransformer = "sentence_transformers.models.Transformer"
	TypePooling     = "sentence_transformers.models.Pooling"
	TypeDense       = "sentence_transformers.models.Dense"
	TypeNormalize   = "sentence_transformers.models.Normalize"
)

// Module is one entry of modules.json.
type Module struct {
	Idx  int    `json:"idx"`
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

// Step is one module after the pooling: a Dense layer, or (Dense nil)
// Normalize.
type Step struct {
	Dense *Dense
}

// IsNormalize says whether s is the Normalize module.
func (s Step) IsNormalize() bool { return s.Dense == nil }

// Folder is what a sentence-transformers folder says beyond its
// transformer: the modules' configuration and weights, the tokenizing
// options and the prompts.
type Folder struct {
	// Modules is modules.json as read (or as Save writes it).
	Modules []Module
	// TransformerPath is the Transformer module's folder relative to the
	// folder ("" for the folder itself, as sentence-transformers saves it
	// since v2; "0_Transformer" or similar before).
	TransformerPath string
	Pooling         Pooling
	// Steps are the modules after the pooling, in order.
	Steps []Step

	// MaxSeqLength (sentence_bert_config.json's max_seq_length) bounds the
	// tokens of a text, [CLS] and [SEP] included; sentence-transformers
	// truncates longer texts to it. 0: not given (InferMaxSeqLength fills
	// it in as sentence-transformers does; pipeline.Open calls it).
	MaxSeqLength int
	// DoLowerCase lowercases texts (as Python's str.lower) before they are
	// tokenized.
	DoLowerCase bool

	// Prompts maps a prompt's name to the text put before an input
	// (config_sentence_transformers.json); DefaultPromptName, when not
	// empty, is the one used when a caller names none.
	Prompts           map[string]string
	DefaultPromptName string
	// SimilarityFn is similarity_fn_name: "cosine", "dot", "euclidean" or
	// "manhattan"; "" when not given (sentence-transformers then uses
	// cosine).
	SimilarityFn string
	// Version is the sentence-transformers version that wrote the folder
	// (__version__.sentence_transformers), "" when not given.
	Version string
}

// OutDim returns the length of the folder's vectors.
func (f *Folder) OutDim() int {
	d := f.Pooling.OutDim()
	for _, s := range f.Steps {
		if s.Dense != nil {
			d = s.Dense.Out
		}
	}
	return d
}

// Normalizes says whether the last module is Normalize (the vectors have
// unit length).
func (f *Folder) Normalizes() bool {
	return len(f.Steps) > 0 && f.Steps[len(f.Steps)-1].IsNormalize()
}

// Prompt returns the text of the prompt named name, or of the default
// prompt when name is "" (then "" when the folder has none). An unknown
// name is an error that lists the folder's prompts.
func (f *Folder) Prompt(name string) (string, error) {
	if name == "" {
		name = f.DefaultPromptName
		if name == "" {
			return "", nil
		}
	}
	p, ok := f.Prompts[name]
	if !ok {
		names := make([]string, 0, len(f.Prompts))
		for n := range f.Prompts {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return "", fmt.Errorf("sentence: prompt %q: the folder has no prompts (config_sentence_transformers.json)", name)
		}
		return "", fmt.Errorf("sentence: prompt %q: the folder's prompts are %s", name, strings.Join(names, ", "))
	}
	return p, nil
}

// Limits of what Load reads. Real folders are far below them: a few
// modules, pooling and Dense configs of a few hundred bytes, prompts of a
// sentence, Dense layers of 768 × 768.
const (
	MaxConfigBytes = 1 << 20  // bytes of each JSON file
	MaxModules     = 64       // entries of modules.json
	MaxPrompts     = 1024     // prompts of config_sentence_transformers.json
	MaxPromptBytes = 64 << 10 // bytes of one prompt
	MaxDenseDim    = 1 << 16  // in_features and out_features of a Dense module
	MaxDenseParams = 1 << 26  // in_features × out_features
	MaxSeqLength   = 1 << 20  // max_seq_length
)

// ErrNotFolder is Load's error for a folder without modules.json (a plain
// model folder); it wraps fs.ErrNotExist.
var ErrNotFolder = fmt.Errorf("sentence: no modules.json (not a sentence-transformers folder): %w", fs.ErrNotExist)

// IsFolder says whether dir holds modules.json.
func IsFolder(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "modules.json"))
	return err == nil
}

// Load reads the sentence-transformers files of dir: modules.json, then
// each module's folder (Pooling's config.json; Dense's config.json and
// weights, model.safetensors or pytorch_model.bin), and beside the
// transformer sentence_bert_config.json and config_sentence_transformers.json
// (each optional). The modules must be a Transformer, a Pooling over its
// hidden state, then Dense and Normalize modules in any order; another
// module type is an error that names it. Every file is read within
// MaxConfigBytes (the weights within the checkpoint package's budget),
// and a Dense module's sizes are checked against its config before its
// weights are read. A folder without modules.json is ErrNotFolder.
//
// The sizes are checked against each other (each Dense module's
// in_features against the vector before it); the Pooling's dimension
// against the transformer is the caller's to check (Check).
func Load(dir string) (*Folder, error) {
	raw, err := boundedfile.Read(filepath.Join(dir, "modules.json"), MaxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFolder
	}
	if err != nil {
		return nil, fmt.Errorf("sentence: %w", err)
	}
	f := &Folder{}
	if err := json.Unmarshal(raw, &f.Modules); err != nil {
		return nil, fmt.Errorf("sentence: %s: %v", filepath.Join(dir, "modules.json"), err)
	}
	if err := f.loadModules(dir); err != nil {
		return nil, err
	}
	tdir := filepath.Join(dir, f.TransformerPath)
	if err := f.loadBertConfig(tdir); err != nil {
		return nil, err
	}
	// config_sentence_transformers.json sits at the top of the folder.
	if err := f.loadSTConfig(dir); err != nil {
		return nil, err
	}
	return f, nil
}

// modulePath returns the folder of module m inside dir, refusing paths
// that leave it.
func modulePath(dir string, m Module) (string, error) {
	if m.Path == "" {
		return dir, nil
	}
	if !filepath.IsLocal(m.Path) {
		return "", fmt.Errorf("sentence: %s: module %d path %q leaves the folder", filepath.Join(dir, "modules.json"), m.Idx, m.Path)
	}
	return filepath.Join(dir, m.Path), nil
}

func (f *Folder) loadModules(dir string) error {
	file := filepath.Join(dir, "modules.json")
	switch n := len(f.Modules); {
	case n == 0:
		return fmt.Errorf("sentence: %s lists no modules", file)
	case n > MaxModules:
		return fmt.Errorf("sentence: %s lists %d modules, more than the limit of %d", file, n, MaxModules)
	}
	ms := slices.Clone(f.Modules)
	slices.SortStableFunc(ms, func(a, b Module) int { return a.Idx - b.Idx })
	if ms[0].Type != TypeTransformer {
		return fmt.Errorf("sentence: %s: the first module is %q; this package runs a %s first", file, ms[0].Type, TypeTransformer)
	}
	if len(ms) < 2 || ms[1].Type != TypePooling {
		return fmt.Errorf("sentence: %s: a %s must follow the Transformer (the modules are %s)", file, TypePooling, typesOf(ms))
	}
	f.TransformerPath = ms[0].Path
	if _, err := modulePath(dir, ms[0]); err != nil {
		return err
	}
	dim := 0
	for _, m := range ms[1:] {
		p, err := modulePath(dir, m)
		if err != nil {
			return err
		}
		switch m.Type {
		case TypePooling:
			if dim != 0 {
				return fmt.Errorf("sentence: %s: a second Pooling module (%d); this package runs one", file, m.Idx)
			}
			if f.Pooling, err = loadPooling(p); err != nil {
				return err
			}
			dim = f.Pooling.OutDim()
		case TypeDense:
			d, err := loadDense(p, dim)
			if err != nil {
				return err
			}
			f.Steps = append(f.Steps, Step{Dense: d})
			dim = d.Out
		case TypeNormalize:
			f.Steps = append(f.Steps, Step{})
		default:
			return fmt.Errorf("sentence: %s: module %d is a %q; this package runs %s, then %s, %s and %s",
				file, m.Idx, m.Type, TypeTransformer, TypePooling, TypeDense, TypeNormalize)
		}
	}
	return nil
}

func typesOf(ms []Module) string {
	var ts []string
	for _, m := range ms {
		ts = append(ts, m.Type)
	}
	return strings.Join(ts, ", ")
}

// poolingConfig is 1_Pooling/config.json. sentence-transformers 2.2.2
// refuses the keys it does not know (weightedmean, lasttoken,
// include_prompt, which came later), so Save writes them only when they are
// not their default.
type poolingConfig struct {
	Dim           int   `json:"word_embedding_dimension"`
	CLS           bool  `json:"pooling_mode_cls_token"`
	Mean          bool  `json:"pooling_mode_mean_tokens"`
	Max           bool  `json:"pooling_mode_max_tokens"`
	MeanSqrtLen   bool  `json:"pooling_mode_mean_sqrt_len_tokens"`
	WeightedMean  bool  `json:"pooling_mode_weightedmean_tokens,omitempty"`
	LastToken     bool  `json:"pooling_mode_lasttoken,omitempty"`
	IncludePrompt *bool `json:"include_prompt,omitempty"`
}

func loadPooling(dir string) (Pooling, error) {
	file := filepath.Join(dir, "config.json")
	raw, err := boundedfile.Read(file, MaxConfigBytes)
	if err != nil {
		return Pooling{}, fmt.Errorf("sentence: Pooling: %w", err)
	}
	var c poolingConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return Pooling{}, fmt.Errorf("sentence: %s: %v", file, err)
	}
	p := Pooling{Dim: c.Dim, CLS: c.CLS, Mean: c.Mean, Max: c.Max, MeanSqrtLen: c.MeanSqrtLen,
		WeightedMean: c.WeightedMean, LastToken: c.LastToken, IncludePrompt: c.IncludePrompt == nil || *c.IncludePrompt}
	switch {
	case c.Dim <= 0 || c.Dim > MaxDenseDim:
		return Pooling{}, fmt.Errorf("sentence: %s: word_embedding_dimension %d: want 1 to %d", file, c.Dim, MaxDenseDim)
	case p.Count() == 0:
		return Pooling{}, fmt.Errorf("sentence: %s: no pooling_mode_* is true", file)
	}
	return p, nil
}

// denseConfig is 2_Dense/config.json.
type denseConfig struct {
	In         int    `json:"in_features"`
	Out        int    `json:"out_features"`
	Bias       *bool  `json:"bias,omitempty"`
	Activation string `json:"activation_function"`
}

// loadDense reads the Dense module in dir, which takes a vector of dim
// values.
func loadDense(dir string, dim int) (*Dense, error) {
	file := filepath.Join(dir, "config.json")
	raw, err := boundedfile.Read(file, MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("sentence: Dense: %w", err)
	}
	var c denseConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("sentence: %s: %v", file, err)
	}
	switch {
	case c.In <= 0 || c.In > MaxDenseDim || c.Out <= 0 || c.Out > MaxDenseDim:
		return nil, fmt.Errorf("sentence: %s: in_features %d and out_features %d: want 1 to %d", file, c.In, c.Out, MaxDenseDim)
	case c.In*c.Out > MaxDenseParams: // each ≤ 2^16: no overflow
		return nil, fmt.Errorf("sentence: %s: in_features × out_features = %d, more than the limit of %d", file, c.In*c.Out, MaxDenseParams)
	case c.In != dim:
		return nil, fmt.Errorf("sentence: %s: in_features %d, but the vector before it has %d values", file, c.In, dim)
	}
	if _, err := activation(c.Activation); err != nil {
		return nil, fmt.Errorf("sentence: %s: %v", file, err)
	}
	// The weights file is sized against the config before it is read: at
	// most 4 bytes a value (F32, as ST saves them), plus 1 MiB for the
	// headers and the pickle.
	limit := 4*int64(c.In*c.Out+c.Out) + 1<<20
	wpath, st, err := checkpoint.DirFile(dir)
	switch {
	case err != nil:
		return nil, fmt.Errorf("sentence: Dense module: %w", err)
	case strings.HasSuffix(wpath, ".index.json"):
		return nil, fmt.Errorf("sentence: %s: sharded Dense weights are not read (a Dense module of %d × %d is one file)", wpath, c.Out, c.In)
	case st.Size() > limit:
		return nil, fmt.Errorf("sentence: %s: %d bytes, more than the %d that a Dense module of %d × %d (with bias) can take", wpath, st.Size(), limit, c.Out, c.In)
	}
	ck, err := checkpoint.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sentence: Dense module: %w", err)
	}
	d := &Dense{In: c.In, Out: c.Out, Activation: c.Activation}
	if d.Activation == "" {
		d.Activation = DefaultActivation
	}
	w, ok := ck.Tensors["linear.weight"]
	if !ok || !slices.Equal(w.Shape, []int{c.Out, c.In}) {
		return nil, fmt.Errorf("sentence: %s: want linear.weight of shape [%d %d] (out_features, in_features); %s", ck.Path, c.Out, c.In, found(ck, "linear.weight"))
	}
	d.Weight = slices.Clone(w.Data)
	hasBias := c.Bias == nil || *c.Bias
	b, ok := ck.Tensors["linear.bias"]
	switch {
	case hasBias && (!ok || !slices.Equal(b.Shape, []int{c.Out})):
		return nil, fmt.Errorf("sentence: %s: want linear.bias of shape [%d]; %s", ck.Path, c.Out, found(ck, "linear.bias"))
	case !hasBias && ok:
		return nil, fmt.Errorf("sentence: %s: linear.bias is there, but %s says bias false", ck.Path, file)
	case hasBias:
		d.Bias = slices.Clone(b.Data)
	}
	for name := range ck.Tensors {
		if name != "linear.weight" && name != "linear.bias" {
			return nil, fmt.Errorf("sentence: %s: unexpected tensor %q (a Dense module holds linear.weight and linear.bias)", ck.Path, name)
		}
	}
	return d, nil
}

func found(ck *checkpoint.File, name string) string {
	if e, ok := ck.Tensors[name]; ok {
		return fmt.Sprintf("it has shape %v", e.Shape)
	}
	return "it is not there (the file holds " + strings.Join(ck.Names, ", ") + ")"
}

// bertConfig is sentence_bert_config.json.
type bertConfig struct {
	MaxSeqLength *int `json:"max_seq_length,omitempty"`
	DoLowerCase  bool `json:"do_lower_case"`
}

func (f *Folder) loadBertConfig(dir string) error {
	file := filepath.Join(dir, "sentence_bert_config.json")
	raw, err := boundedfile.Read(file, MaxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sentence: %w", err)
	}
	var c bertConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("sentence: %s: %v", file, err)
	}
	if c.MaxSeqLength != nil {
		if n := *c.MaxSeqLength; n < 1 || n > MaxSeqLength {
			return fmt.Errorf("sentence: %s: max_seq_length %d: want 1 to %d", file, n, MaxSeqLength)
		}
		f.MaxSeqLength = *c.MaxSeqLength
	}
	f.DoLowerCase = c.DoLowerCase
	return nil
}

// InferMaxSeqLength sets MaxSeqLength, when sentence_bert_config.json did
// not give it (null, or no such file), as sentence-transformers' Transformer
// module infers it (the same rule from v2.2.2 to v5):
//
//	max_seq_length = min(max_position_embeddings, model_max_length)
//
// where maxPositionEmbeddings is the transformer's config.json value and
// modelMaxLength the tokenizer's model_max_length (tokenizer_config.json).
// A tokenizer without one (0 here, as tokenizer.Config has it; int(1e30) in
// transformers) leaves max_position_embeddings. A max_seq_length the file
// gives is kept as it is, as sentence-transformers keeps it, and so is 0
// when maxPositionEmbeddings is not positive.
func (f *Folder) InferMaxSeqLength(maxPositionEmbeddings, modelMaxLength int) {
	if f.MaxSeqLength > 0 || maxPositionEmbeddings <= 0 {
		return
	}
	f.MaxSeqLength = maxPositionEmbeddings
	if modelMaxLength > 0 {
		f.MaxSeqLength = min(maxPositionEmbeddings, modelMaxLength)
	}
}

// stConfig is config_sentence_transformers.json.
type stConfig struct {
	Version           map[string]string `json:"__version__,omitempty"`
	Prompts           map[string]string `json:"prompts,omitempty"`
	DefaultPromptName *string           `json:"default_prompt_name,omitempty"`
	SimilarityFn      *string           `json:"similarity_fn_name,omitempty"`
}

// Similarity functions of similarity_fn_name.
var similarityFns = []string{"cosine", "dot", "euclidean", "manhattan"}

func (f *Folder) loadSTConfig(dir string) error {
	file := filepath.Join(dir, "config_sentence_transformers.json")
	raw, err := boundedfile.Read(file, MaxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sentence: %w", err)
	}
	var c stConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("sentence: %s: %v", file, err)
	}
	if len(c.Prompts) > MaxPrompts {
		return fmt.Errorf("sentence: %s: %d prompts, more than the limit of %d", file, len(c.Prompts), MaxPrompts)
	}
	for name, p := range c.Prompts {
		if len(p) > MaxPromptBytes {
			return fmt.Errorf("sentence: %s: prompt %q has %d bytes, more than the limit of %d", file, name, len(p), MaxPromptBytes)
		}
	}
	if len(c.Prompts) > 0 {
		f.Prompts = c.Prompts
	}
	f.Version = c.Version["sentence_transformers"]
	if c.DefaultPromptName != nil && *c.DefaultPromptName != "" {
		if _, ok := c.Prompts[*c.DefaultPromptName]; !ok {
			return fmt.Errorf("sentence: %s: default_prompt_name %q is not among the prompts", file, *c.DefaultPromptName)
		}
		f.DefaultPromptName = *c.DefaultPromptName
	}
	if c.SimilarityFn != nil && *c.SimilarityFn != "" {
		// sentence-transformers also takes the longer names.
		fn := strings.TrimSuffix(strings.TrimSuffix(*c.SimilarityFn, "_similarity"), "_distance")
		if fn == "dot_product" {
			fn = "dot"
		}
		if !slices.Contains(similarityFns, fn) {
			return fmt.Errorf("sentence: %s: similarity_fn_name %q: want one of %s", file, *c.SimilarityFn, strings.Join(similarityFns, ", "))
		}
		f.SimilarityFn = fn
	}
	return nil
}

// Check compares f with the transformer it follows: the Pooling's
// dimension must be its hidden size.
func (f *Folder) Check(hiddenSize int) error {
	if f.Pooling.Dim != hiddenSize {
		return fmt.Errorf("sentence: 1_Pooling/config.json: word_embedding_dimension %d, but the transformer's hidden_size is %d", f.Pooling.Dim, hiddenSize)
	}
	for i, s := range f.Steps {
		if s.Dense != nil {
			if err := s.Dense.Check(); err != nil {
				return fmt.Errorf("sentence: Dense module %d: %v", i, err)
			}
		}
	}
	return nil
}

// String describes f in one line: its modules, max_seq_length,
// lowercasing and prompts ("mean → Dense 16→8 Tanh → Normalize;
// max_seq_length 128; prompts passage, query (default query)").
func (f *Folder) String() string {
	var b strings.Builder
	b.WriteString(f.Pooling.Modes())
	if !f.Pooling.IncludePrompt {
		b.WriteString(" (without the prompt)")
	}
	for _, s := range f.Steps {
		if s.Dense == nil {
			b.WriteString(" → Normalize")
			continue
		}
		act := s.Dense.Activation
		if i := strings.LastIndexByte(act, '.'); i >= 0 {
			act = act[i+1:]
		}
		fmt.Fprintf(&b, " → Dense %d→%d %s", s.Dense.In, s.Dense.Out, act)
	}
	if f.MaxSeqLength > 0 {
		fmt.Fprintf(&b, "; max_seq_length %d", f.MaxSeqLength)
	}
	if f.DoLowerCase {
		b.WriteString("; lowercased")
	}
	if len(f.Prompts) > 0 {
		names := make([]string, 0, len(f.Prompts))
		for n := range f.Prompts {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "; prompts %s", strings.Join(names, ", "))
		if f.DefaultPromptName != "" {
			fmt.Fprintf(&b, " (default %s)", f.DefaultPromptName)
		}
	}
	if f.SimilarityFn != "" {
		fmt.Fprintf(&b, "; similarity %s", f.SimilarityFn)
	}
	return b.String()
}
