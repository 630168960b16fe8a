package finetune

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/roformer-go/roformer/data/labelled"
	"github.com/roformer-go/roformer/model/roformer"
	"github.com/roformer-go/roformer/tokenizer"
)

// ModelOptions say how LoadModel builds the head.
type ModelOptions struct {
	// NewHead starts a freshly initialised head even when the folder holds
	// a model fine-tuned with this head (its head weights are dropped).
	NewHead bool
	// Seed seeds the initialisation of a new head.
	Seed uint64
}

// HasHead reports whether the model folder dir was saved with spec's head
// (config.json's architectures names its class), so that LoadModel would
// continue it rather than add a new head.
func HasHead(dir string, spec *labelled.Spec) (bool, roformer.Config, error) {
	cfg, err := roformer.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return false, cfg, err
	}
	return slices.Contains(cfg.Architectures, Head(spec).HFClass()), cfg, nil
}

// LoadModel reads the model folder dir with the head spec needs. A folder
// saved with that head (a model fine-tuned before) is continued: its
// id2label must name spec.Labels in the same order (plain LABEL_i names
// match any names of the same count). Otherwise, or with opts.NewHead, the
// encoder is read and a new head is added with Hugging Face's
// initialisation (RoFormerPreTrainedModel._init_weights: weights
// N(0, initializer_range²), biases 0), seeded by opts.Seed. The returned
// bool says whether the head was continued.
func LoadModel(dir string, spec *labelled.Spec, opts ModelOptions) (*roformer.Model, bool, error) {
	has, cfg, err := HasHead(dir, spec)
	if err != nil {
		return nil, false, err
	}
	head := Head(spec)
	override := func(c *roformer.Config) { ApplySpec(c, spec) }
	if has && !opts.NewHead {
		if err := sameLabels(cfg.Labels(), spec); err != nil {
			return nil, false, fmt.Errorf("finetune: %s was fine-tuned with %s: %w; pass a matching label set, or start a new head", dir, head.HFClass(), err)
		}
		l, err := roformer.Load(dir, head, roformer.LoadOptions{ConfigOverride: override})
		if err != nil {
			return nil, false, err
		}
		return l.Model, true, nil
	}
	// A fresh head, initialised as HF does over whatever head the
	// checkpoint may hold; the config is checked against the checkpoint
	// before the model is allocated.
	l, err := roformer.Load(dir, head, roformer.LoadOptions{ConfigOverride: override, NewHead: true, InitSeed: opts.Seed})
	if err != nil {
		return nil, false, err
	}
	return l.Model, false, nil
}

// sameLabels checks a stored label list against the spec's.
func sameLabels(stored []string, spec *labelled.Spec) error {
	if len(stored) != spec.NumOutputs() {
		return fmt.Errorf("it has %d outputs (%s), the task needs %d", len(stored), labelled.QuoteLabels(stored), spec.NumOutputs())
	}
	if spec.Problem == labelled.Regression {
		return nil
	}
	generic := true
	for i, l := range stored {
		generic = generic && l == fmt.Sprintf("LABEL_%d", i)
	}
	if generic || slices.Equal(stored, spec.Labels) {
		return nil
	}
	return fmt.Errorf("its labels are [%s], the task's are [%s]", strings.Join(stored, ", "), strings.Join(spec.Labels, ", "))
}

// LoadTokenizer returns the tokenizer of a model folder and the folder it
// came from: override when given, else tokenizer.Dir's choice.
func LoadTokenizer(dir, override string) (*tokenizer.Tokenizer, string, error) {
	if override == "" {
		tok, err := tokenizer.Load(dir)
		return tok, tokenizer.Dir(dir), err
	}
	tok, err := tokenizer.Load(override)
	if err != nil {
		return nil, override, err
	}
	return tok, override, nil
}

// errOutExists is wrapped when the output folder is in use.
var errOutExists = errors.New("already exists and is not empty")
