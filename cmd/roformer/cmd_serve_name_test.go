package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/server"
)

// --served-model-name reaches server.Options.Name; without it the name is
// left to server.Load (the folder's name).
func TestServeCLIServedModelName(t *testing.T) {
	defer func(f func(string, server.Options) (*server.Server, error)) { loadServer = f }(loadServer)
	for _, c := range []struct {
		args []string
		name string
	}{
		{nil, ""},
		{[]string{"--served-model-name", "org/my-reranker"}, "org/my-reranker"},
	} {
		got := server.Options{Name: "unset"}
		loadServer = func(dir string, o server.Options) (*server.Server, error) {
			got = o
			return nil, errors.New("held")
		}
		args := append([]string{"serve", "--model", t.TempDir(), "--addr", "127.0.0.1:0"}, c.args...)
		if code, _, stderr := runCLI(t, args...); code == 0 || !strings.Contains(stderr, "held") {
			t.Fatalf("%v: exit %d, %q", c.args, code, stderr)
		}
		if got.Name != c.name {
			t.Errorf("%v: Name %q, want %q", c.args, got.Name, c.name)
		}
	}
}
