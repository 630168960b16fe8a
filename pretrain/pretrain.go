package pretrain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/data/corpus"
	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// Options describe a pretraining run.
type Options struct {
	// Corpus is a text file or a folder of .txt files; empty means the
	// built-in corpus (package data/corpus).
	Corpus string `json:"corpus"`
	// Vocab is a folder holding vocab.txt (and optionally
	// tokenizer_config.json) or a vocab.txt path. Empty: a WordPiece
	// vocabulary of VocabSize trained on the corpus (uncased BERT rules;
	// under a second for the built-in corpus).
	Vocab string `json:"vocab"`
	// VocabSize is the size of the vocabulary to train (default 8000).
	// Prepare sets it to the size of the vocabulary the job uses (Vocab's,
	// or the trained one's), so that a run's pretrain.json records it.
	VocabSize int `json:"vocab_size"`
	// Size is a model preset (roformer.Presets); ConfigFile, when set, is a
	// config.json that replaces it (its vocab_size must match the vocabulary).
	Size       string `json:"size"`
	ConfigFile string `json:"config_file"`
	// Arch picks the variant of a Size preset: "v1" (default, HF's
	// RoFormer) or "v2" (RoFormer-V2: norm_type rms_norm, use_bias false,
	// relu, the bare tied MLM decoder).
	Arch string `json:"arch,omitempty"`
	// Model, when set, is the configuration to train (it wins over Size and
	// ConfigFile); its vocab_size is set to the vocabulary's.
	Model *roformer.Config `json:"model,omitempty"`
	// EvalEvery1In holds out every k-th packed sequence for evaluation
	// (default 20, i.e. 5%).
	EvalEvery1In int `json:"eval_1_in"`
	// Train holds the loop's options (steps, batch, lr, seed, masking, …,
	// OutDir).
	Train TrainOptions `json:"train"`
	// Objective is what the run trains: ObjectiveMLM ("mlm", the default:
	// masked LM), ObjectiveCausal, ObjectiveUniLM or ObjectiveSim (see
	// objective.go and sim.go).
	Objective string `json:"objective,omitempty"`
	// Init, when set, is a model folder whose weights, configuration and
	// tokenizer start the run (causal, unilm and sim; sim needs it). A run
	// records the configuration it trains in Model, so a resume does not
	// read Init again.
	Init string `json:"init,omitempty"`
	// Pairs are the text pairs of the unilm and sim objectives: a JSONL
	// file of {"anchor", "positive"} rows, or BiblePairs ("bible", fetched
	// into CacheDir). Empty for unilm: the corpus, each sequence cut in two.
	Pairs    string `json:"pairs,omitempty"`
	CacheDir string `json:"cache_dir,omitempty"`
	// SimScale is the sim objective's similarity scale (DefaultSimScale
	// when 0).
	SimScale float64 `json:"sim_scale,omitempty"`
	// PoolerActivation is pooler_activation for the pooler the sim
	// objective adds to a checkpoint without one ("": the configuration's,
	// tanh by default; Su's scripts use "linear").
	PoolerActivation string `json:"pooler_activation,omitempty"`
	// Group, when it has more than one rank, makes this process one rank of
	// a data-parallel run (Loop.Group): every rank prepares the same
	// corpus, vocabulary and model, and rank 0 writes the run folder. Nil:
	// this process alone.
	Group distributed.Comm `json:"-"`
}

// DefaultOptions returns the main job's settings: the tiny preset on the
// built-in corpus, 1,000 steps of 16 × 128 tokens (about 2 epochs; README
// measures 0.54 CPU-seconds a step on the 2-core target machine, 5–6
// minutes of wall time on 2 idle cores), peak rate 1e-3 with 6% warm-up
// and linear decay, weight decay 0.01, clipping at 1, an evaluation every
// 100 steps, a checkpoint every 200.
func DefaultOptions(outDir string) Options {
	t := DefaultTrainOptions(1000, outDir)
	t.BatchSize, t.SeqLen, t.LR, t.Warmup = 16, 128, 1e-3, 60
	t.SaveEvery, t.EvalEvery, t.EvalBatches, t.LogEvery = 200, 100, 10, 10
	return Options{Size: "tiny", VocabSize: 8000, EvalEvery1In: 20, Train: t}
}

// RunFile is the name of the options file in a run folder.
const RunFile = "pretrain.json"

// Job is a prepared run: everything loaded, ready for Loop.Run or Loop.Resume.
type Job struct {
	Options   Options
	Tokenizer *tokenizer.Tokenizer
	Model     *roformer.Model
	Loop      Loop // the MLM loop over the packed data; Loop.Run trains it
	Tokens    int  // non-special tokens in the packed corpus
}

// readCorpus reads opts.Corpus, or the built-in corpus when it is empty,
// and says which.
func readCorpus(opts Options, say func(string, ...any)) ([]data.Document, error) {
	if opts.Corpus == "" {
		docs, err := corpus.Builtin()
		say("corpus: built-in, Moby-Dick and the State of the Union addresses 1934-2021 (public domain; see data/corpus/NOTICE)")
		return docs, err
	}
	docs, err := data.ReadCorpus(opts.Corpus)
	say("corpus: %s (%d documents)", opts.Corpus, len(docs))
	return docs, err
}

// Prepare reads the corpus and the vocabulary, packs the data and builds a
// freshly initialised model. progress, when not nil, receives one line per stage.
func Prepare(opts Options, progress io.Writer) (*Job, error) {
	say := func(format string, a ...any) {
		if progress != nil {
			fmt.Fprintf(progress, format+"\n", a...)
		}
	}
	if opts.VocabSize == 0 {
		opts.VocabSize = 8000
	}
	if opts.EvalEvery1In == 0 {
		opts.EvalEvery1In = 20
	}
	opts.Train = opts.Train.Defaults()
	if err := opts.Train.Validate(); err != nil {
		return nil, err
	}
	if opts.Objective != "" && opts.Objective != ObjectiveMLM {
		return prepareLM(opts, say)
	}
	docs, err := readCorpus(opts, say)
	if err != nil {
		return nil, err
	}
	tok, err := loadVocab(opts, docs, say)
	if err != nil {
		return nil, err
	}
	opts.VocabSize = tok.VocabSize()
	cfg, err := modelConfig(opts, tok.VocabSize())
	if err != nil {
		return nil, err
	}
	if opts.Train.SeqLen > cfg.MaxPositionEmbeddings && cfg.MaxPositionEmbeddings > 0 {
		say("note: sequence length %d exceeds max_position_embeddings %d; RoPE needs no table, so this works (HF would refuse these inputs)", opts.Train.SeqLen, cfg.MaxPositionEmbeddings)
	}
	v := data.Vocab{Size: tok.VocabSize(), CLS: tok.ClsID(), SEP: tok.SepID(), MASK: tok.MaskID(), PAD: tok.PadID(), IsContinuation: tok.IsContinuation}
	packed, err := data.Pack(docs, tok, v, data.PackOptions{SeqLen: opts.Train.SeqLen, Workers: max(opts.Train.Threads, 1)})
	if err != nil {
		return nil, err
	}
	trainSeqs, evalSeqs, err := data.SplitEval(packed.Seqs, opts.EvalEvery1In)
	if err != nil {
		return nil, err
	}
	say("data: %d tokens in %d sequences of %d (%d for training, %d held out)", packed.Tokens, len(packed.Seqs), opts.Train.SeqLen, len(trainSeqs), len(evalSeqs))
	m, err := roformer.New(cfg, roformer.HeadMaskedLM)
	if err != nil {
		return nil, err
	}
	m.Init(opts.Train.Seed)
	if err := setPrecision(m, opts.Train.Precision, say); err != nil {
		return nil, err
	}
	say("model: %d layers, hidden %d, %d heads, intermediate %d, vocabulary %d: %.2fM parameters", cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.IntermediateSize, cfg.VocabSize, float64(m.NumParams())/1e6)
	j := &Job{Options: opts, Tokenizer: tok, Model: m, Tokens: packed.Tokens}
	j.Loop = Loop{
		Model: NewMLMModel(m), Train: trainSeqs, Eval: evalSeqs, Vocab: v, Options: opts.Train, Group: opts.Group,
		// vocab.txt, tokenizer_config.json (BertTokenizer, uncased),
		// special_tokens_map.json and tokenizer.json beside the model.
		SaveExtra: tok.Save,
	}
	return j, nil
}

// setPrecision sets the model's training precision (TrainOptions.Precision)
// and says so when it is not float32.
func setPrecision(m *roformer.Model, p string, say func(string, ...any)) error {
	if err := m.SetTrainingPrecision(roformer.Precision(p)); err != nil {
		return fmt.Errorf("pretrain: --precision %s: %w", p, err)
	}
	if m.TrainingPrecision() == roformer.PrecisionBF16 {
		say("precision: bf16 products (operands rounded to bfloat16, float32 accumulation), float32 weights, gradients and optimizer state")
	}
	return nil
}

func loadVocab(opts Options, docs []data.Document, say func(string, ...any)) (*tokenizer.Tokenizer, error) {
	var v *tokenizer.Vocab
	var err error
	switch {
	case opts.Vocab != "":
		p := opts.Vocab
		if st, serr := os.Stat(p); serr == nil && st.IsDir() {
			if _, err := os.Stat(filepath.Join(p, "tokenizer_config.json")); err == nil {
				t, err := tokenizer.Load(p)
				if err == nil {
					say("vocabulary: %s (%d tokens)", p, t.VocabSize())
				}
				return t, err
			}
			p = filepath.Join(p, "vocab.txt")
		}
		v, err = tokenizer.LoadVocab(p)
		if err == nil {
			say("vocabulary: %s (%d tokens)", p, v.Size())
		}
	default:
		to := tokenizer.DefaultTrainOptions()
		to.VocabSize = opts.VocabSize
		to.Workers = max(opts.Train.Threads, 1)
		v, err = tokenizer.TrainWordPiece(func(yield func(string) bool) {
			for _, d := range docs {
				if !yield(d.Text) {
					return
				}
			}
		}, to)
		if err == nil {
			say("vocabulary: WordPiece of %d tokens trained on the corpus", v.Size())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pretrain: vocabulary: %w", err)
	}
	return tokenizer.New(v, tokenizer.DefaultConfig(tokenizer.Bert))
}

func modelConfig(opts Options, vocabSize int) (roformer.Config, error) {
	if opts.Model != nil {
		cfg := *opts.Model
		cfg.VocabSize = vocabSize
		if err := cfg.Validate(); err != nil {
			return cfg, fmt.Errorf("pretrain: model configuration: %w", err)
		}
		return cfg, nil
	}
	if opts.ConfigFile != "" {
		cfg, err := roformer.LoadConfig(opts.ConfigFile)
		if err != nil {
			return cfg, err
		}
		if cfg.VocabSize != vocabSize {
			return cfg, fmt.Errorf("pretrain: %s has vocab_size %d but the vocabulary has %d tokens", opts.ConfigFile, cfg.VocabSize, vocabSize)
		}
		return cfg, nil
	}
	size := opts.Size
	if size == "" {
		size = "tiny"
	}
	cfg, err := roformer.Preset(size, vocabSize)
	if err != nil {
		return cfg, err
	}
	switch opts.Arch {
	case "", "v1":
	case "v2":
		no := false
		cfg.NormType, cfg.UseBias, cfg.HiddenAct = "rms_norm", &no, "relu"
	default:
		return cfg, fmt.Errorf("pretrain: unknown architecture %q (want v1 or v2)", opts.Arch)
	}
	return cfg, nil
}

// Start prepares a new run in opts.Train.OutDir, writes its options and
// tokenizer there, and trains. out receives progress (a bar when terminal).
// The folder is checked first, as Loop.Run says: one holding a run, a
// model or any other file is refused before the corpus is read.
//
// With opts.Group, every rank calls Start with the same options; rank 0
// writes the folder and alone prints (out is ignored on the others).
func Start(ctx context.Context, opts Options, out io.Writer, terminal bool) (*Job, *Result, error) {
	g := group(opts.Group)
	if g.Rank() != 0 {
		out = nil
	}
	j, err := start(opts, g.Rank() == 0, out)
	if err := distributed.Agree(g, err); err != nil {
		return nil, nil, err
	}
	j.Loop.Out, j.Loop.IsTerminal = out, terminal
	res, err := j.Loop.Run(ctx)
	return j, res, err
}

func group(g distributed.Comm) distributed.Comm {
	if g == nil {
		return distributed.Local()
	}
	return g
}

// start prepares the job of Start and, when write, the run folder.
func start(opts Options, write bool, out io.Writer) (*Job, error) {
	if opts.Train.OutDir == "" {
		return nil, errors.New("pretrain: no output folder")
	}
	if write {
		if err := checkNewRunFolder(opts.Train.OutDir); err != nil {
			return nil, err
		}
	}
	j, err := Prepare(opts, out)
	if err != nil || !write {
		return j, err
	}
	if err := os.MkdirAll(opts.Train.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	b, _ := json.MarshalIndent(j.Options, "", "  ")
	if err := atomicfile.WriteFile(filepath.Join(opts.Train.OutDir, RunFile), append(b, '\n')); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	if err := j.Tokenizer.Save(filepath.Join(opts.Train.OutDir, "tokenizer")); err != nil {
		return nil, err
	}
	return j, nil
}

// Resume continues the run in dir from its latest checkpoint. steps > 0
// extends the run to that many steps; threads is the thread count in use.
// g, when it has more than one rank, is the data-parallel group (nil: this
// process alone); every rank reads dir, so it must be on a file system
// they all see (see Loop.Resume for a number of ranks other than the
// run's).
func Resume(ctx context.Context, dir string, steps, threads int, g distributed.Comm, out io.Writer, terminal bool) (*Job, *Result, error) {
	g = group(g)
	if g.Rank() != 0 {
		out = nil
	}
	j, err := prepareResume(dir, threads, g, out)
	if err := distributed.Agree(g, err); err != nil {
		return nil, nil, err
	}
	j.Loop.Options.Steps = steps
	j.Loop.Out, j.Loop.IsTerminal = out, terminal
	res, err := j.Loop.Resume(ctx)
	return j, res, err
}

func prepareResume(dir string, threads int, g distributed.Comm, out io.Writer) (*Job, error) {
	raw, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("pretrain: %s is not a pretraining run folder (no %s)", dir, RunFile)
		}
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	var opts Options
	if err := json.Unmarshal(raw, &opts); err != nil {
		return nil, fmt.Errorf("pretrain: %s: %w", filepath.Join(dir, RunFile), err)
	}
	st, _, err := ReadLatestState(dir)
	if err != nil {
		return nil, err
	}
	opts.Train = st.Options
	opts.Train.OutDir = dir
	opts.Train.Threads = threads
	opts.Vocab = filepath.Join(dir, "tokenizer")
	opts.Group = g
	return Prepare(opts, out)
}
