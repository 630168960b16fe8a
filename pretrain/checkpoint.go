package pretrain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/internal/atomicfile"
)

// Names of the files and folders the loop writes in a run folder.
const (
	LatestFile    = "latest"           // holds the name of the newest checkpoint folder
	StateFile     = "train_state.json" // training state inside a checkpoint
	OptimizerFile = "optimizer.bin"    // optim.AdamW state inside a checkpoint
	MetricsFile   = "metrics.jsonl"
	PlotFile      = "loss.png"
	stateFormat   = "roformer-train-state"
	stateVersion  = 1
)

// ErrNoCheckpoint is wrapped when a run folder has no checkpoint to resume.
var ErrNoCheckpoint = errors.New("pretrain: no checkpoint")

// State is the training state saved in each checkpoint's train_state.json.
type State struct {
	Format  string       `json:"format"`  // "roformer-train-state"
	Version int          `json:"version"` // 1
	Step    int          `json:"step"`    // optimizer updates done
	Options TrainOptions `json:"options"`
	// Loader is the data.Loader state (position and masking generator).
	Loader []byte `json:"loader"`
	// ModelState is StatefulModel.TrainState, if the model has one.
	ModelState []byte `json:"model_state,omitempty"`
	// RankModelStates replaces ModelState in a data-parallel run: every
	// rank's StatefulModel.TrainState, in rank order. (The loader state is
	// the same on every rank, so Loader is every rank's.)
	RankModelStates [][]byte `json:"rank_model_states,omitempty"`
	// TrainData and EvalData are data.Fingerprint of the sequences.
	TrainData string `json:"train_data"`
	EvalData  string `json:"eval_data"`
	VocabSize int    `json:"vocab_size"`
	// Running sums of the log interval in progress and the elapsed time.
	LogLossSum   float64 `json:"log_loss_sum"`
	LogSteps     int     `json:"log_steps"`
	LogTokens    int64   `json:"log_tokens"`
	ElapsedSec   float64 `json:"elapsed_sec"`
	TrainedToken int64   `json:"trained_tokens"`
	// Files maps every other file of the checkpoint folder to its SHA-256.
	Files map[string]string `json:"files"`
}

// checkpointName returns "checkpoint-<step>".
func checkpointName(step int) string { return fmt.Sprintf("checkpoint-%d", step) }

// listCheckpoints returns the steps of the checkpoint-<step> folders in
// dir, ascending.
func listCheckpoints(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	var steps []int
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), "checkpoint-"); ok && e.IsDir() {
			if s, err := strconv.Atoi(rest); err == nil && s >= 0 && checkpointName(s) == e.Name() {
				steps = append(steps, s)
			}
		}
	}
	sort.Ints(steps)
	return steps, nil
}

// LatestCheckpoint returns the path of the checkpoint folder named by the
// run folder's latest file.
func LatestCheckpoint(runDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(runDir, LatestFile))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(runDir); serr != nil {
			return "", fmt.Errorf("%w: %v", ErrNoCheckpoint, serr)
		}
		return "", fmt.Errorf("%w: %s has no %s file; is it a training run folder?", ErrNoCheckpoint, runDir, LatestFile)
	}
	if err != nil {
		return "", fmt.Errorf("pretrain: %w", err)
	}
	name := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(strings.TrimPrefix(name, "checkpoint-")); err != nil || !strings.HasPrefix(name, "checkpoint-") {
		return "", fmt.Errorf("pretrain: %s names %q, not a checkpoint folder", filepath.Join(runDir, LatestFile), name)
	}
	return filepath.Join(runDir, name), nil
}

// ReadState reads and checks a checkpoint folder's train_state.json and the
// checksums of the files it lists.
func ReadState(ckptDir string) (*State, error) {
	path := filepath.Join(ckptDir, StateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pretrain: checkpoint %s: %w", ckptDir, err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("pretrain: %s is corrupt: %w", path, err)
	}
	if st.Format != stateFormat {
		return nil, fmt.Errorf("pretrain: %s is not a roformer training state (format %q)", path, st.Format)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("pretrain: %s has version %d, this build reads version %d", path, st.Version, stateVersion)
	}
	if _, ok := st.Files[OptimizerFile]; !ok {
		return nil, fmt.Errorf("pretrain: %s lists no %s", path, OptimizerFile)
	}
	names := make([]string, 0, len(st.Files))
	for name := range st.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := filepath.Join(ckptDir, name)
		sum, err := hashFile(f)
		if err != nil {
			return nil, fmt.Errorf("pretrain: checkpoint file %s: %w", f, err)
		}
		if sum != st.Files[name] {
			return nil, fmt.Errorf("pretrain: checkpoint file %s is corrupt (sha256 %s, recorded %s)", f, sum[:12], st.Files[name][:min(12, len(st.Files[name]))])
		}
	}
	return &st, nil
}

// ReadLatestState returns the state of the run folder's latest checkpoint,
// so that a caller can rebuild the model and data (with st.Options) before
// calling Resume.
func ReadLatestState(runDir string) (*State, string, error) {
	ckpt, err := LatestCheckpoint(runDir)
	if err != nil {
		return nil, "", err
	}
	st, err := ReadState(ckpt)
	if err != nil {
		return nil, "", err
	}
	return st, ckpt, nil
}

// saveCheckpoint writes checkpoint-<st.Step> into runDir: model files, the
// extra files, optimizer.bin and train_state.json, first into a temporary
// folder that is then renamed, then the latest pointer; finally it prunes
// old checkpoints down to keep. On error nothing of the new checkpoint
// remains and the previous ones are untouched.
func saveCheckpoint(runDir string, st *State, m Model, extra func(string) error, optState []byte, keep int) (err error) {
	name := checkpointName(st.Step)
	final := filepath.Join(runDir, name)
	if _, err := os.Stat(final); err == nil {
		// This step was saved already (a resume interrupted at once): keep it.
		return writeFileAtomic(filepath.Join(runDir, LatestFile), []byte(name+"\n"))
	}
	stage, err := fileOptions().NewStage(final)
	if err != nil {
		return fmt.Errorf("pretrain: saving %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			stage.Discard()
			err = fmt.Errorf("pretrain: saving %s failed, the previous checkpoint is intact: %w", name, err)
		}
	}()
	tmp := stage.Dir
	if err := m.SaveModel(tmp); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if extra != nil {
		if err := extra(tmp); err != nil {
			return fmt.Errorf("extra files: %w", err)
		}
	}
	if err := writeFileAtomic(filepath.Join(tmp, OptimizerFile), optState); err != nil {
		return err
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return err
	}
	st.Files = map[string]string{}
	for _, e := range ents {
		if e.IsDir() || e.Name() == StateFile || strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			continue
		}
		sum, err := hashFile(filepath.Join(tmp, e.Name())) // Publish syncs it
		if err != nil {
			return err
		}
		st.Files[e.Name()] = sum
	}
	st.Format, st.Version = stateFormat, stateVersion
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(tmp, StateFile), append(b, '\n')); err != nil {
		return err
	}
	if err := stage.Publish(); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(runDir, LatestFile), []byte(name+"\n")); err != nil {
		// The new folder is complete but latest still names the previous
		// one, which is intact: remove the orphan so that state stays simple.
		os.RemoveAll(final)
		return err
	}
	return prune(runDir, st.Step, keep)
}

// prune removes the oldest checkpoint folders so that keep remain, never
// the one at step current.
func prune(runDir string, current, keep int) error {
	steps, err := listCheckpoints(runDir)
	if err != nil {
		return err
	}
	for i := 0; i < len(steps)-keep; i++ {
		if steps[i] == current {
			continue
		}
		if err := os.RemoveAll(filepath.Join(runDir, checkpointName(steps[i]))); err != nil {
			return fmt.Errorf("pretrain: removing old checkpoint: %w", err)
		}
	}
	return nil
}

// runStartEntries are the names a run writes in its folder before its
// first checkpoint: Start's options (RunFile) and tokenizer folder, the
// loop's metrics and plot.
var runStartEntries = map[string]bool{RunFile: true, "tokenizer": true, MetricsFile: true, PlotFile: true}

// checkNewRunFolder refuses a folder that a new run must not write into,
// so that nothing in it is overwritten: one that holds a run (a latest
// file, or checkpoint-<step> folders), or anything else that a run started
// there and stopped before its first checkpoint would not have written (a
// model folder's config.json and model.safetensors, a tokenizer's files,
// any other file). A folder that does not exist, an empty one, or one
// holding only runStartEntries and temporary files (atomicfile.TempPrefix)
// is fine: the run starts afresh there.
func checkNewRunFolder(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pretrain: output folder: %w", err)
	}
	var other []string
	for _, e := range ents {
		name := e.Name()
		switch {
		case name == LatestFile:
			return fmt.Errorf("pretrain: %s already holds a training run; resume it (roformer pretrain --resume %s) or choose another folder", dir, dir)
		case runStartEntries[name] || strings.HasPrefix(name, atomicfile.TempPrefix):
		default:
			other = append(other, name)
		}
	}
	if steps, err := listCheckpoints(dir); err != nil {
		return err
	} else if len(steps) > 0 {
		return fmt.Errorf("pretrain: %s holds %s but no %s file (a run killed while saving its first checkpoint?); remove it or choose another folder",
			dir, checkpointName(steps[0]), LatestFile)
	}
	if len(other) > 0 {
		what := "files that are not a pretraining run's"
		for _, name := range other {
			if name == "config.json" || strings.HasSuffix(name, ".safetensors") || strings.HasSuffix(name, ".bin") {
				what = "a model"
			}
		}
		shown := other[:min(len(other), 4)]
		more := ""
		if len(other) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(other)-len(shown))
		}
		return fmt.Errorf("pretrain: %s holds %s (%s%s), which a new run would overwrite or mix with its own; choose an empty or new folder (a run is continued with --resume)",
			dir, what, strings.Join(shown, ", "), more)
	}
	return nil
}

// cleanTemp removes temporary files and folders left by a killed run.
func cleanTemp(runDir string) error {
	ents, err := os.ReadDir(runDir)
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			if err := os.RemoveAll(filepath.Join(runDir, e.Name())); err != nil {
				return fmt.Errorf("pretrain: removing leftover %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// removeAfter removes checkpoint folders past step: ones a killed run
// completed without updating latest, which a resumed run rewrites.
func removeAfter(runDir string, step int) error {
	steps, err := listCheckpoints(runDir)
	if err != nil {
		return err
	}
	for _, s := range steps {
		if s > step {
			if err := os.RemoveAll(filepath.Join(runDir, checkpointName(s))); err != nil {
				return fmt.Errorf("pretrain: removing orphan checkpoint: %w", err)
			}
		}
	}
	return nil
}

// isTrainFile reports whether a checkpoint file belongs to the training
// state rather than to the model.
func isTrainFile(name string) bool { return name == StateFile || name == OptimizerFile }

// publishModel copies the model files of a checkpoint folder (all but the
// training state) into runDir, each atomically.
func publishModel(ckptDir, runDir string) error {
	ents, err := os.ReadDir(ckptDir)
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() || isTrainFile(e.Name()) {
			continue
		}
		if err := copyFileAtomic(filepath.Join(runDir, e.Name()), filepath.Join(ckptDir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
