package roformer

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/roformer-go/roformer/blas"
	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/tensor"
)

// LoadOptions changes how Load builds a model.
type LoadOptions struct {
	Bind BindOptions
	// Extra tensors to bind besides the checkpoint's (for example head
	// weights kept elsewhere); they win over checkpoint tensors of the same name.
	Extra map[string]*tensor.Tensor
	// InitSeed seeds HF's initialisation of head weights that
	// Bind.AllowMissingHead lets the checkpoint lack, or of a NewHead.
	InitSeed uint64
	// NewHead starts the head afresh with HF's initialisation (seeded by
	// InitSeed) whatever head weights the checkpoint holds, as a fine-tune
	// that adds a head does: only the encoder comes from the checkpoint
	// (the new head's values win over the checkpoint's and Extra's).
	NewHead bool
	// ConfigOverride, when not nil, edits the configuration read from
	// config.json before the model is built (e.g. num_labels for a new head).
	ConfigOverride func(*Config)
	// Weights names the weight file to read instead of the automatic choice
	// (a .safetensors, .bin or .index.json path).
	Weights string
	// Precision of the inference products ("" is fp32); see SetPrecision.
	// A precision this machine cannot run is an error. "" loads an int8
	// folder (SaveQuantized) in int8 where the machine runs int8.
	Precision Precision
	// Inference, with Precision "" and a folder that is not int8, prepares
	// the layers as PrecisionFP32 does (oneDNN's packed weights, where
	// oneDNN is the backend) instead of leaving them as training uses
	// them: what a program that only runs the model wants (pipeline.Open).
	Inference bool
	// NoMap reads a safetensors checkpoint into memory instead of mapping
	// it (checkpoint.MapDir): for a program that loads many models one
	// after another, or whose model files may be truncated while it runs.
	NoMap bool
	// HeadFor, when not nil, chooses the head for Load's head "" from the
	// configuration (after ConfigOverride) instead of HeadForConfig: e.g. a
	// generator takes the config's LM head, else causal-LM.
	HeadFor func(*Config) Head
}

// Loaded is a model read from a folder, with what the loader saw.
type Loaded struct {
	*Model
	Dir        string
	Checkpoint string // the weight file used (model.safetensors wins over pytorch_model.bin)
	Format     string
	DTypes     map[string]int // tensors per stored dtype
	Report     *BindReport
}

// Load reads a Hugging Face model folder (config.json plus model.safetensors,
// model.safetensors.index.json, pytorch_model.bin or pytorch_model.bin.index.json)
// and returns the model with the given head; head "" is the one config.json's
// architectures name (HeadForConfig, or opts.HeadFor). A checkpoint without the head's
// weights is an error wrapping ErrHeadMissing, unless
// opts.Bind.AllowMissingHead or opts.NewHead is set (they are then
// initialised as HF does).
//
// The checkpoint is read before the model is allocated, and config.json's
// sizes are compared with its tensors first (Config.CheckShapes): a config
// that implies more parameters than the checkpoint holds, or shapes other
// than its tensors', is refused naming the tensor, the shape and the keys,
// without allocating a model of the config's size. With opts.NewHead the
// checkpoint's own weights of that head are left out of the comparison
// (the new head replaces them), and the new head too may be no larger than
// twice the checkpoint's values plus 2²⁰.
func Load(dir string, head Head, opts LoadOptions) (*Loaded, error) {
	cfgPath := filepath.Join(dir, "config.json")
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	if opts.ConfigOverride != nil {
		opts.ConfigOverride(&cfg)
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("roformer: %s after overrides: %w", cfgPath, err)
		}
	}
	switch {
	case head == "" && opts.HeadFor != nil:
		head = opts.HeadFor(&cfg)
	case head == "":
		head = HeadForConfig(&cfg)
	}
	if _, err := ParseHead(string(head)); err != nil {
		return nil, err
	}
	f, err := readWeights(dir, opts.Weights, !opts.NoMap)
	if err != nil {
		return nil, err
	}
	pairs, err := int8Pairs(f)
	if err != nil {
		return nil, err
	}
	var notes []string
	if len(pairs) > 0 && opts.Precision == "" {
		// an int8 folder runs in int8 unless asked otherwise, where it can
		if _, err := blas.Int8(); err == nil {
			opts.Precision = PrecisionInt8
		} else {
			notes = append(notes, fmt.Sprintf("int8 weights dequantized to float32: %v", err))
		}
	}
	if opts.Precision == "" && opts.Inference {
		opts.Precision = PrecisionFP32
	}
	keepInt8 := opts.Precision == PrecisionInt8
	// A mapped folder's BF16 linear weights stay where they lie until each
	// is prepared (no float32 copy), where the precision prepares them.
	keepBF16 := prepares(opts.Precision) && f.Mapped()
	src, bf16, err := fileTensors(f, pairs, keepInt8, keepBF16)
	if err != nil {
		return nil, err
	}
	dtypes := map[string]int{}
	for _, e := range f.Tensors {
		dtypes[e.DType]++
	}
	// A safetensors file's tensors tile it without overlapping, so each can
	// be a parameter's storage as it is (mapped, or just read); a torch
	// archive's may share storage (tied weights) and are copied.
	//
	// The query, key and value projections are copied into the one block
	// that runs them as one product (Layer.fusedWeights), whose sums
	// training and the float32 products rely on to the bit; only a model
	// whose products run prepared in another form (bf16, int8, oneDNN's
	// packed fp32: prepareMapped) keeps them where they lie, three layers.
	inPlace := map[string]bool{}
	if f.Format == checkpoint.FormatSafetensors {
		for name := range f.Tensors {
			if !isQKV(name) || prepares(opts.Precision) && f.Mapped() {
				inPlace[name] = true
			}
		}
	}
	for name, t := range opts.Extra {
		src[name] = t
		delete(inPlace, name)
	}
	if err := cfg.CheckShapes(head, fitShapes(&cfg, head, src, opts.NewHead)); err != nil {
		return nil, fmt.Errorf("roformer: %s does not fit %s: %w", cfgPath, f.Path, err)
	}
	m, err := New(cfg, head)
	if err != nil {
		return nil, err
	}
	if opts.Bind.AllowMissingHead || opts.NewHead {
		m.Init(opts.InitSeed)
	}
	if opts.NewHead {
		// The initialised head's own values win over the checkpoint's.
		for _, p := range m.Weights() {
			if !strings.HasPrefix(p.Name, "roformer.") {
				src[p.Name] = &tensor.Tensor{Shape: p.Shape, Data: p.Data}
				delete(inPlace, p.Name)
			}
		}
	}
	if !keepInt8 {
		pairs = nil
	}
	rep, err := m.bindChecked(src, f, opts, inPlace, pairs, bf16)
	if err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, notes...)
	return &Loaded{Model: m, Dir: dir, Checkpoint: f.Path, Format: f.Format, DTypes: dtypes, Report: rep}, nil
}

// readWeights reads the folder's weights, or the file weights names;
// mapped maps safetensors files (checkpoint.MapFile) instead.
func readWeights(dir, weights string, mapped bool) (*checkpoint.File, error) {
	switch {
	case mapped && weights == "":
		return checkpoint.MapDir(dir)
	case mapped && !strings.HasSuffix(weights, ".bin.index.json"):
		return checkpoint.MapFile(weights)
	case weights == "":
		return checkpoint.ReadDir(dir)
	case strings.HasSuffix(weights, ".index.json"):
		return checkpoint.ReadSharded(weights)
	case strings.HasSuffix(weights, ".safetensors"):
		return checkpoint.ReadSafetensors(weights)
	default:
		return checkpoint.ReadPyTorch(weights)
	}
}

// isQKV reports whether name is a query, key or value projection's tensor.
func isQKV(name string) bool {
	for _, p := range []string{".attention.self.query.", ".attention.self.key.", ".attention.self.value."} {
		if strings.Contains(name, p) {
			return true
		}
	}
	return false
}

// fileTensors returns f's tensors by name as float32 (decoding those a
// mapped file holds in another dtype), the int8 weights pairs names
// dequantized, or with their shapes only (no values) when keepInt8 is set
// (Load binds them as codes), their scales left out. The word embedding
// of a mapped file that stores it in BF16 has its shape only too, and so,
// with keepBF16, have the mapped BF16 tensors that may be linear layers'
// weights (2-D, NAME.weight, neither another embedding table nor the LM
// decoder); their bytes are returned by name (bindChecked keeps the word
// embedding's and a linear layer's, decodes any other's).
func fileTensors(f *checkpoint.File, pairs map[string]int8Pair, keepInt8, keepBF16 bool) (map[string]*tensor.Tensor, map[string][]byte, error) {
	src := make(map[string]*tensor.Tensor, len(f.Tensors))
	bf16 := map[string][]byte{}
	for name, e := range f.Tensors {
		if e.DType != "BF16" || e.Raw == nil || len(e.Shape) != 2 {
			// kept as float32 below
		} else if strings.HasSuffix(name, "embeddings.word_embeddings.weight") ||
			keepBF16 && strings.HasSuffix(name, ".weight") && !strings.Contains(name, "embed") && !strings.Contains(name, "decoder") {
			src[name] = &tensor.Tensor{Shape: e.Shape}
			bf16[name] = e.Raw
			continue
		}
		if q, ok := pairs[name]; ok {
			t := &tensor.Tensor{Shape: q.shape}
			if !keepInt8 {
				t.Data = make([]float32, len(q.codes))
				storedWeight{codes: q.codes, scale: q.scale}.values(t.Data, q.shape[1])
			}
			src[name] = t
			continue
		}
		if _, ok := pairs[strings.TrimSuffix(name, int8ScaleSuffix)]; ok {
			continue
		}
		data, err := e.Float32()
		if err != nil {
			return nil, nil, fmt.Errorf("roformer: %s: %w", f.Path, err)
		}
		src[name] = &tensor.Tensor{Shape: e.Shape, Data: data}
	}
	return src, bf16, nil
}

// fitShapes returns the shapes of src that CheckShapes compares with cfg:
// all of them, but for a new head without the checkpoint's weights of the
// same names (the new head's replace them).
func fitShapes(cfg *Config, head Head, src map[string]*tensor.Tensor, newHead bool) map[string][]int {
	shapes := make(map[string][]int, len(src))
	for name, t := range src {
		shapes[name] = t.Shape
	}
	if newHead {
		for _, w := range cfg.headWants(head) {
			delete(shapes, w.name)
		}
	}
	return shapes
}

// bindChecked enables the pooler when src holds one, binds src (read from
// the weight file f; the tensors inPlace names become the parameters'
// storage) and sets the precision, checking that every value is finite.
//
// The weights pairs names are bound as their int8 codes, and the linear
// layers' weights bf16 holds the bytes of as those BF16 bytes (the model's
// stored weights, prepared as they are), and their pages released.
func (m *Model) bindChecked(src map[string]*tensor.Tensor, f *checkpoint.File, opts LoadOptions, inPlace map[string]bool, pairs map[string]int8Pair, bf16 map[string][]byte) (*BindReport, error) {
	path := f.Path
	if _, ok := src["roformer.pooler.dense.weight"]; ok {
		m.EnablePooler()
	} else if _, ok := src["pooler.dense.weight"]; ok {
		m.EnablePooler()
	}
	rep, err := m.bind(src, opts.Bind, inPlace)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	inLinear := m.inLinear()
	store := func(w *tensor.Param, s storedWeight) {
		if m.stored == nil {
			m.stored = storedWeights{}
		}
		w.Data = make([]float32, 0, 1) // no values: a key of its own for the prepared layer
		m.stored[w] = s
	}
	for _, w := range m.Weights() {
		if f.Holds(checkpoint.Float32Bytes(w.Data)) {
			m.borrowed = append(m.borrowed, w)
		}
		key := w.Name
		if _, ok := src[key]; !ok {
			key = strings.TrimPrefix(w.Name, "roformer.")
		}
		if q, ok := pairs[key]; ok {
			store(w, storedWeight{codes: q.codes, scale: q.scale, linear: true})
		} else if raw, ok := bf16[key]; ok && src[key].Data == nil && len(raw) == 2*len(w.Data) {
			switch linear := inLinear(w.Data); {
			case w == m.Encoder.Embeddings.Word:
				if err := checkFiniteBF16(w, raw); err != nil {
					return nil, fmt.Errorf("%s: %w", path, err)
				}
				store(w, storedWeight{bf16: raw, linear: linear}) // linear: the tied LM decoder
			case linear:
				store(w, storedWeight{bf16: raw, linear: true})
			default:
				storedWeight{bf16: raw}.values(w.Data, 1)
			}
		}
	}
	for i := range m.Encoder.Layers {
		if L := &m.Encoder.Layers[i]; L.qkv != nil {
			if _, _, ok := L.fusedWeights(); !ok {
				L.qkv = nil // q, k and v are stored apart
			}
		}
	}
	if !prepares(opts.Precision) || !f.Mapped() {
		if err := m.checkFinite(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		// The check read every page; a lookup needs only its rows (a
		// product reads the whole weight: those stay).
		emb := &m.Encoder.Embeddings
		for _, w := range []*tensor.Param{emb.Word, emb.TokenType, emb.Position} {
			if w != nil && m.Head != HeadMaskedLM && m.Head != HeadCausalLM {
				f.Release(checkpoint.Float32Bytes(w.Data))
			}
		}
		if err := m.SetPrecision(opts.Precision); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	} else if err := m.prepareMapped(f, opts.Precision); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, q := range m.stored {
		f.Release(q.bytes())
	}
	return rep, nil
}

// prepareMapped sets precision p on a model whose weights lie in f's
// mapping, so that each weight is held once, in the form it runs in: every
// linear layer's weight is checked, prepared and its pages released one at
// a time (the load never holds the float32 file beside the prepared
// weights), the small parameters left in float32 (biases, norms) are
// copied out of the mapping, and the mapping's pages are released, the
// embedding tables' too: they stay where they lie, and a lookup reads
// again only its rows.
func (m *Model) prepareMapped(f *checkpoint.File, p Precision) error {
	emb := &m.Encoder.Embeddings
	tables := map[*tensor.Param]bool{emb.Word: true, emb.TokenType: true, emb.Position: true}
	linear := map[*float32]bool{}
	for _, l := range m.linears() {
		linear[&l.w[0]] = true
	}
	names := map[*float32]string{}
	for _, w := range m.Weights() {
		if len(w.Data) > 0 {
			names[&w.Data[0]] = fmt.Sprintf("parameter %s%v", w.Name, w.Shape)
		}
	}
	for _, w := range m.Weights() {
		if len(w.Data) > 0 && !linear[&w.Data[0]] || tables[w] {
			if err := checkFinite(w); err != nil {
				return err
			}
		}
	}
	hooks := prepHooks{
		before: func(w []float32) error { return checkFiniteValues(names[&w[0]], w) },
		after:  func(w []float32) { f.Release(checkpoint.Float32Bytes(w)) },
		stored: func(b []byte) { f.Release(b) },
	}
	if err := m.setPrecision(p, hooks); err != nil {
		return err
	}
	var keep [][]byte
	borrowed := m.borrowed[:0]
	for _, w := range m.borrowed {
		b := checkpoint.Float32Bytes(w.Data)
		switch {
		case linear[&w.Data[0]] && !tables[w]:
			borrowed = append(borrowed, w) // released, read again only by Save or training
		case tables[w]:
			borrowed = append(borrowed, w) // released: a lookup reads its rows again
		case len(b) >= 1<<20:
			keep = append(keep, b)
			borrowed = append(borrowed, w)
		default:
			w.Data = slices.Clone(w.Data)
		}
	}
	m.borrowed = borrowed
	f.ReleaseAll(keep...)
	return nil
}

// Save writes config.json and model.safetensors into dir (created if
// needed), in the form HF's from_pretrained loads: F32 tensors under their
// state-dict names, the tied decoder duplicates left out (as
// save_pretrained(safe_serialization=True) does), metadata format "pt".
// Each file is written atomically.
func (m *Model) Save(dir string) error { return m.save(dir, "", nil) }

// save writes config.json (with cfgEdit's changes) and model.safetensors
// holding entries made from the state dict by entry (nil: each tensor in
// float32, as Save writes it).
func (m *Model) save(dir, torchDtype string, entry func(name string, t *tensor.Tensor) []*checkpoint.Entry, cfgEdit ...func(*Config)) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("roformer: %w", err)
	}
	cfg := m.Config
	cfg.Architectures = []string{m.Head.HFClass()}
	cfg.IsDecoder = m.Config.IsDecoder || m.Head == HeadCausalLM
	if torchDtype != "" {
		cfg.TorchDtype = torchDtype
	} else if cfg.TorchDtype == "" || cfg.TorchDtype == "bfloat16" {
		cfg.TorchDtype = "float32"
	}
	if len(cfg.Extra) > 0 {
		cfg.Extra = maps.Clone(cfg.Extra)
		delete(cfg.Extra, "quantization_config") // written again by a quantized save only
	}
	for _, f := range cfgEdit {
		f(&cfg)
	}
	data, err := cfg.Marshal()
	if err != nil {
		return fmt.Errorf("roformer: encoding config.json: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "config.json"), data); err != nil {
		return fmt.Errorf("roformer: %w", err)
	}
	sd := m.StateDict()
	names := make([]string, 0, len(sd))
	for n := range sd {
		names = append(names, n)
	}
	sort.Strings(names)
	entries := make([]*checkpoint.Entry, 0, len(names))
	for _, n := range names {
		if entry == nil {
			entries = append(entries, &checkpoint.Entry{Name: n, DType: "F32", Shape: sd[n].Shape, Data: sd[n].Data})
		} else {
			entries = append(entries, entry(n, sd[n])...)
		}
	}
	return checkpoint.WriteSafetensors(filepath.Join(dir, "model.safetensors"), entries, map[string]string{"format": "pt"})
}
