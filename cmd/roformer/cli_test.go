package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/hub"
)

// modelVerbs returns the verbs whose flags include --model, read from their
// -h output, so that a verb added later is tested too.
func modelVerbs(t *testing.T) []string {
	t.Helper()
	var verbs []string
	for _, n := range commandNames() {
		code, _, stderr := runCLI(t, n, "-h")
		if code != 0 {
			t.Fatalf("%s -h: exit %d\n%s", n, code, stderr)
		}
		if strings.Contains(stderr, "\n  -model string\n") {
			verbs = append(verbs, n)
		}
	}
	// The verbs docs/cli.md says take --model; more is fine, fewer is a bug
	// of this test's reading.
	for _, want := range []string{"bench", "embed", "eval", "fill-mask", "finetune", "forward", "generate", "inspect", "predict", "rope", "serve", "similar", "tokenize"} {
		if i := sort.SearchStrings(verbs, want); i == len(verbs) || verbs[i] != want {
			t.Fatalf("verbs with --model %q: %s missing", verbs, want)
		}
	}
	return verbs
}

// A file as --model, for every verb that takes --model, is a usage error
// (exit 2) asking for the folder, whatever else the command line lacks; so is
// a missing path named as a file (with or without the shape org/name of a
// Hub id), which must not suggest `roformer download`.
func TestModelFlagFileEveryVerb(t *testing.T) {
	t.Setenv("HF_HUB_CACHE", t.TempDir()) // an empty cache
	dir := t.TempDir()
	file := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	const ask = "give the model folder, the one that holds config.json"
	cases := []struct {
		model, want string
	}{
		{file, file + " is a file: " + ask},
		{file + "/", file + "/ is a file: " + ask},
		{filepath.Join(dir, "none", "pytorch_model.bin"), "its name is a file's (.bin): " + ask},
		{"org/model.safetensors", "its name is a file's (.safetensors): " + ask},
	}
	for _, verb := range modelVerbs(t) {
		for _, c := range cases {
			code, _, stderr := runCLI(t, verb, "--model", c.model)
			if code != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "roformer download") {
				t.Errorf("%s --model %s: exit %d, stderr %q; want 2 and %q", verb, c.model, code, stderr, c.want)
			}
		}
	}
	// The file's folder holds config.json: the message names it.
	code, _, stderr := runCLI(t, "inspect", "--model", file)
	if want := ask + " (or the tokenizer files): --model " + dir + "\n"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("inspect --model %s: exit %d, stderr %q; want %q", file, code, stderr, want)
	}
	// download refuses a file's name before going to the network.
	for _, arg := range []string{file, "org/model.safetensors"} {
		code, _, stderr := runCLI(t, "download", arg)
		if code != 2 || !strings.Contains(stderr, "is a file's name, not a model id") {
			t.Errorf("download %s: exit %d, stderr %q; want 2 and a refusal", arg, code, stderr)
		}
	}
}

// A Hub id in the cache is resolved even when its name ends like a file's.
func TestModelFlagHubIDNamedLikeFile(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	repo := hub.RepoDir(cache, "org/model.json")
	commit := strings.Repeat("a", 40)
	if err := os.MkdirAll(filepath.Join(repo, "snapshots", commit), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkModelPath("org/model.json"); err != nil {
		t.Fatalf("checkModelPath of a cached Hub id: %v", err)
	}
	m := "org/model.json"
	if err := resolveModel(&m); err != nil || m != filepath.Join(repo, "snapshots", commit) {
		t.Fatalf("resolveModel: %q, %v", m, err)
	}
}

// roformer help VERB prints what roformer VERB -h prints (the verb's flags),
// on stdout, exit 0, for every verb; help WORDS passes the words on.
func TestHelpVerb(t *testing.T) {
	for _, n := range commandNames() {
		code, stdout, stderr := runCLI(t, "help", n)
		_, _, want := runCLI(t, n, "-h")
		if code != 0 || stdout != want || stderr != "" || !strings.HasPrefix(stdout, "usage: roformer "+n) && n != "experiment" {
			t.Errorf("help %s: exit %d\nstdout %q\nstderr %q\nwant stdout %q", n, code, stdout, stderr, want)
		}
	}
	code, stdout, _ := runCLI(t, "help", "fill-mask")
	for _, f := range []string{"-model string", "-top-k int", "-precision string", "-threads int"} {
		if code != 0 || !strings.Contains(stdout, f) {
			t.Errorf("help fill-mask: exit %d, no %q in\n%s", code, f, stdout)
		}
	}
	if code, stdout, _ := runCLI(t, "help", "experiment", "decay"); code != 0 || !strings.Contains(stdout, "usage: roformer experiment decay") {
		t.Errorf("help experiment decay: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := runCLI(t, "help"); code != 0 || !strings.Contains(stdout, "fill-mask") {
		t.Errorf("help: exit %d\n%s", code, stdout)
	}
	code, stdout, stderr := runCLI(t, "help", "fillmask")
	if code != 2 || stdout != "" || !strings.Contains(stderr, `did you mean "fill-mask"?`) {
		t.Errorf("help fillmask: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
}

// roformer --version, -version and version print the version line of
// roformer env, on stdout.
func TestVersion(t *testing.T) {
	want := "roformer " + versionString() + "\n"
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || stdout != want || stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", args, code, stdout, stderr, want)
		}
	}
	_, env, _ := runCLI(t, "env")
	if !strings.HasPrefix(env, "roformer   "+versionString()+"\n") {
		t.Errorf("env prints %q first, version %q", strings.SplitN(env, "\n", 2)[0], versionString())
	}
	if code, _, _ := runCLI(t, "version", "extra"); code != 2 {
		t.Errorf("version extra: exit %d, want 2", code)
	}
}

// A mistyped verb or flag gets a suggestion (exit 2), a word far from every
// verb the list of verbs.
func TestDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fillmask"}, `roformer: unknown command "fillmask"; did you mean "fill-mask"?`},
		{[]string{"fill-msk"}, `did you mean "fill-mask"?`},
		{[]string{"Fill-Mask"}, `did you mean "fill-mask"?`},
		{[]string{"tokenise", "a"}, `did you mean "tokenize"?`},
		{[]string{"gen"}, `did you mean "generate"?`},
		{[]string{"serv"}, `did you mean "serve"?`},
		{[]string{"forward", "--thread", "3"}, `flag provided but not defined: -thread; did you mean "-threads"?`},
		{[]string{"fill-mask", "--top_k", "3"}, `did you mean "-top-k"?`},
		{[]string{"--model", "x", "fill-mask"}, `unknown flag "--model" before a command`},
	} {
		code, stdout, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "did you mean") > 1 || stdout != "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	code, _, stderr := runCLI(t, "zzzzzz")
	if code != 2 || strings.Contains(stderr, "did you mean") || !strings.Contains(stderr, "\n  fill-mask ") {
		t.Errorf("zzzzzz: exit %d, stderr %q; want 2 and the list of verbs", code, stderr)
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"kitten", "sitting", 3}, {"", "abc", 3}, {"fillmask", "fill-mask", 1}, {"fill-msk", "fill-mask", 1}, {"ab", "ba", 2}, {"héllo", "hello", 1}} {
		if d := levenshtein(c.a, c.b); d != c.d {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
	names := []string{"env", "eval", "embed", "rope"}
	for word, want := range map[string]string{"x": "", "e": "", "em": `did you mean "embed"?`, "evn": `did you mean "env" or "eval"?`, "enb": `did you mean "env"?`, "evl": `did you mean "eval"?`, "ena": `did you mean "env"?`} {
		if got := suggest(word, names, ""); got != want {
			t.Errorf("suggest(%q) = %q, want %q", word, got, want)
		}
	}
}

// A bad flag value's error is printed exactly once, on one line with one
// prefix, then the hint to run the verb with -h, without the flag list.
func TestFlagErrorOnce(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"forward", "--threads", "abc"}, `invalid value "abc" for flag -threads: parse error`},
		{[]string{"fill-mask", "--top-k", "x", "a [MASK]"}, `invalid value "x" for flag -top-k`},
		{[]string{"tokenize", "--max-length"}, "flag needs an argument: -max-length"},
		{[]string{"inspect", "--nosuch"}, "flag provided but not defined: -nosuch"},
		{[]string{"download", "org/name", "--timeout", "soon"}, `invalid value "soon" for flag -timeout`},
		{[]string{"experiment", "decay", "--dim", "x"}, `invalid value "x" for flag -dim`},
	} {
		code, stdout, stderr := runCLI(t, c.args...)
		verb := c.args[0]
		hint := "run 'roformer " + verb + " -h' for usage\n"
		if code != 2 || stdout != "" || strings.Count(stderr, c.msg) != 1 || !strings.HasPrefix(stderr, "roformer "+verb+": "+c.msg) ||
			strings.Count(stderr, hint) != 1 || strings.Contains(stderr, "usage: roformer") {
			t.Errorf("%q: exit %d\nstderr %q\nwant 2, %q once, then %q", c.args, code, stderr, c.msg, hint)
		}
	}
}

// An error carries one prefix "roformer VERB: ": model/roformer's own
// "roformer: " is dropped, another package's prefix kept.
func TestErrorOnePrefix(t *testing.T) {
	empty := t.TempDir() + "/./" // a folder without config.json, written as ./ is
	for _, args := range [][]string{
		{"fill-mask", "--model", empty, "a [MASK]"},
		{"inspect", "--model", empty},
		{"rope", "--model", empty},
		{"forward", "--model", empty, "--input", "-"},
	} {
		code, _, stderr := runCLI(t, args...)
		line := regexp.MustCompile(`(?m)^roformer ` + args[0] + `: .*$`).FindString(stderr)
		if code == 0 || line == "" || strings.Contains(stderr, "roformer: roformer") || strings.HasPrefix(strings.TrimPrefix(line, "roformer "+args[0]+": "), "roformer") {
			t.Errorf("%q: exit %d, stderr %q; want one error line with one prefix", args, code, stderr)
		}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("roformer: open config.json: no such file"), "roformer inspect: open config.json: no such file"},
		{errors.New("roformer inspect: roformer: x"), "roformer inspect: x"},
		{errors.New("checkpoint: x.safetensors: header 9 bytes"), "roformer inspect: checkpoint: x.safetensors: header 9 bytes"},
		{errors.New("model x: roformer: y"), "roformer inspect: model x: roformer: y"},
		{usagef("--model %s is a file", "x"), "roformer inspect: --model x is a file"},
	} {
		if got := errorLine("inspect", c.err); got != c.want || "roformer inspect: "+errorMessage("inspect", c.err) != c.want {
			t.Errorf("errorLine(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}
