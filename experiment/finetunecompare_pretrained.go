package experiment

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/roformer-go/roformer/data"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pretrain"
)

// UsePretrained makes o fine-tune the runs of the mlm-pe work folder dir
// (mlm-pe's --work) instead of pretraining its own: for each encoding and
// seed s the finished run dir/<encoding>-seed<s>. The vocabulary is
// rebuilt as mlm-pe built it (its built-in corpus and 2000 pieces, unless
// o.Corpus and o.VocabSize are changed after this call), and fine-tuning
// uses dropout 0.1 (mlm-pe pretrains without).
func (o *FinetuneCompareOptions) UsePretrained(dir string) {
	ref := DefaultMLMPE("")
	o.Pretrained, o.Corpus, o.VocabSize = dir, ref.Corpus, ref.VocabSize
	d := 0.1
	o.FinetuneDropout = &d
}

// pretrainedRun is a finished mlm-pe run that finetune-compare starts from.
type pretrainedRun struct {
	dir   string
	cfg   roformer.Config
	state *pretrain.State
	run   *MLMRun // its metrics.jsonl
	secs  float64
}

// PretrainedCheckpoint is a checkpoint fine-tuned from (FinetuneCompare
// with Pretrained): where it is, the step it was saved at, the held-out MLM
// loss the run recorded at that step and the loss computed again here on
// the same held-out batches with the rebuilt vocabulary (equal up to
// rounding when the vocabulary is the run's).
type PretrainedCheckpoint struct {
	Path           string `json:"path"` // model.safetensors
	Step           int    `json:"step"`
	Steps          int    `json:"steps"` // the run's planned steps
	EvalLoss       Number `json:"eval_loss"`
	RecomputedLoss Number `json:"recomputed_eval_loss"`
}

// loadPretrained reads and checks the runs of opts.Pretrained that opts
// uses (its encodings × seeds; "rotary-scratch" starts from the rotary
// run's configuration): finished, of the encoding their name says, of one
// architecture, vocabulary and sequence length, at least as long as the
// fine-tuning inputs. Errors name the file at fault.
func loadPretrained(opts FinetuneCompareOptions) (map[string]*pretrainedRun, error) {
	runs := map[string]*pretrainedRun{}
	var first *pretrainedRun
	for _, pe := range opts.Encodings {
		for _, seed := range opts.Seeds {
			name := fmt.Sprintf("%s-seed%d", pe, seed)
			dir := filepath.Join(opts.Pretrained, name)
			cfgPath := filepath.Join(dir, "config.json")
			if _, err := os.Stat(cfgPath); err != nil {
				return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: no run %s: %s is missing (train it with roformer experiment mlm-pe --work %s --encodings %s --seeds %d)", name, cfgPath, opts.Pretrained, pe, seed)
			}
			cfg, err := roformer.LoadConfig(cfgPath)
			if err != nil {
				return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: %w", err)
			}
			if cfg.PosEnc() != pe {
				return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: %s has position_embedding_type %q; the run's name says %s", cfgPath, cfg.PosEnc(), pe)
			}
			st, ckpt, err := pretrain.ReadLatestState(dir)
			if err != nil {
				return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: run %s: %w", dir, err)
			}
			statePath := filepath.Join(ckpt, pretrain.StateFile)
			if st.Step != st.Options.Steps {
				return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: %s: the run stopped at step %d of %d (still training, or interrupted: resume it with mlm-pe first)", statePath, st.Step, st.Options.Steps)
			}
			if st.Options.Seed != seed {
				return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: %s: trained with seed %d; the run's name says %d", statePath, st.Options.Seed, seed)
			}
			model := filepath.Join(dir, "model.safetensors")
			if _, err := os.Stat(model); err != nil {
				return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: run %s has no final model: %w", dir, err)
			}
			run, secs, ok := finishedMLMRun(dir, cfg, st.Step)
			if !ok {
				return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: %s has no held-out evaluation at the final step %d", filepath.Join(dir, pretrain.MetricsFile), st.Step)
			}
			r := &pretrainedRun{dir: dir, cfg: cfg, state: st, run: run, secs: secs}
			if first == nil {
				first = r
			} else if err := samePretraining(first, r); err != nil {
				return nil, err
			}
			runs[name] = r
		}
	}
	// The learned tables have max_position_embeddings rows (the hard
	// limit, checked first); every run was pretrained at seq_len: inputs
	// stay within both.
	n := opts.Finetune.MaxLength
	for _, pe := range opts.Encodings {
		for _, seed := range opts.Seeds {
			r := runs[fmt.Sprintf("%s-seed%d", pe, seed)]
			if pe != roformer.PosLearned || n <= r.cfg.MaxPositionEmbeddings {
				continue
			}
			p := filepath.Join(r.dir, "config.json")
			return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: fine-tuning length %d exceeds the %d rows of the learned table in %s", n, r.cfg.MaxPositionEmbeddings, p)
		}
	}
	if n > first.state.Options.SeqLen {
		return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: fine-tuning length %d exceeds the pretraining length %d of %s", n, first.state.Options.SeqLen, first.dir)
	}
	return runs, nil
}

// samePretraining checks that two runs have one architecture, vocabulary
// size and sequence length.
func samePretraining(a, b *pretrainedRun) error {
	ca, cb := a.cfg, b.cfg
	if ca.VocabSize != cb.VocabSize {
		return fmt.Errorf("experiment: finetune-compare: --pretrained: %s has a vocabulary of %d, %s of %d: the runs were not pretrained on one vocabulary", filepath.Join(b.dir, "config.json"), cb.VocabSize, filepath.Join(a.dir, "config.json"), ca.VocabSize)
	}
	if ca.NumHiddenLayers != cb.NumHiddenLayers || ca.HiddenSize != cb.HiddenSize || ca.NumAttentionHeads != cb.NumAttentionHeads || ca.IntermediateSize != cb.IntermediateSize || ca.EmbeddingSize != cb.EmbeddingSize {
		return fmt.Errorf("experiment: finetune-compare: --pretrained: %s and %s describe different architectures", filepath.Join(b.dir, "config.json"), filepath.Join(a.dir, "config.json"))
	}
	oa, ob := a.state.Options, b.state.Options
	if oa.SeqLen != ob.SeqLen || oa.Steps != ob.Steps || oa.BatchSize != ob.BatchSize {
		return fmt.Errorf("experiment: finetune-compare: --pretrained: %s pretrained %d steps of %d × %d tokens, %s %d of %d × %d: not the same pretraining", b.dir, ob.Steps, ob.BatchSize, ob.SeqLen, a.dir, oa.Steps, oa.BatchSize, oa.SeqLen)
	}
	return nil
}

// stagePretrained writes the model folder finetune-compare fine-tunes for
// one pretrained run into dir: the run's final model, with dropout set to
// opts.FinetuneDropout when given, and the rebuilt tokenizer. It first
// scores the model on the run's held-out batches (the same sequences,
// masks and count as its own evaluations) and fails when the loss differs
// from the recorded one: the vocabulary or corpus is then not the run's.
func stagePretrained(ctx context.Context, job *pretrain.Job, r *pretrainedRun, dir string, opts FinetuneCompareOptions) (*PretrainRun, error) {
	cfgPath := filepath.Join(r.dir, "config.json")
	if job.Tokenizer.VocabSize() != r.cfg.VocabSize {
		return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: the vocabulary rebuilt from the corpus has %d tokens, %s says %d: the run was pretrained on another corpus or vocabulary size (finetune-compare rebuilds mlm-pe's: corpus %q, %d pieces)", job.Tokenizer.VocabSize(), cfgPath, r.cfg.VocabSize, opts.Corpus, opts.VocabSize)
	}
	l, err := roformer.Load(r.dir, roformer.HeadMaskedLM, roformer.LoadOptions{})
	if err != nil {
		return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: %w", err)
	}
	o := r.state.Options
	batches, err := data.EvalBatches(job.Loop.Eval, job.Loop.Vocab, o.BatchSize, o.SeqLen, o.EvalBatches, o.Seed, data.MaskOptions{Prob: o.MaskProb, WholeWord: o.WholeWord})
	if err != nil {
		return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: %s: %w", r.dir, err)
	}
	mlm := pretrain.NewMLMModel(l.Model)
	var sum float64
	var n, correct int
	for _, b := range batches {
		s, k, c, err := mlm.Evaluate(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: %s: %w", r.dir, err)
		}
		sum, n, correct = sum+s, n+k, correct+c
	}
	loss := sum / float64(max(n, 1))
	recorded := r.run.EvalLoss[len(r.run.EvalLoss)-1]
	if !(math.Abs(loss-recorded) <= 1e-3*max(1, recorded)) {
		return nil, fmt.Errorf("experiment: finetune-compare: --pretrained: %s scores %.4f on its held-out batches with the rebuilt vocabulary; %s recorded %.4f: the vocabulary or corpus is not the one it was pretrained with (corpus %q, %d pieces)", filepath.Join(r.dir, "model.safetensors"), loss, filepath.Join(r.dir, pretrain.MetricsFile), recorded, opts.Corpus, opts.VocabSize)
	}
	m := l.Model
	if d := opts.FinetuneDropout; d != nil {
		m.Config.HiddenDropoutProb, m.Config.AttentionProbsDropoutProb = *d, *d
	}
	if err := m.Save(dir); err != nil {
		return nil, err
	}
	if err := job.Tokenizer.Save(dir); err != nil {
		return nil, err
	}
	acc := r.run.EvalAccuracy[len(r.run.EvalAccuracy)-1]
	say(opts.Progress, "finetune-compare: %s: step %d, held-out MLM loss %.4f (recorded %.4f), accuracy %.4f", r.dir, r.state.Step, loss, recorded, float64(acc))
	return &PretrainRun{Encoding: r.cfg.PosEnc(), Seed: r.state.Options.Seed, Params: m.NumParams(), EvalLoss: Number(recorded), EvalAccuracy: acc, Seconds: r.secs,
		Checkpoint: &PretrainedCheckpoint{Path: filepath.Join(r.dir, "model.safetensors"), Step: r.state.Step, Steps: r.state.Options.Steps, EvalLoss: Number(recorded), RecomputedLoss: Number(loss)}}, nil
}
