package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roformer-go/roformer/server"
)

// embedInput writes lines of ftWords as embed's input (bare strings and
// objects, the last one a pair) and returns its path and the texts.
func embedInput(t *testing.T, dir string, n int) (string, []string) {
	t.Helper()
	var b strings.Builder
	var texts []string
	for i := range n {
		var s []string
		for k := range 1 + (i*3)%8 {
			s = append(s, ftWords[5+(i+k*k)%(len(ftWords)-5)])
		}
		text := strings.Join(s, " ")
		texts = append(texts, text)
		if i%2 == 0 {
			fmt.Fprintf(&b, "%q\n", text)
		} else {
			fmt.Fprintf(&b, "{\"id\": \"t%d\", \"text\": %q}\n", i, text)
		}
	}
	path := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, texts
}

func readEmbeddings(t *testing.T, path string) [][]float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var l struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Index != i {
			t.Fatalf("output line %d: index %d, %v", i+1, l.Index, err)
		}
		out = append(out, l.Embedding)
	}
	return out
}

// serverEmbed asks the server for the vectors of texts.
func serverEmbed(t *testing.T, s *server.Server, path, body string) [][]float32 {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json") // the server takes JSON only
	s.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
	}
	var v [][]float32
	if path == "/v1/embed" {
		var r server.EmbedResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		return r.Embeddings
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// roformer embed gives the server's vectors: POST /embed's by default (mean
// pooling, normalized, truncation), POST /v1/embed's with --pooling cls
// --normalize=false.
func TestEmbedCLIMatchesServer(t *testing.T) {
	dir := ftModel(t)
	work := t.TempDir()
	in, texts := embedInput(t, work, 40)
	texts = append(texts, strings.Repeat("the movie was good and ", 3))
	f, _ := os.OpenFile(in, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "%q\n", texts[len(texts)-1])
	f.Close()
	s, err := server.Load(dir, server.Options{MaxLength: 12, MaxInputs: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inputs, _ := json.Marshal(texts)
	for _, c := range []struct {
		name, path, body string
		args             []string
	}{
		{"tei", "/embed", `{"inputs": ` + string(inputs) + `, "truncate": true}`, []string{"--max-length", "12", "--truncate"}},
		{"v1 cls", "/v1/embed", `{"inputs": ` + string(inputs) + `, "pooling": "cls"}`, []string{"--max-length", "12", "--truncate", "--pooling", "cls", "--normalize=false"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(work, c.name+".jsonl")
			var stderr bytes.Buffer
			args := append([]string{"--model", dir, "--input", in, "--output", out, "--threads", "1", "--window", "16", "--batch", "8"}, c.args...)
			if err := cmdEmbed(context.Background(), args, io.Discard, &stderr); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), fmt.Sprintf("1 inputs truncated; wrote %d lines to %s", len(texts), out)) {
				t.Errorf("stderr: %s", stderr.String())
			}
			got := readEmbeddings(t, out)
			want := serverEmbed(t, s, c.path, c.body)
			if len(got) != len(want) {
				t.Fatalf("%d vectors, the server %d", len(got), len(want))
			}
			for i := range got {
				scale, d := 0.0, 0.0
				for j := range got[i] {
					scale = max(scale, math.Abs(float64(want[i][j])))
					d = max(d, math.Abs(float64(got[i][j]-want[i][j])))
				}
				if d > 1e-6*scale || len(got[i]) != len(want[i]) {
					t.Errorf("line %d: off by %g from the server's (scale %g)", i+1, d, scale)
				}
			}
		})
	}
}

func TestEmbedCLIErrors(t *testing.T) {
	dir := ftModel(t)
	work := t.TempDir()
	in, _ := embedInput(t, work, 3)
	out := filepath.Join(work, "out.jsonl")
	for _, c := range []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"no output", []string{"--model", dir, "--input", in}, true, "--output are required"},
		{"pooling", []string{"--model", dir, "--input", in, "--output", out, "--pooling", "median"}, true, `want "pooler" or cls, max, mean`},
		{"pooler", []string{"--model", dir, "--input", in, "--output", out, "--pooling", "pooler"}, false, "the model has no pooler"},
		{"stdin", []string{"--model", dir, "--input", "-", "--output", out}, true, "must be files"},
		{"window", []string{"--model", dir, "--input", in, "--output", out, "--window", "-1"}, true, "--window -1"},
		{"precision", []string{"--model", dir, "--input", in, "--output", out, "--precision", "fp8"}, true, "--precision"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := cmdEmbed(context.Background(), c.args, io.Discard, io.Discard)
			var ue usageError
			if err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &ue) != c.usage {
				t.Errorf("error %v (usage error: %v), want one containing %q (usage: %v)", err, errors.As(err, &ue), c.want, c.usage)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := cmdEmbed(ctx, []string{"--model", dir, "--input", in, "--output", out, "--window", "1"}, io.Discard, io.Discard)
	if !errors.Is(err, errInterrupted) || !strings.Contains(err.Error(), "run the same command again") {
		t.Errorf("cancelled: error %v, want errInterrupted", err)
	}
}

// Under mpirun: 2 ranks write the bytes one process writes; 2 ranks of
// which one is killed (SIGKILL) leave finished parts, and the same command
// again ends with the same bytes.
func TestEmbedMPI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun")
	}
	dir := ftModel(t)
	work := t.TempDir()
	in, _ := embedInput(t, work, 400)
	args := func(out string) []string {
		return []string{"embed", "--model", dir, "--input", in, "--output", out, "--threads", "1", "--window", "4", "--batch", "4"}
	}
	one := filepath.Join(work, "one.jsonl")
	if err := cmdEmbed(context.Background(), args(one)[1:], io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(one)
	two := filepath.Join(work, "two.jsonl")
	runMPI(t, 2, args(two)...)
	if got, _ := os.ReadFile(two); !bytes.Equal(got, want) {
		t.Fatalf("2 ranks: output differs from one process's (%d and %d bytes)", len(got), len(want))
	}

	killed := filepath.Join(work, "killed.jsonl")
	pids := t.TempDir()
	_, out, wait := startMPI(t, 2, pids, args(killed)...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if parts, _ := filepath.Glob(filepath.Join(killed+".parts", "part-*.jsonl")); len(parts) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no part within 60 s:\n%s", out)
		}
		time.Sleep(time.Millisecond)
	}
	pid, err := os.ReadFile(filepath.Join(pids, "rank-1.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var p int
	fmt.Sscan(string(pid), &p)
	proc, err := os.FindProcess(p)
	if err != nil {
		t.Fatal(err)
	}
	proc.Kill() // SIGKILL
	if err := wait(); err == nil {
		t.Logf("the run had finished before the kill; the run below only checks the output:\n%s", out)
	} else {
		if _, err := os.Stat(killed); err == nil {
			t.Fatalf("a killed run left an output")
		}
		parts, _ := filepath.Glob(filepath.Join(killed+".parts", "part-*.jsonl"))
		t.Logf("rank 1 killed with %d of 100 parts done", len(parts))
		runMPI(t, 2, args(killed)...)
	}
	if got, _ := os.ReadFile(killed); !bytes.Equal(got, want) {
		t.Errorf("resumed after a kill: output differs from one process's")
	}
}
