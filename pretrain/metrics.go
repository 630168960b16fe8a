package pretrain

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Record is one line of metrics.jsonl: a training log line (Loss set) or an
// evaluation (EvalLoss set).
type Record struct {
	Step         int      `json:"step"`
	Loss         *float64 `json:"loss,omitempty"`           // mean training loss over the steps since the last record
	LR           *float64 `json:"lr,omitempty"`             // learning rate of this step's update
	GradNorm     *float64 `json:"grad_norm,omitempty"`      // global gradient norm before clipping
	TokensPerSec *float64 `json:"tokens_per_sec,omitempty"` // non-padding tokens per second since the last record
	Elapsed      *float64 `json:"elapsed,omitempty"`        // seconds of training, summed over resumes
	EvalLoss     *float64 `json:"eval_loss,omitempty"`      // mean MLM loss over the held-out labelled tokens
	EvalAccuracy *float64 `json:"eval_accuracy,omitempty"`  // share of held-out labelled tokens predicted right
	EvalPPL      *float64 `json:"eval_perplexity,omitempty"`
	EvalTokens   *int     `json:"eval_tokens,omitempty"` // labelled tokens evaluated
	// WorldSize is the number of data-parallel ranks (1: one process).
	WorldSize int `json:"world_size,omitempty"`
	// AllreduceSec is the mean time per step spent in the gradient
	// allreduce since the last record, and AllreduceWaitSec the mean time
	// before it waiting for the slowest rank (several ranks only).
	AllreduceSec     *float64 `json:"allreduce_sec,omitempty"`
	AllreduceWaitSec *float64 `json:"allreduce_wait_sec,omitempty"`
}

func f64(x float64) *float64 { return &x }

// metricsLog appends records to metrics.jsonl, syncing after each line.
type metricsLog struct {
	f *os.File
}

// openMetrics opens runDir/metrics.jsonl for appending. It keeps only the
// records with Step ≤ upTo (all when upTo < 0 … none when upTo == 0 and the
// file is new), rewriting the file atomically, and returns the kept records.
// A torn last line (a crash mid-write) ends the kept part.
func openMetrics(runDir string, upTo int) (*metricsLog, []Record, error) {
	path := filepath.Join(runDir, MetricsFile)
	var kept []Record
	var buf bytes.Buffer
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("pretrain: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var r Record
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			break
		}
		if r.Step > upTo {
			break
		}
		kept = append(kept, r)
		buf.Write(sc.Bytes())
		buf.WriteByte('\n')
	}
	if err := writeFileAtomic(path, buf.Bytes()); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("pretrain: %w", err)
	}
	return &metricsLog{f: f}, kept, nil
}

// write appends r as one JSON line and syncs the file.
func (m *metricsLog) write(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := m.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("pretrain: writing %s: %w", m.f.Name(), err)
	}
	if err := syncFile(m.f); err != nil {
		return fmt.Errorf("pretrain: syncing %s: %w", m.f.Name(), err)
	}
	return nil
}

func (m *metricsLog) close() error {
	if m == nil {
		return nil
	}
	return m.f.Close()
}
