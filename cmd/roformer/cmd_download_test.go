package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roformer-go/roformer/internal/testmodel"
)

// fakeHubServer serves the files of folder as the Hub serves model
// org/name: the file list, and the resolve endpoint with sha256 ETags.
func fakeHubServer(t *testing.T, folder string) *httptest.Server {
	return stallingHubServer(t, folder, "", nil)
}

// stallingHubServer is fakeHubServer, except that a GET of the file stall
// sends its first 100 bytes and then nothing until release is closed.
func stallingHubServer(t *testing.T, folder, stall string, release <-chan struct{}) *httptest.Server {
	t.Helper()
	const commit = "fedcba9876543210fedcba9876543210fedcba98"
	entries, err := os.ReadDir(folder)
	if err != nil {
		t.Fatal(err)
	}
	var siblings []map[string]string
	for _, e := range entries {
		siblings = append(siblings, map[string]string{"rfilename": e.Name()})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/models/org/name/revision/main" {
			json.NewEncoder(w).Encode(map[string]any{"sha": commit, "siblings": siblings})
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, "/org/name/resolve/"+commit+"/")
		data, err := os.ReadFile(filepath.Join(folder, name))
		if !ok || err != nil || strings.Contains(name, "/") {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.NotFound(w, r)
			return
		}
		sum := sha256.Sum256(data)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("X-Repo-Commit", commit)
		if name == stall && r.Method == http.MethodGet {
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Write(data[:100])
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// roformer download fills the cache; --model org/name then finds the model.
func TestDownloadThenInspect(t *testing.T) {
	folder := testmodel.Tiny{Words: []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"}, Seed: 3}.Folder(t)
	srv := fakeHubServer(t, folder)
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")

	code, _, stderr := runCLI(t, "inspect", "--model", "org/name")
	if code != 1 || !strings.Contains(stderr, "roformer download org/name") || !strings.Contains(stderr, cache) {
		t.Fatalf("inspect before download: exit %d, stderr:\n%s", code, stderr)
	}

	code, stdout, stderr := runCLI(t, "download", "org/name", "--revision", "main")
	if code != 0 {
		t.Fatalf("download: exit %d, stderr:\n%s", code, stderr)
	}
	snap := strings.TrimSpace(stdout)
	if !strings.HasPrefix(snap, filepath.Join(cache, "models--org--name", "snapshots")+string(filepath.Separator)) {
		t.Fatalf("download printed %q", snap)
	}
	if !strings.Contains(stderr, "fetching config.json") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}

	code, stdout, stderr = runCLI(t, "inspect", "--model", "org/name")
	if code != 0 {
		t.Fatalf("inspect: exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "model folder  "+snap) {
		t.Errorf("inspect did not read the snapshot:\n%s", stdout)
	}
	code, stdout, stderr = runCLI(t, "inspect", "--model", folder)
	if code != 0 || !strings.Contains(stdout, "model folder  "+folder) {
		t.Errorf("a folder path: exit %d\n%s%s", code, stdout, stderr)
	}

	// --cache writes elsewhere; the cache variable then finds it there.
	other := t.TempDir()
	if code, _, stderr := runCLI(t, "download", "--cache", other, "--quiet", "org/name"); code != 0 {
		t.Fatalf("download --cache: exit %d\n%s", code, stderr)
	}
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_HOME", filepath.Dir(other))
	os.Rename(other, filepath.Join(filepath.Dir(other), "hub"))
	if code, _, stderr := runCLI(t, "rope", "--model", "org/name@main"); code != 0 {
		t.Errorf("rope --model org/name@main from $HF_HOME/hub: exit %d\n%s", code, stderr)
	}

	if code, _, stderr := runCLI(t, "download", "org/absent"); code != 1 || !strings.Contains(stderr, "org/absent") {
		t.Errorf("a missing repo: exit %d\n%s", code, stderr)
	}
	if code, _, _ := runCLI(t, "download"); code != 2 {
		t.Errorf("no model id: exit %d, want 2", code)
	}
}

// A server that stops sending fails the download after --timeout, saying
// so; a rerun resumes it.
func TestDownloadStalledTimeout(t *testing.T) {
	folder := testmodel.Tiny{Words: []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"}, Seed: 3}.Folder(t)
	release := make(chan struct{})
	defer close(release)
	srv := stallingHubServer(t, folder, "model.safetensors", release)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	cache := t.TempDir()
	code, _, stderr := runCLI(t, "download", "org/name", "--cache", cache, "--quiet", "--timeout", "200ms")
	want := "no bytes for 200ms from " + srv.URL + "/org/name/resolve/"
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "after 100 of ") || !strings.Contains(stderr, "resume") {
		t.Fatalf("exit %d, want 1 and %q:\n%s", code, want, stderr)
	}
	for _, bad := range []string{"0s", "-1s"} {
		if code, _, stderr := runCLI(t, "download", "org/name", "--cache", cache, "--timeout", bad); code != 2 {
			t.Errorf("--timeout %s: exit %d, want 2\n%s", bad, code, stderr)
		}
	}
}
