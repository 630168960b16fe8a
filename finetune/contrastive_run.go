package finetune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/roformer-go/roformer/data/labelled"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/roformer-go/roformer/contrastive"
	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/internal/atomicfile"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/pipeline"
	"github.com/roformer-go/roformer/sentence"
)

// EmbedRunFile is the run description in a contrastively fine-tuned folder.
const EmbedRunFile = "finetune_embed.json"

// EmbedRunInfo is finetune_embed.json: what the folder was made from and how.
type EmbedRunInfo struct {
	Format    string                `json:"format"` // "roformer-finetune-embed"
	Version   int                   `json:"version"`
	BaseModel string                `json:"base_model"`
	Objective contrastive.Objective `json:"objective"`
	Pooling   EmbedPooling          `json:"pooling"`
	Options   Options               `json:"options"`
	Data      map[string]any        `json:"data,omitempty"`
	Result    *EmbedResult          `json:"result"`
	WorldSize int                   `json:"world_size"`
	Created   string                `json:"created"`
}

// EmbedRunOptions describe a whole contrastive fine-tuning job.
type EmbedRunOptions struct {
	Model     string // folder of the encoder: a model folder or a sentence-transformers folder
	Objective contrastive.Objective
	// Pooling overrides the folder's (mean without a sentence-transformers
	// configuration); "" keeps it.
	Pooling  EmbedPooling
	Train    *labelled.PairSet
	Eval     *labelled.PairSet
	Options  Options
	Out      string
	Data     map[string]any // recorded in finetune_embed.json
	Progress io.Writer
	// Group makes this process one rank of a data-parallel run; rank 0
	// alone prints and writes Out.
	Group distributed.Comm
}

// RunEmbed fine-tunes an encoder contrastively and publishes
// sentence-transformers' folder in ro.Out, atomically as Run does: the
// transformer (config.json with RoFormerModel, model.safetensors, the
// tokenizer files) at the top, the modules beside it (sentence.Folder.Save:
// modules.json, 1_Pooling, sentence_bert_config.json with max_seq_length
// the training MaxLength, config_sentence_transformers.json with cosine
// similarity and the source folder's prompts), a Normalize module when the
// source folder had one, and finetune_embed.json and metrics.jsonl.
//
// The pooling comes from the source folder's Pooling module (mean or cls;
// others are refused), else mean. A source folder with Dense modules is
// refused (their training is not implemented).
func RunEmbed(ctx context.Context, ro EmbedRunOptions) (string, *EmbedRunInfo, error) {
	g := ro.Group
	if g == nil {
		g = distributed.Local()
	}
	lead := g.Rank() == 0
	if !lead {
		ro.Progress = nil
	}
	say := func(format string, a ...any) {
		if ro.Progress != nil {
			fmt.Fprintf(ro.Progress, format+"\n", a...)
		}
	}
	pm, st, pool, err := openEncoder(ro, lead)
	ro.Pooling = pool
	if err := distributed.Agree(g, err); err != nil {
		return "", nil, err
	}
	var stage *atomicfile.Stage
	if lead {
		if err := os.MkdirAll(filepath.Dir(filepath.Clean(ro.Out)), 0o755); err != nil {
			err = fmt.Errorf("finetune: %w", err)
		} else if stage, err = atomicfile.NewStage(ro.Out); err != nil {
			err = fmt.Errorf("finetune: %w", err)
		}
		if err != nil {
			return "", nil, distributed.Agree(g, err)
		}
		defer stage.Discard() // unless published
	}
	if err := distributed.Agree(g, nil); err != nil {
		return "", nil, err
	}
	say("model: %s (%s, hidden size %d), %s pooling; tokenizer %s, %d tokens", ro.Model, pm.Model.Head, pm.Model.Config.HiddenSize, ro.Pooling, pm.Tokenizer.Kind(), pm.Tokenizer.VocabSize())
	if st.DefaultPromptName != "" {
		say("note: %s's default prompt %q is kept in the output folder but not put before the training texts", ro.Model, st.DefaultPromptName)
	}
	var mbuf bytes.Buffer
	res, err := TrainEmbed(ctx, EmbedJob{Model: pm.Model, Tokenizer: pm.Tokenizer, Pooling: ro.Pooling, Objective: ro.Objective,
		Lower: st.DoLowerCase, Train: ro.Train, Eval: ro.Eval, Options: ro.Options, Progress: ro.Progress, Metrics: &mbuf, Group: g})
	if err != nil || !lead {
		return ro.Out, nil, err
	}
	info := &EmbedRunInfo{Format: "roformer-finetune-embed", Version: 1, BaseModel: ro.Model, Objective: ro.Objective, Pooling: ro.Pooling,
		Options: ro.Options, Data: ro.Data, Result: res, WorldSize: g.Size(), Created: time.Now().UTC().Format(time.RFC3339)}
	if err := SaveEmbed(stage.Dir, pm, st, ro.Pooling, ro.Options.MaxLength); err != nil {
		return "", nil, err
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return "", nil, fmt.Errorf("finetune: %s: %w", EmbedRunFile, err)
	}
	if err := os.WriteFile(filepath.Join(stage.Dir, EmbedRunFile), append(b, '\n'), 0o644); err != nil {
		return "", nil, fmt.Errorf("finetune: %w", err)
	}
	if err := os.WriteFile(filepath.Join(stage.Dir, MetricsFile), mbuf.Bytes(), 0o644); err != nil {
		return "", nil, fmt.Errorf("finetune: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	if err := publish(stage, ro.Out); err != nil {
		return "", nil, err
	}
	return ro.Out, info, nil
}

// openEncoder checks the options and opens the source folder with the
// base head; it returns the folder's sentence-transformers configuration
// (a zero one when it has none) and the pooling: ro.Pooling, else the
// folder's, else mean.
func openEncoder(ro EmbedRunOptions, lead bool) (*pipeline.Model, *sentence.Folder, EmbedPooling, error) {
	if err := ro.Options.Validate(); err != nil {
		return nil, nil, "", err
	}
	if lead {
		if err := CheckOut(ro.Out); err != nil {
			return nil, nil, "", err
		}
	}
	if ro.Train == nil {
		return nil, nil, "", errors.New("finetune: no training data")
	}
	pm, err := pipeline.Open(ro.Model, pipeline.OpenOptions{Head: roformer.HeadBase})
	if err != nil {
		return nil, nil, "", err
	}
	st := pm.Sentence
	if st == nil {
		st = &sentence.Folder{}
		if ro.Pooling == "" {
			ro.Pooling = PoolMean
		}
	} else {
		for _, s := range st.Steps {
			if s.Dense != nil {
				return nil, nil, "", fmt.Errorf("finetune: %s has a Dense module (%d → %d); contrastive training of Dense modules is not implemented", ro.Model, s.Dense.In, s.Dense.Out)
			}
		}
		if ro.Pooling == "" {
			if ro.Pooling, err = PoolingOf(st.Pooling); err != nil {
				return nil, nil, "", fmt.Errorf("%w (%s)", err, ro.Model)
			}
		}
	}
	return pm, st, ro.Pooling, nil
}

// SaveEmbed writes a sentence-transformers folder into dir: the model's
// transformer (config.json with RoFormerModel, model.safetensors) and
// tokenizer, and the modules: pooling (mean or cls, include_prompt),
// src's Normalize module if it had one, max_seq_length maxLen,
// src's do_lower_case and prompts, cosine similarity.
func SaveEmbed(dir string, m *pipeline.Model, src *sentence.Folder, pool EmbedPooling, maxLen int) error {
	if m.Model.Head != roformer.HeadBase {
		return fmt.Errorf("finetune: SaveEmbed: the model has the %s head, not the base one", m.Model.Head)
	}
	if err := m.Model.Save(dir); err != nil {
		return err
	}
	if err := m.Tokenizer.Save(dir); err != nil {
		return err
	}
	H := m.Model.Config.HiddenSize
	f := &sentence.Folder{Pooling: sentence.Pooling{Dim: H, Mean: pool == PoolMean, CLS: pool == PoolCLS, IncludePrompt: true},
		MaxSeqLength: maxLen, SimilarityFn: "cosine"}
	if src != nil {
		f.DoLowerCase, f.Prompts, f.DefaultPromptName = src.DoLowerCase, src.Prompts, src.DefaultPromptName
		if src.Normalizes() {
			f.Steps = []sentence.Step{{}}
		}
	}
	return f.Save(dir)
}
