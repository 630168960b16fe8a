// Package fetchtest is the fake download of package fetch's tests, and of
// the tests of packages that fetch through it: fetch.Runner replaced by a
// stand-in for npm, apt-get and dpkg-deb that copies a local file where the
// client would have written its download. No test reaches the network.
package fetchtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/internal/fetch"
)

// Fake stands in for the package clients.
type Fake struct {
	File  string   // the local file that is the download
	Fail  string   // a client that fails as if offline ("npm", "apt-get")
	Calls []string // each command, as "name arg…"
}

// Use installs a fake whose download is a copy of body (written to a
// temporary file) as fetch.Runner until the test ends.
func Use(t testing.TB, body []byte) *Fake {
	t.Helper()
	f := &Fake{File: filepath.Join(t.TempDir(), "download")}
	if err := os.WriteFile(f.File, body, 0o644); err != nil {
		t.Fatal(err)
	}
	old := fetch.Runner
	fetch.Runner = f.run
	t.Cleanup(func() { fetch.Runner = old })
	return f
}

// SHA256 is the hex digest of the download.
func (f *Fake) SHA256() string {
	b, _ := os.ReadFile(f.File)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// run is fetch.Runner: npm pack and apt-get download copy the file into dir
// (as pkg-1.0.0.tgz, pkg_1.0_all.deb), dpkg-deb -x writes usr/share/file
// with "data" into its target folder.
func (f *Fake) run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	f.Calls = append(f.Calls, name+" "+strings.Join(args, " "))
	if name == f.Fail {
		return nil, errors.New("exit status 1: network unreachable")
	}
	switch name {
	case "npm":
		return []byte("pkg-1.0.0.tgz\n"), f.copyTo(filepath.Join(dir, "pkg-1.0.0.tgz"))
	case "apt-get":
		return nil, f.copyTo(filepath.Join(dir, "pkg_1.0_all.deb"))
	case "dpkg-deb":
		target := args[len(args)-1]
		if err := os.MkdirAll(filepath.Join(target, "usr/share"), 0o755); err != nil {
			return nil, err
		}
		return nil, os.WriteFile(filepath.Join(target, "usr/share/file"), []byte("data"), 0o644)
	}
	return nil, errors.New("unexpected command " + name)
}

func (f *Fake) copyTo(path string) error {
	b, err := os.ReadFile(f.File)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Tgz returns a gzipped tar of the regular files given by path.
func Tgz(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
