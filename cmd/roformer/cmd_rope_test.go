package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/rope"
)

func TestRopeCLI(t *testing.T) {
	dir := t.TempDir()
	write := func(cfg string) {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) ropeResult {
		t.Helper()
		code, stdout, stderr := runCLI(t, append([]string{"rope", "--model", dir}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		var r ropeResult
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
		}
		return r
	}
	// hidden 64, 4 heads: head size 16, 8 frequencies.
	write(`{"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128}`)
	r := run()
	if r.RopeType != "default" || len(r.InvFreq) != 8 || r.AttentionFactor != 1 {
		t.Fatalf("default: %+v", r)
	}
	for i, f := range r.InvFreq {
		if want := math.Pow(10000, -float64(2*i)/16); math.Abs(f-want) > 1e-12*want {
			t.Errorf("inv_freq[%d] = %v, want %v", i, f, want)
		}
	}
	write(`{"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128, "rope_theta": 20000, "rope_scaling": {"type": "dynamic", "factor": 2}}`)
	s := rope.Scaling{Type: "dynamic", Factor: 2}
	for _, n := range []int{100, 500} {
		r := run("--seq-len", strconv.Itoa(n))
		want, _ := s.Frequencies(20000, 16, 128, n)
		for i := range want {
			if math.Abs(r.InvFreq[i]-want[i]) > 1e-12*want[i] {
				t.Errorf("dynamic, %d tokens: inv_freq[%d] = %v, want %v", n, i, r.InvFreq[i], want[i])
			}
		}
	}
	write(`{"hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"rope_type": "warp", "factor": 2}}`)
	if code, _, stderr := runCLI(t, "rope", "--model", dir); code != 1 || !strings.Contains(stderr, "warp") {
		t.Errorf("unknown rope_type: exit %d, stderr %q", code, stderr)
	}
}
