package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roformer-go/roformer/internal/testutil"
	"github.com/roformer-go/roformer/kernels"
	"github.com/roformer-go/roformer/pipeline"
)

// roformer embed on a RoFormer-Sim folder gives its pooler vectors (the
// default pooling of a model with a pooler) under the UniLM rule, within
// 1e-4 of the family fixture's pooler_output; normalized by --normalize.
func TestEmbedCLISimPooler(t *testing.T) {
	for r, row := range testutil.SimRows(t) {
		work := t.TempDir()
		in := filepath.Join(work, "in.jsonl")
		if err := os.WriteFile(in, []byte(fmt.Sprintf("%q\n", row.Text)), 0o644); err != nil {
			t.Fatal(err)
		}
		unit := append([]float32(nil), row.Pooler...)
		pipeline.Normalize(unit)
		for _, c := range []struct {
			args []string
			want []float32
		}{{[]string{"--normalize=false"}, row.Pooler}, {[]string{"--pooling", "pooler", "--normalize"}, unit}} {
			out := filepath.Join(work, "out.jsonl")
			var stderr bytes.Buffer
			args := append([]string{"--model", row.Dir, "--input", in, "--output", out, "--threads", "1"}, c.args...)
			if err := cmdEmbed(context.Background(), args, io.Discard, &stderr); err != nil {
				t.Fatalf("row %d %v: %v\n%s", r, c.args, err, stderr.String())
			}
			got := readEmbeddings(t, out)
			testutil.AssertClose(t, fmt.Sprintf("row %d %v", r, c.args), got[0], c.want, 1e-4, 0)
		}
	}
}

// roformer serve on a RoFormer-Sim folder: POST /embed over real HTTP gives
// the fixture's pooler vectors (1e-4).
func TestServeCLISimPooler(t *testing.T) {
	row := testutil.SimRows(t)[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("cannot listen on localhost:", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, serveOptions{model: row.Dir}, ln, &logs) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("serve did not stop after its context ended")
		}
	}()
	url := "http://" + ln.Addr().String()
	waitReady(t, url)
	text, _ := json.Marshal(row.Text)
	resp, err := http.Post(url+"/embed", "application/json", strings.NewReader(`{"inputs": `+string(text)+`, "normalize": false}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got [][]float32
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || len(got) != 1 {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	testutil.AssertClose(t, "serve /embed", got[0], row.Pooler, 1e-4, 0)
}

// roformer similar scores each candidate with the cosine of the pooler
// vectors that the library's Embed gives on the same folder (the one UniLM
// rule, no override of its own), within 1e-4.
func TestSimilarCLIUsesTheRule(t *testing.T) {
	dir := simWithVocab(t)
	code, stdout, stderr := runCLI(t, "similar", "--model", dir, "--text", "the cat sat", "-n", "12", "-k", "4", "--seed", "3", "--max-new-tokens", "5", "--top-k", "20", "--json", "--threads", "1")
	if code != 0 {
		t.Fatalf("similar: exit %d: %s", code, stderr)
	}
	var res []similarResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res) == 0 {
		t.Fatalf("similar --json printed %q (%v)", stdout, err)
	}
	m, err := pipeline.Open(dir, pipeline.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inputs := []pipeline.EmbedInput{{Text: "the cat sat"}}
	for _, r := range res {
		inputs = append(inputs, pipeline.EmbedInput{Text: r.Text})
	}
	vecs, _, err := pipeline.Embed(context.Background(), m.Model, m.Tokenizer, inputs, pipeline.EmbedOptions{Pooling: pipeline.PoolPooler})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if want := kernels.Cosine(vecs[0], vecs[i+1]); math.Abs(r.Score-want) > 1e-4 {
			t.Errorf("%q: score %g, the pooler vectors' cosine %g", r.Text, r.Score, want)
		}
	}
}

// roformer forward on a plain causal LM (HF's RoFormerForCausalLM: no
// pooler) still encodes causally: position 0 of a longer row equals the
// row of that token alone.
func TestForwardCLICausalLMStaysCausal(t *testing.T) {
	model := testutil.Shared(t, "fixtures", "roformer-family", "causal_a", "model")
	tmp := t.TempDir()
	run := func(ids string) jsonTensor {
		t.Helper()
		in := writeJSON(t, tmp, "in.json", `{"input_ids": `+ids+`}`)
		code, stdout, stderr := runCLI(t, "forward", "--model", model, "--head", "base", "--input", in, "--threads", "1")
		if code != 0 {
			t.Fatalf("forward: exit %d: %s", code, stderr)
		}
		var out map[string]jsonTensor
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatal(err)
		}
		return out["last_hidden_state"]
	}
	long, short := run(`[[2, 5, 9, 11, 4]]`), run(`[[2]]`)
	H := short.Shape[2]
	testutil.AssertClose(t, "position 0", long.Data[:H], short.Data, 1e-5, 0)
	two := run(`[[2, 5]]`)
	testutil.AssertClose(t, "position 1", long.Data[H:2*H], two.Data[H:2*H], 1e-5, 0)
}
