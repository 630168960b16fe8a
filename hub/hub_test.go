package hub

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const testCommit = "0123456789abcdef0123456789abcdef01234567"

// fakeHub answers like the Hub's API and resolve endpoints for one repo.
type fakeHub struct {
	repo  string
	files map[string][]byte
	lfs   map[string]bool    // files stored in LFS: ETag is their sha256, served through a redirect
	serve map[string][]byte  // bodies served instead of files (a corrupted transfer)
	token string             // when set, requests without "Bearer token" get 401
	cut   map[string]int     // the first GET of a file stops after this many bytes
	bare  bool               // the file list gives names only, no sizes or hashes
	list  map[string]sibling // entries of the file list instead of the true ones

	// override answers instead, for a file's last path element: keyed by
	// "METHOD name", or by name for every method (see on).
	override map[string]http.HandlerFunc

	mu       sync.Mutex
	requests []string // "METHOD path range=... auth=..."
	*httptest.Server
}

func newFakeHub(t *testing.T, repo string, files map[string][]byte, lfs ...string) *fakeHub {
	h := &fakeHub{repo: repo, files: files, lfs: map[string]bool{}, serve: map[string][]byte{}, cut: map[string]int{}, list: map[string]sibling{}, override: map[string]http.HandlerFunc{}}
	for _, f := range lfs {
		h.lfs[f] = true
	}
	h.Server = httptest.NewServer(http.HandlerFunc(h.handle))
	t.Cleanup(h.Close)
	return h
}

// on makes f answer the requests for a file (see fakeHub.override); nil
// restores the fake's own answers.
func (h *fakeHub) on(key string, f http.HandlerFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f == nil {
		delete(h.override, key)
		return
	}
	h.override[key] = f
}

func gitHash(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func (h *fakeHub) log() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.requests...)
}

func (h *fakeHub) handle(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests = append(h.requests, fmt.Sprintf("%s %s range=%s auth=%s", r.Method, r.URL.Path, r.Header.Get("Range"), r.Header.Get("Authorization")))
	h.mu.Unlock()
	if h.token != "" && r.Header.Get("Authorization") != "Bearer "+h.token {
		w.Header().Set("X-Error-Code", "GatedRepo")
		http.Error(w, "gated", http.StatusUnauthorized)
		return
	}
	p := r.URL.Path
	if !strings.HasPrefix(p, "/api/") {
		name := p[strings.LastIndex(p, "/")+1:]
		h.mu.Lock()
		f := h.override[r.Method+" "+name]
		if f == nil {
			f = h.override[name]
		}
		h.mu.Unlock()
		if f != nil {
			f(w, r)
			return
		}
	}
	if rest, ok := strings.CutPrefix(p, "/api/models/"+h.repo+"/revision/"); ok {
		if rest != "main" && rest != testCommit {
			w.Header().Set("X-Error-Code", "RevisionNotFound")
			http.Error(w, "no revision", http.StatusNotFound)
			return
		}
		var info repoInfo
		info.Sha = testCommit
		for name, body := range h.files {
			s := sibling{Rfilename: name}
			if r.URL.Query().Get("blobs") == "true" && !h.bare {
				size := int64(len(body))
				s.Size = &size
				s.BlobID = gitHash(body)
				if h.lfs[name] {
					s.BlobID = gitHash([]byte("pointer"))
					s.LFS = &struct {
						SHA256 string `json:"sha256"`
						Size   *int64 `json:"size"`
					}{sha(body), &size}
				}
			}
			if l, ok := h.list[name]; ok {
				s = l
			}
			info.Siblings = append(info.Siblings, s)
		}
		json.NewEncoder(w).Encode(info)
		return
	}
	if strings.HasPrefix(p, "/api/models/") {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "no repo", http.StatusUnauthorized)
		return
	}
	if name, ok := strings.CutPrefix(p, "/cdn/"); ok {
		h.content(w, r, name)
		return
	}
	rest, ok := strings.CutPrefix(p, "/"+h.repo+"/resolve/")
	if !ok {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "no repo", http.StatusNotFound)
		return
	}
	rev, name, _ := strings.Cut(rest, "/")
	body, ok := h.files[name]
	if !ok || (rev != "main" && rev != testCommit) {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "no file", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", testCommit)
	if h.lfs[name] {
		w.Header().Set("X-Linked-Etag", `"`+sha(body)+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(body)))
		w.Header().Set("ETag", `"`+gitHash([]byte("pointer"))+`"`)
		http.Redirect(w, r, h.URL+"/cdn/"+name, http.StatusFound)
		return
	}
	h.content(w, r, name)
}

func (h *fakeHub) content(w http.ResponseWriter, r *http.Request, name string) {
	body := h.files[name]
	etag := gitHash(body)
	if h.lfs[name] {
		etag = sha(body)
	}
	if b, ok := h.serve[name]; ok {
		body = b
	}
	w.Header().Set("ETag", `"`+etag+`"`)
	if n, ok := h.cut[name]; ok && r.Method == http.MethodGet {
		delete(h.cut, name)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body[:n])
		panic(http.ErrAbortHandler) // drop the connection mid-body
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
}

func testFiles() map[string][]byte {
	weights := bytes.Repeat([]byte("0123456789"), 1000)
	return map[string][]byte{
		"config.json":       []byte(`{"model_type": "roformer"}`),
		"vocab.txt":         []byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"),
		"model.safetensors": weights,
		"README.md":         []byte("# not fetched"),
		"pytorch_model.bin": []byte("not fetched either"),
	}
}

func TestDownload(t *testing.T) {
	files := testFiles()
	h := newFakeHub(t, "org/name", files, "model.safetensors", "pytorch_model.bin")
	h.token = "secret"
	cache := t.TempDir()
	var progress bytes.Buffer
	dir, err := Download(context.Background(), "org/name", "", Options{CacheDir: cache, Endpoint: h.URL, Token: "secret", Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(cache, "models--org--name", "snapshots", testCommit)
	if dir != want {
		t.Fatalf("dir %s, want %s", dir, want)
	}
	for _, f := range []string{"config.json", "vocab.txt", "model.safetensors"} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.Equal(got, files[f]) {
			t.Errorf("%s: %v, content equal %v", f, err, bytes.Equal(got, files[f]))
		}
		target, err := os.Readlink(filepath.Join(dir, f))
		if err != nil || !strings.HasPrefix(target, filepath.Join("..", "..", "blobs")+string(filepath.Separator)) {
			t.Errorf("%s links to %q (%v), want ../../blobs/<etag>", f, target, err)
		}
	}
	if _, err := os.Stat(filepath.Join(cache, "models--org--name", "blobs", sha(files["model.safetensors"]))); err != nil {
		t.Errorf("the LFS blob is not named by its sha256: %v", err)
	}
	for _, f := range []string{"README.md", "pytorch_model.bin"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was fetched", f)
		}
	}
	ref, err := os.ReadFile(filepath.Join(cache, "models--org--name", "refs", "main"))
	if err != nil || string(ref) != testCommit {
		t.Errorf("refs/main = %q, %v", ref, err)
	}
	sawCDN := false
	for _, r := range h.log() {
		if !strings.Contains(r, "auth=Bearer secret") {
			t.Errorf("request without the token: %s", r)
		}
		if strings.HasPrefix(r, "GET /cdn/model.safetensors") {
			sawCDN = true
		}
	}
	if !sawCDN {
		t.Errorf("the LFS file was not fetched through its redirect: %v", h.log())
	}
	if got, want := strings.Count(progress.String(), "fetching"), 3; got != want {
		t.Errorf("%d progress lines, want %d:\n%s", got, want, progress.String())
	}

	// Resolution finds it; a second download fetches nothing.
	for _, ref := range []string{"org/name", "org/name@main", "org/name@" + testCommit} {
		got, err := ResolveIn(cache, ref)
		if err != nil || got != want {
			t.Errorf("ResolveIn(%s) = %s, %v", ref, got, err)
		}
	}
	n := len(h.log())
	if _, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL, Token: "secret"}); err != nil {
		t.Fatal(err)
	}
	if extra := h.log()[n:]; len(extra) != 1 {
		t.Errorf("a second download made requests beyond the file list: %v", extra)
	}
}

func TestDownloadTokenFromEnv(t *testing.T) {
	h := newFakeHub(t, "org/name", testFiles(), "model.safetensors")
	h.token = "from-env"
	t.Setenv("HF_TOKEN", "from-env")
	t.Setenv("HF_ENDPOINT", h.URL)
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	if _, err := Download(context.Background(), "org/name", "main", Options{}); err != nil {
		t.Fatal(err)
	}
	if r := h.log()[0]; !strings.Contains(r, "auth=Bearer from-env") {
		t.Errorf("HF_TOKEN not sent: %s", r)
	}
}

func TestDownloadErrors(t *testing.T) {
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HUGGING_FACE_HUB_TOKEN", "")
	h := newFakeHub(t, "org/name", testFiles(), "model.safetensors")
	ctx := context.Background()

	h.token = "secret"
	_, err := Download(ctx, "org/name", "main", Options{CacheDir: t.TempDir(), Endpoint: h.URL})
	if err == nil || !strings.Contains(err.Error(), "org/name") || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Errorf("no token: %v", err)
	}
	h.token = ""

	_, err = Download(ctx, "org/other", "main", Options{CacheDir: t.TempDir(), Endpoint: h.URL})
	if err == nil || !strings.Contains(err.Error(), "org/other") || !strings.Contains(err.Error(), "401") {
		t.Errorf("missing repo: %v", err)
	}
	_, err = Download(ctx, "org/name", "v9", Options{CacheDir: t.TempDir(), Endpoint: h.URL})
	if err == nil || !strings.Contains(err.Error(), "no such revision") {
		t.Errorf("missing revision: %v", err)
	}

	// The file list names a file the resolve endpoint does not have.
	h.files["tokenizer.json"] = []byte("{}")
	o := Options{Endpoint: h.URL}.withDefaults()
	client, _ := o.newClient()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	d := downloader{o: o, client: client, repo: "org/name", commit: testCommit, root: root}
	err = d.file(ctx, "missing.json")
	if err == nil || !strings.Contains(err.Error(), "org/name") || !strings.Contains(err.Error(), "missing.json") || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing file: %v", err)
	}

	if _, err := Download(ctx, "not a repo", "main", Options{CacheDir: t.TempDir(), Endpoint: h.URL}); err == nil {
		t.Error("a bad repo id was accepted")
	}
}

func TestDownloadRejectsCorruptBody(t *testing.T) {
	for _, name := range []string{"model.safetensors", "vocab.txt"} { // sha256, git hash
		t.Run(name, func(t *testing.T) {
			files := testFiles()
			h := newFakeHub(t, "org/name", files, "model.safetensors")
			bad := bytes.Clone(files[name])
			bad[3] ^= 1
			h.serve[name] = bad
			cache := t.TempDir()
			_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
			if err == nil || !strings.Contains(err.Error(), "corrupted") || !strings.Contains(err.Error(), name) {
				t.Fatalf("got %v, want a corrupted-download error naming %s", err, name)
			}
			blobs, _ := os.ReadDir(filepath.Join(cache, "models--org--name", "blobs"))
			for _, b := range blobs {
				if strings.HasSuffix(b.Name(), ".incomplete") {
					t.Errorf("the corrupt partial file %s was left", b.Name())
				}
			}
			if _, err := os.Lstat(filepath.Join(cache, "models--org--name", "snapshots", testCommit, name)); err == nil {
				t.Error("the corrupt file was linked into the snapshot")
			}
		})
	}
}

func TestDownloadResumes(t *testing.T) {
	files := testFiles()
	w := files["model.safetensors"]
	h := newFakeHub(t, "org/name", files, "model.safetensors")
	cache := t.TempDir()
	blobs := filepath.Join(cache, "models--org--name", "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blobs, sha(w)+".incomplete"), w[:4321], 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors")); !bytes.Equal(got, w) {
		t.Error("the resumed file differs")
	}
	found := false
	for _, r := range h.log() {
		if strings.HasPrefix(r, "GET /cdn/model.safetensors range=bytes=4321-") {
			found = true
		}
	}
	if !found {
		t.Errorf("no Range request from byte 4321: %v", h.log())
	}
}

func TestDownloadResumesAfterCut(t *testing.T) {
	files := testFiles()
	h := newFakeHub(t, "org/name", files, "model.safetensors")
	h.cut["model.safetensors"] = 5000
	cache := t.TempDir()
	_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
	if err == nil || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("a cut transfer: %v", err)
	}
	dir, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors")); !bytes.Equal(got, files["model.safetensors"]) {
		t.Error("the resumed file differs")
	}
	log := strings.Join(h.log(), "\n")
	if !strings.Contains(log, "range=bytes=5000-") {
		t.Errorf("no resume from byte 5000:\n%s", log)
	}
}

func TestDownloadSharded(t *testing.T) {
	files := testFiles()
	delete(files, "model.safetensors")
	delete(files, "pytorch_model.bin")
	files["model.safetensors.index.json"] = []byte(`{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}}`)
	files["model-00001-of-00002.safetensors"] = []byte("shard one")
	files["model-00002-of-00002.safetensors"] = []byte("shard two")
	h := newFakeHub(t, "org/name", files, "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
	dir, err := Download(context.Background(), "org/name", "main", Options{CacheDir: t.TempDir(), Endpoint: h.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		if got, _ := os.ReadFile(filepath.Join(dir, f)); !bytes.Equal(got, files[f]) {
			t.Errorf("%s differs", f)
		}
	}
}

// fakeCache lays out a cache folder with one snapshot per commit and the refs given.
func fakeCache(t *testing.T, repo string, refs map[string]string, commits ...string) string {
	cache := t.TempDir()
	rd := RepoDir(cache, repo)
	for _, c := range commits {
		if err := os.MkdirAll(filepath.Join(rd, "snapshots", c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, c := range refs {
		p := filepath.Join(rd, "refs", filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(c+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cache
}

func TestResolve(t *testing.T) {
	c1 := strings.Repeat("a", 40)
	c2 := strings.Repeat("b", 40)
	cache := fakeCache(t, "org/name", map[string]string{"main": c1, "v2": c2, "refs/pr/1": c2}, c1, c2)
	t.Setenv("HF_HUB_CACHE", cache)
	snap := func(c string) string { return filepath.Join(cache, "models--org--name", "snapshots", c) }
	for ref, want := range map[string]string{
		"org/name":             snap(c1),
		"org/name@main":        snap(c1),
		"org/name@v2":          snap(c2),
		"org/name@refs/pr/1":   snap(c2),
		"org/name@" + c2:       snap(c2),
		"no/such/path/at/all":  "no/such/path/at/all", // not a model id: stays a path
		"./org/name":           "./org/name",
		"/abs/model":           "/abs/model",
		"single-name-stays-so": "single-name-stays-so",
	} {
		got, err := Resolve(ref)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}

	// An existing folder wins over the cache.
	local := filepath.Join(t.TempDir(), "org", "name")
	os.MkdirAll(local, 0o755)
	if got, err := Resolve(local); err != nil || got != local {
		t.Errorf("Resolve(folder) = %q, %v", got, err)
	}
	t.Chdir(filepath.Dir(filepath.Dir(local)))
	if got, err := Resolve("org/name"); err != nil || got != "org/name" {
		t.Errorf("Resolve(relative folder org/name) = %q, %v", got, err)
	}
}

func TestResolveMissing(t *testing.T) {
	cache := fakeCache(t, "org/name", map[string]string{"main": strings.Repeat("a", 40)}, strings.Repeat("a", 40))
	for _, tc := range []struct{ ref, want string }{
		{"org/absent", "roformer download org/absent`"},
		{"org/name@v3", "roformer download org/name --revision v3`"},
		{"org/name@" + strings.Repeat("c", 40), "snapshots"},
	} {
		_, err := ResolveIn(cache, tc.ref)
		if err == nil {
			t.Errorf("%s: resolved", tc.ref)
			continue
		}
		for _, s := range []string{tc.want, cache, tc.ref, "not in the Hugging Face cache"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not say %q", tc.ref, err, s)
			}
		}
	}
}

func TestResolveSingleSnapshotWithoutRef(t *testing.T) {
	c := strings.Repeat("d", 40)
	cache := fakeCache(t, "org/name", nil, c)
	got, err := ResolveIn(cache, "org/name")
	if want := filepath.Join(RepoDir(cache, "org/name"), "snapshots", c); err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HF_HOME", "/hf")
	if got := CacheDir(); got != filepath.Join("/hf", "hub") {
		t.Errorf("HF_HOME: %s", got)
	}
	t.Setenv("HF_HUB_CACHE", "/cache")
	if got := CacheDir(); got != "/cache" {
		t.Errorf("HF_HUB_CACHE: %s", got)
	}
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := CacheDir(); got != filepath.Join("/home/u", ".cache", "huggingface", "hub") {
		t.Errorf("default: %s", got)
	}
}
