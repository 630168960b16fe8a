// Package readme_test keeps README.md's package map true.
package readme_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/roformer-go/roformer/"

// testOnly are the packages the map names in prose: test helpers and the
// corpus generator.
var testOnly = []string{"internal/testutil", "internal/testmodel", "internal/golden", "internal/fetch/fetchtest", "data/corpus/gen"}

// TestPackageMap checks README.md's package table against the source: every
// package is listed, its module imports are the ones the table gives, and
// each is listed above the packages that import it.
func TestPackageMap(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := packageRows(t, string(readme))
	order := map[string]int{}
	for i, r := range rows {
		order[r.pkg] = i
	}
	for dir := range sourcePackages(t) {
		if _, ok := order[dir]; !ok && !slices.Contains(testOnly, dir) {
			t.Errorf("package %s is not in README.md's package map", dir)
		}
	}
	for i, r := range rows {
		if r.pkg == "cmd/roformer" {
			continue
		}
		got := moduleImports(t, r.pkg)
		if !slices.Equal(got, r.imports) {
			t.Errorf("README.md says %s imports %v; its source imports %v", r.pkg, r.imports, got)
		}
		for _, imp := range got {
			if j, ok := order[imp]; !ok || j >= i {
				t.Errorf("%s imports %s, which the map does not list above it", r.pkg, imp)
			}
		}
	}
}

type row struct {
	pkg     string
	imports []string
}

var tick = regexp.MustCompile("`([^`]+)`")

func packageRows(t *testing.T, readme string) []row {
	_, table, ok := strings.Cut(readme, "| package | what it holds | imports (this module's) |\n|---|---|---|\n")
	if !ok {
		t.Fatal("README.md has no package table")
	}
	var rows []row
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			break
		}
		cols := strings.Split(line, " | ")
		r := row{pkg: tick.FindStringSubmatch(cols[0])[1]}
		for _, m := range tick.FindAllStringSubmatch(cols[len(cols)-1], -1) {
			r.imports = append(r.imports, m[1])
		}
		slices.Sort(r.imports)
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("README.md's package table has no rows")
	}
	return rows
}

// sourcePackages returns the folders that hold non-test Go files.
func sourcePackages(t *testing.T) map[string]bool {
	pkgs := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && filepath.Dir(path) != "." {
			pkgs[filepath.ToSlash(filepath.Dir(path))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// moduleImports returns the module's packages that dir's non-test files
// import, under any build constraint.
func moduleImports(t *testing.T, dir string) []string {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok {
				set[rest] = true
			}
		}
	}
	var out []string
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
