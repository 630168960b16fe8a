package hub

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/roformer-go/roformer/checkpoint"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The download's answers to a server that lies, stalls or redirects the
// token away. Each hostile Hub below is a fakeHub with some answers
// replaced (fakeHub.on).

// cacheFiles returns the size of every regular file under dir by its path
// relative to dir.
func cacheFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			fi, _ := e.Info()
			rel, _ := filepath.Rel(dir, p)
			out[rel] = fi.Size()
		}
		return nil
	})
	return out
}

// endless writes chunks of b until the client goes away or max bytes are
// out, counting what was written.
func endless(w http.ResponseWriter, b []byte, max int64, sent *atomic.Int64) {
	w.(http.Flusher).Flush() // no Content-Length: chunked
	for sent.Load() < max {
		n, err := w.Write(b)
		sent.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// A body longer than the size announced (by the file list, HEAD, or the
// body's own Content-Length) fails as soon as it passes that size, and
// nothing beyond it reaches the disk.
func TestDownloadRefusesLongerBody(t *testing.T) {
	files := testFiles()
	files["config.json"] = bytes.Repeat([]byte("c"), 100)
	const flood = 64 << 20
	chunk := bytes.Repeat([]byte("c"), 32<<10) // the first 100 bytes are the true file: its hash would match
	for _, tc := range []struct {
		name     string
		bare     bool // the file list gives no sizes: HEAD's Content-Length is the announcement
		cdn      bool // the LFS weights file through the CDN, instead of config.json
		bodySize bool // the GET answer declares its (longer) Content-Length
		want     string
	}{
		{name: "list size", want: "more than the 100 bytes it announced"},
		{name: "HEAD size", bare: true, want: "more than the 100 bytes it announced"},
		{name: "LFS X-Linked-Size", bare: true, cdn: true, want: "more than the 100 bytes it announced"},
		{name: "Content-Length", bodySize: true, want: "Content-Length 67108864"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := testFiles()
			files["config.json"] = bytes.Repeat([]byte("c"), 100)
			files["model.safetensors"] = bytes.Repeat([]byte("c"), 100)
			h := newFakeHub(t, "org/name", files, "model.safetensors")
			h.bare = tc.bare
			name, path := "config.json", "/org/name/resolve/"+testCommit+"/config.json"
			if tc.cdn {
				name, path = "model.safetensors", "/cdn/model.safetensors"
			}
			var sent atomic.Int64
			h.on("GET "+name, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != path {
					t.Errorf("GET %s, want %s", r.URL.Path, path)
				}
				w.Header().Set("ETag", `"`+gitHash(files[name])+`"`)
				if tc.bodySize {
					w.Header().Set("Content-Length", fmt.Sprint(flood))
				}
				endless(w, chunk, flood, &sent)
			})
			cache := t.TempDir()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), name) {
				t.Fatalf("got %v, want an error naming %s and saying %q", err, name, tc.want)
			}
			t.Logf("%v (server wrote %d bytes before the client hung up)", err, sent.Load())
			for p, n := range cacheFiles(t, cache) {
				if n > 100 {
					t.Errorf("%s holds %d bytes on disk, over the 100 announced", p, n)
				}
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
				t.Errorf("the download allocated %d bytes for a 100-byte file", alloc)
			}
		})
	}
}

// A weights file of no announced size is refused before a byte is written;
// a text file of no announced size is read up to MaxTextSize.
func TestDownloadUnknownSize(t *testing.T) {
	files := testFiles()
	files["vocab.txt"] = bytes.Repeat([]byte("w\n"), 1000)
	h := newFakeHub(t, "org/name", files, "model.safetensors")
	h.bare = true
	noSize := func(name string, body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"`+sha(body)+`"`)
			if r.Method == http.MethodHead {
				return // no Content-Length on a HEAD that writes nothing
			}
			w.(http.Flusher).Flush()
			w.Write(body)
		}
	}
	h.on("vocab.txt", noSize("vocab.txt", files["vocab.txt"]))
	h.on("model.safetensors", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Linked-Etag", `"`+sha(files["model.safetensors"])+`"`)
		http.Redirect(w, r, h.URL+"/cdn/weights", http.StatusFound) // no X-Linked-Size
	})
	h.on("weights", noSize("model.safetensors", files["model.safetensors"]))

	cache := t.TempDir()
	_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
	if err == nil || !strings.Contains(err.Error(), "model.safetensors") || !strings.Contains(err.Error(), "no size") {
		t.Fatalf("weights of no size: %v", err)
	}
	for p := range cacheFiles(t, cache) {
		if strings.Contains(p, sha(files["model.safetensors"])) {
			t.Errorf("%s: left of weights of no size", p)
		}
	}
	// The text file before it was accepted, within the cap.
	snap := filepath.Join(cache, "models--org--name", "snapshots", testCommit)
	if got, err := os.ReadFile(filepath.Join(snap, "vocab.txt")); err != nil || !bytes.Equal(got, files["vocab.txt"]) {
		t.Errorf("vocab.txt of no size, under the cap: %v", err)
	}

	// Over the cap: refused, no more than the cap on disk.
	big := bytes.Repeat([]byte("w\n"), 1<<20)
	files["vocab.txt"] = big
	h.on("vocab.txt", noSize("vocab.txt", big))
	cache = t.TempDir()
	_, err = Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL, MaxTextSize: 4096})
	if err == nil || !strings.Contains(err.Error(), "vocab.txt") || !strings.Contains(err.Error(), "longer than the 4096 bytes") {
		t.Fatalf("text of no size over the cap: %v", err)
	}
	for p, n := range cacheFiles(t, cache) {
		if n > 4096 {
			t.Errorf("%s: %d bytes on disk, over the 4096 cap", p, n)
		}
	}
	// Announced over the cap: refused before the GET.
	h.bare = false
	h.on("vocab.txt", nil)
	n := len(h.log())
	_, err = Download(context.Background(), "org/name", "main", Options{CacheDir: t.TempDir(), Endpoint: h.URL, MaxTextSize: 4096})
	if err == nil || !strings.Contains(err.Error(), "announced 2097152 bytes, over the 4096") {
		t.Fatalf("text announced over the cap: %v", err)
	}
	for _, r := range h.log()[n:] {
		if strings.HasPrefix(r, "GET") && strings.Contains(r, "vocab.txt") {
			t.Errorf("fetched a text file announced over the cap: %s", r)
		}
	}
}

// A body that stops sending fails within the idle bound, saying so and
// how far it came; the next download resumes from there. The bound holds
// for a caller's client too.
func TestDownloadStalledBody(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("own client %v", own), func(t *testing.T) {
			files := testFiles()
			w := files["model.safetensors"] // 10,000 bytes
			h := newFakeHub(t, "org/name", files, "model.safetensors")
			release := make(chan struct{})
			defer close(release)
			h.on("GET model.safetensors", func(rw http.ResponseWriter, r *http.Request) {
				if !strings.HasPrefix(r.URL.Path, "/cdn/") {
					t.Errorf("GET %s, want the CDN's address", r.URL.Path)
				}
				rw.Header().Set("Content-Length", fmt.Sprint(len(w)))
				rw.Write(w[:1000])
				rw.(http.Flusher).Flush()
				select { // stall, holding the connection open
				case <-release:
				case <-r.Context().Done():
				}
			})
			opts := Options{CacheDir: t.TempDir(), Endpoint: h.URL, IdleTimeout: 200 * time.Millisecond}
			if own {
				opts.Client = &http.Client{} // no timeouts of its own
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			_, err := Download(ctx, "org/name", "main", opts)
			took := time.Since(start)
			want := fmt.Sprintf("no bytes for 200ms from %s/cdn/model.safetensors after 1000 of 10000 bytes", h.URL)
			if err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v (after %v), want %q", err, took, want)
			}
			t.Logf("%v, after %v", err, took)

			h.on("GET model.safetensors", nil)
			dir, err := Download(context.Background(), "org/name", "main", opts)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors")); !bytes.Equal(got, w) {
				t.Error("the resumed file differs")
			}
			if log := strings.Join(h.log(), "\n"); !strings.Contains(log, "GET /cdn/model.safetensors range=bytes=1000-") {
				t.Errorf("no resume from byte 1000:\n%s", log)
			}
		})
	}
}

// A server that never answers fails within the header bound, for a
// caller's client too.
func TestDownloadStalledHeaders(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("own client %v", own), func(t *testing.T) {
			h := newFakeHub(t, "org/name", testFiles(), "model.safetensors")
			release := make(chan struct{})
			defer close(release)
			h.on("HEAD config.json", func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done():
				}
			})
			opts := Options{CacheDir: t.TempDir(), Endpoint: h.URL, HeaderTimeout: 200 * time.Millisecond, ConnectTimeout: 100 * time.Millisecond, TLSHandshakeTimeout: 100 * time.Millisecond}
			if own {
				opts.Client = &http.Client{Transport: &http.Transport{}} // a transport with no timeouts
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := Download(ctx, "org/name", "main", opts)
			if err == nil || !strings.Contains(err.Error(), "config.json") || !strings.Contains(err.Error(), "timeout awaiting response headers") && !strings.Contains(err.Error(), "no answer within 400ms") {
				t.Fatalf("got %v, want a header timeout naming config.json", err)
			}
			t.Log(err)
		})
	}
}

// The token goes to the endpoint's origin, through a redirect within it,
// and never to another origin: not to the CDN that HEAD names, nor through
// a redirect of the GET, nor to another port of the same host (which
// net/http alone would let it reach).
func TestDownloadTokenStaysHome(t *testing.T) {
	files := testFiles()
	var mu sync.Mutex
	var other []string
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		other = append(other, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(files[name]))
	}))
	defer cdn.Close()
	h := newFakeHub(t, "org/name", files, "model.safetensors")
	h.token = "secret"
	// LFS: HEAD redirects to the CDN, on another port of 127.0.0.1.
	h.on("model.safetensors", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			t.Errorf("the resolve request lacked the token")
		}
		w.Header().Set("X-Linked-Etag", `"`+sha(files["model.safetensors"])+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(files["model.safetensors"])))
		http.Redirect(w, r, cdn.URL+"/lfs/model.safetensors", http.StatusFound)
	})
	// vocab.txt: HEAD answers directly, GET redirects to the other server.
	h.on("GET vocab.txt", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, cdn.URL+"/redirected/vocab.txt", http.StatusTemporaryRedirect)
	})
	// config.json: a redirect within the origin (a renamed repo) keeps it.
	h.on("config.json", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/org/name/") {
			http.Redirect(w, r, "/org/renamed/resolve/"+testCommit+"/config.json", http.StatusTemporaryRedirect)
			return
		}
		if r.Header.Get("Authorization") != "Bearer secret" {
			t.Errorf("%s %s: the same-origin redirect dropped the token", r.Method, r.URL.Path)
		}
		w.Header().Set("ETag", `"`+gitHash(files["config.json"])+`"`)
		http.ServeContent(w, r, "config.json", time.Time{}, bytes.NewReader(files["config.json"]))
	})
	dir, err := Download(context.Background(), "org/name", "main", Options{CacheDir: t.TempDir(), Endpoint: h.URL, Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "vocab.txt", "model.safetensors"} {
		if got, _ := os.ReadFile(filepath.Join(dir, f)); !bytes.Equal(got, files[f]) {
			t.Errorf("%s differs", f)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(other) != 2 {
		t.Errorf("the other server saw %d requests, want 2 (the LFS file and the redirected vocab.txt): %v", len(other), other)
	}
	for _, r := range other {
		if !strings.HasSuffix(r, "auth=") {
			t.Errorf("the token reached another origin: %s", r)
		}
	}
	for _, r := range h.log() {
		if !strings.Contains(r, "auth=Bearer secret") {
			t.Errorf("a request to the endpoint without the token: %s", r)
		}
	}
}

// An ETag that is not a hash is refused, so nothing is stored unverified
// and two files can never share a blob by a made-up name; so is one that
// disagrees with the file list, and an announced size that disagrees.
func TestDownloadRefusesBadETags(t *testing.T) {
	for _, tc := range []struct{ name, etag, want string }{
		{"not a hash", `"same-for-all"`, "is not a sha256 or git blob hash"},
		{"traversal", `"../../../outside"`, "is not a sha256 or git blob hash"},
		{"too short", `"abcdef"`, "is not a sha256 or git blob hash"},
		{"another file's hash", `"` + gitHash([]byte("other")) + `"`, "the file list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHub(t, "org/name", testFiles(), "model.safetensors")
			h.on("config.json", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("ETag", tc.etag)
				w.Write(testFiles()["config.json"])
			})
			cache := t.TempDir()
			_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
			if err == nil || !strings.Contains(err.Error(), "config.json") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ETag %s: got %v, want %q", tc.etag, err, tc.want)
			}
			if files := cacheFiles(t, cache); len(files) != 0 {
				t.Errorf("files written: %v", files)
			}
		})
	}
	h := newFakeHub(t, "org/name", testFiles(), "model.safetensors")
	h.on("HEAD vocab.txt", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"`+gitHash(testFiles()["vocab.txt"])+`"`)
		w.Header().Set("Content-Length", "7")
	})
	_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: t.TempDir(), Endpoint: h.URL})
	if err == nil || !strings.Contains(err.Error(), "vocab.txt: the server announces 7 bytes, the file list 31") {
		t.Fatalf("sizes that disagree: %v", err)
	}
}

// With no hash in the file list, the ETag alone is checked: a body that
// does not match its ETag is refused (TestDownloadRejectsCorruptBody checks
// the same with the file list's hashes).
func TestDownloadVerifiesWithoutFileList(t *testing.T) {
	for _, name := range []string{"model.safetensors", "vocab.txt"} {
		t.Run(name, func(t *testing.T) {
			files := testFiles()
			h := newFakeHub(t, "org/name", files, "model.safetensors")
			h.bare = true
			bad := bytes.Clone(files[name])
			bad[0] ^= 1
			h.serve[name] = bad
			cache := t.TempDir()
			_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
			if err == nil || !strings.Contains(err.Error(), "corrupted download") || !strings.Contains(err.Error(), name) {
				t.Fatalf("got %v", err)
			}
			for p := range cacheFiles(t, cache) {
				if strings.Contains(p, "blobs") && !isHash(filepath.Base(p)) {
					continue
				}
				if strings.Contains(p, "blobs") {
					checkBlobName(t, filepath.Join(cache, p))
				}
			}
		})
	}
}

// checkBlobName checks that the blob's content has the hash it is named by.
func checkBlobName(t *testing.T, blob string) {
	t.Helper()
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(blob)
	var got string
	if len(name) == 64 {
		s := sha256.Sum256(data)
		got = hex.EncodeToString(s[:])
	} else {
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", len(data))
		h.Write(data)
		got = hex.EncodeToString(h.Sum(nil))
	}
	if got != name {
		t.Errorf("blob %s holds content of hash %s", name, got)
	}
}

// Every blob of a normal download is named by its content's hash, and two
// files are linked to one blob only when their contents are equal; it
// works the same from a file list without sizes and hashes.
func TestDownloadBlobsNamedByHash(t *testing.T) {
	for _, bare := range []bool{false, true} {
		files := testFiles()
		files["tokenizer_config.json"] = files["config.json"] // equal contents share a blob
		h := newFakeHub(t, "org/name", files, "model.safetensors")
		h.bare = bare
		cache := t.TempDir()
		dir, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
		if err != nil {
			t.Fatal(err)
		}
		blobs, _ := os.ReadDir(filepath.Join(cache, "models--org--name", "blobs"))
		if len(blobs) != 3 {
			t.Errorf("bare %v: %d blobs, want 3 (config, vocab, weights)", bare, len(blobs))
		}
		for _, b := range blobs {
			checkBlobName(t, filepath.Join(cache, "models--org--name", "blobs", b.Name()))
		}
		for _, f := range []string{"config.json", "tokenizer_config.json", "vocab.txt", "model.safetensors"} {
			if got, _ := os.ReadFile(filepath.Join(dir, f)); !bytes.Equal(got, files[f]) {
				t.Errorf("bare %v: %s differs", bare, f)
			}
		}
	}
}

// Links planted in the repo folder are never followed: not at the
// .incomplete file, not at a blob, not at the blobs folder; a snapshot link
// that the cache did not make is replaced, and the file it pointed to left
// as it was.
func TestDownloadDoesNotFollowPlantedLinks(t *testing.T) {
	files := testFiles()
	w := files["model.safetensors"]
	setup := func(t *testing.T) (cache, repo, outside string) {
		cache = t.TempDir()
		repo = filepath.Join(cache, "models--org--name")
		outside = filepath.Join(t.TempDir(), "precious")
		if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(repo, "blobs"), 0o755); err != nil {
			t.Fatal(err)
		}
		return
	}
	unchanged := func(t *testing.T, outside string) {
		t.Helper()
		if got, err := os.ReadFile(outside); err != nil || string(got) != "precious" {
			t.Errorf("the file outside the cache changed: %q, %v", got, err)
		}
		if entries, _ := os.ReadDir(filepath.Dir(outside)); len(entries) != 1 {
			t.Errorf("files appeared outside the cache: %v", entries)
		}
	}
	h := newFakeHub(t, "org/name", files, "model.safetensors")

	t.Run("incomplete", func(t *testing.T) {
		cache, repo, outside := setup(t)
		if err := os.Symlink(outside, filepath.Join(repo, "blobs", sha(w)+".incomplete")); err != nil {
			t.Fatal(err)
		}
		_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
		if err == nil || !strings.Contains(err.Error(), "model.safetensors") || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("got %v, want a refusal of the link", err)
		}
		unchanged(t, outside)
	})
	t.Run("incomplete inside", func(t *testing.T) { // a link within the repo folder, to another blob
		cache, repo, outside := setup(t)
		victim := filepath.Join(repo, "blobs", "victim")
		os.WriteFile(victim, []byte("victim"), 0o644)
		if err := os.Symlink("victim", filepath.Join(repo, "blobs", sha(w)+".incomplete")); err != nil {
			t.Fatal(err)
		}
		if _, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("got %v, want a refusal of the link", err)
		}
		if got, _ := os.ReadFile(victim); string(got) != "victim" {
			t.Errorf("the blob behind the link changed: %q", got)
		}
		unchanged(t, outside)
	})
	t.Run("blob", func(t *testing.T) {
		cache, repo, outside := setup(t)
		if err := os.Symlink(outside, filepath.Join(repo, "blobs", sha(w))); err != nil {
			t.Fatal(err)
		}
		_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
		if err == nil || !strings.Contains(err.Error(), "is a symbolic link, not a file") {
			t.Fatalf("got %v", err)
		}
		unchanged(t, outside)
	})
	t.Run("blobs folder", func(t *testing.T) {
		cache, repo, outside := setup(t)
		os.Remove(filepath.Join(repo, "blobs"))
		if err := os.Symlink(filepath.Dir(outside), filepath.Join(repo, "blobs")); err != nil {
			t.Fatal(err)
		}
		_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
		if err == nil || !strings.Contains(err.Error(), "escapes") {
			t.Fatalf("got %v, want a path that escapes the repo folder", err)
		}
		unchanged(t, outside)
	})
	t.Run("snapshot link", func(t *testing.T) {
		cache, repo, outside := setup(t)
		snap := filepath.Join(repo, "snapshots", testCommit)
		os.MkdirAll(snap, 0o755)
		if err := os.Symlink(outside, filepath.Join(snap, "config.json")); err != nil {
			t.Fatal(err)
		}
		dir, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "config.json")); !bytes.Equal(got, files["config.json"]) {
			t.Errorf("config.json holds %q", got)
		}
		if target, _ := os.Readlink(filepath.Join(dir, "config.json")); target != filepath.Join("..", "..", "blobs", gitHash(files["config.json"])) {
			t.Errorf("config.json links to %s", target)
		}
		unchanged(t, outside)
	})
	t.Run("cache folder is a link", func(t *testing.T) { // a cache moved to another disk still works
		real := t.TempDir()
		cache := filepath.Join(t.TempDir(), "hub")
		if err := os.Symlink(real, cache); err != nil {
			t.Fatal(err)
		}
		if _, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(real, "models--org--name", "refs", "main")); err != nil {
			t.Error(err)
		}
	})
}

// The idle bound is per read, not on the whole body: a body that keeps
// bringing bytes, more slowly than the bound in all, still downloads.
func TestDownloadSlowBodyIsNotStalled(t *testing.T) {
	files := testFiles()
	w := files["model.safetensors"]
	h := newFakeHub(t, "org/name", files, "model.safetensors")
	h.on("GET model.safetensors", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Length", fmt.Sprint(len(w)))
		for i := 0; i < len(w); i += 500 { // 20 pieces, 30 ms apart: 600 ms in all
			rw.Write(w[i : i+500])
			rw.(http.Flusher).Flush()
			time.Sleep(30 * time.Millisecond)
		}
	})
	dir, err := Download(context.Background(), "org/name", "main", Options{CacheDir: t.TempDir(), Endpoint: h.URL, IdleTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors")); !bytes.Equal(got, w) {
		t.Error("the file differs")
	}
}

// A resumed download is bounded the same way: a 206 answer that goes on
// past the announced size fails there, and one whose Content-Range does
// not fit the file is refused before its body is read.
func TestDownloadResumeBounded(t *testing.T) {
	files := testFiles()
	w := files["model.safetensors"] // 10,000 bytes
	for _, tc := range []struct{ name, contentRange, want string }{
		{"longer body", "bytes 4321-9999/10000", "more than the 10000 bytes it announced"},
		{"other total", "bytes 4321-99999/100000", `got Content-Range "bytes 4321-99999/100000"`},
		{"other start", "bytes 0-9999/10000", `got Content-Range "bytes 0-9999/10000"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHub(t, "org/name", files, "model.safetensors")
			var sent atomic.Int64
			h.on("GET model.safetensors", func(rw http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Range") != "bytes=4321-" {
					t.Errorf("Range %q", r.Header.Get("Range"))
				}
				rw.Header().Set("Content-Range", tc.contentRange)
				rw.WriteHeader(http.StatusPartialContent)
				endless(rw, w[:1000], 64<<20, &sent)
			})
			cache := t.TempDir()
			blobs := filepath.Join(cache, "models--org--name", "blobs")
			os.MkdirAll(blobs, 0o755)
			if err := os.WriteFile(filepath.Join(blobs, sha(w)+".incomplete"), w[:4321], 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: h.URL})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			for p, n := range cacheFiles(t, cache) {
				if n > int64(len(w)) {
					t.Errorf("%s: %d bytes on disk, over the %d announced", p, n, len(w))
				}
			}
		})
	}
}

// The file list is bounded in bytes (refused from its Content-Length, or
// once a body of none passes the limit) and in entries (counted before one
// is decoded); each refusal names the URL, the size or count and the limit.
func TestDownloadBoundsFileList(t *testing.T) {
	pad := strings.Repeat("x", 17<<20) // 17 MiB of model card, valid JSON
	var many strings.Builder
	many.WriteString(`{"sha":"` + testCommit + `","siblings":[`)
	for i := range maxListedFiles + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"rfilename":"f%d"}`, i)
	}
	many.WriteString(`]}`)
	for _, tc := range []struct {
		name    string
		body    string
		chunked bool // no Content-Length
		want    string
	}{
		{"Content-Length", `{"sha":"` + testCommit + `","cardData":"` + pad + `"}`, false, "is %d bytes (Content-Length), more than the 16777216-byte limit"},
		{"chunked", `{"sha":"` + testCommit + `","cardData":"` + pad + `"}`, true, "longer than the 16777216-byte limit"},
		{"entries", many.String(), false, "names 131073 files, more than the limit of 131072"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.want, "%d") {
				tc.want = fmt.Sprintf(tc.want, len(tc.body))
			}
			var sent atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasPrefix(r.URL.Path, "/api/models/org/name/revision/") {
					t.Errorf("%s %s: only the file list should be asked for", r.Method, r.URL.Path)
					http.NotFound(w, r)
					return
				}
				if tc.chunked {
					w.(http.Flusher).Flush()
				} else {
					w.Header().Set("Content-Length", fmt.Sprint(len(tc.body)))
				}
				n, _ := w.Write([]byte(tc.body))
				sent.Add(int64(n))
			}))
			defer srv.Close()
			cache := t.TempDir()
			_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: cache, Endpoint: srv.URL})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), srv.URL+"/api/models/org/name/revision/main") {
				t.Fatalf("got %v, want an error naming the URL and saying %q", err, tc.want)
			}
			t.Logf("%v (server wrote %d bytes)", err, sent.Load())
			if files := cacheFiles(t, cache); len(files) != 0 {
				t.Errorf("the refused list left files: %v", files)
			}
		})
	}
}

// A shard index is bounded in bytes (one the file list announces over the
// limit is not fetched; one on disk over it is not read) and in weight_map
// entries (counted before one is decoded).
func TestDownloadBoundsIndex(t *testing.T) {
	const index = "model.safetensors.index.json"
	sharded := func(idx []byte) map[string][]byte {
		files := testFiles()
		delete(files, "model.safetensors")
		delete(files, "pytorch_model.bin")
		files[index] = idx
		files["s"] = []byte("shard")
		return files
	}

	t.Run("entries", func(t *testing.T) {
		b := []byte(`{"weight_map":{`)
		for i := range checkpoint.MaxIndexTensors + 1 {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, strconv.Itoa(i))
			b = append(b, `:"s"`...)
		}
		b = append(b, "}}"...)
		h := newFakeHub(t, "org/name", sharded(b))
		_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: t.TempDir(), Endpoint: h.URL})
		if err == nil || !strings.Contains(err.Error(), index) || !strings.Contains(err.Error(), "weight_map lists 1048577 tensors, more than the limit of 1048576") {
			t.Fatalf("got %v, want the index's entries refused", err)
		}
		for _, r := range h.log() {
			if strings.Contains(r, "/s ") {
				t.Errorf("fetched a shard of a refused index: %s", r)
			}
		}
	})

	t.Run("announced", func(t *testing.T) {
		files := sharded([]byte(`{"weight_map":{"a":"s"}}`))
		h := newFakeHub(t, "org/name", files)
		size := int64(32<<20 + 1)
		h.list[index] = sibling{Rfilename: index, BlobID: gitHash(files[index]), Size: &size}
		_, err := Download(context.Background(), "org/name", "main", Options{CacheDir: t.TempDir(), Endpoint: h.URL})
		if err == nil || !strings.Contains(err.Error(), index) || !strings.Contains(err.Error(), "33554433 bytes, more than the 33554432-byte limit") {
			t.Fatalf("got %v, want the index refused from its announced size", err)
		}
		for _, r := range h.log() {
			if !strings.Contains(r, "/api/") {
				t.Errorf("a request after the file list refused the index: %s", r)
			}
		}
	})

	t.Run("on disk", func(t *testing.T) {
		dir := t.TempDir()
		f, err := os.Create(filepath.Join(dir, index))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(32<<20 + 1); err != nil { // sparse: no disk used
			t.Fatal(err)
		}
		f.Close()
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if _, err := indexShards(root, index); err == nil || !strings.Contains(err.Error(), "33554433 bytes, more than the 33554432-byte limit") {
			t.Fatalf("got %v, want the index refused from its size", err)
		}
	})
}
