// Package readme_test keeps README.md and the manual in docs/ true: the
// package map of docs/architecture.md against the source, every relative
// link and anchor against the files and headings it points to, and the
// README's set-up commands and library example against what CI runs and
// what the package's example compiles.
package readme_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

const module = "github.com/roformer-go/roformer/"

// architecture is the page that holds the package map.
const architecture = "docs/architecture.md"

// testOnly are the packages the map names in prose, not in the table: test
// helpers and the corpus generator.
var testOnly = []string{"internal/testutil", "internal/testmodel", "internal/golden", "internal/hostile", "internal/fetch/fetchtest", "data/corpus/gen"}

// TestPackageMap checks docs/architecture.md's package table against the
// source: every package is listed (or named as test-only), its module
// imports under any build constraint are the ones the table gives, and each
// is listed above the packages that import it, so that imports go one way.
func TestPackageMap(t *testing.T) {
	page, err := os.ReadFile(architecture)
	if err != nil {
		t.Fatal(err)
	}
	rows := packageRows(t, string(page))
	order := map[string]int{}
	for i, r := range rows {
		if _, dup := order[r.pkg]; dup {
			t.Errorf("%s lists package %s twice", architecture, r.pkg)
		}
		order[r.pkg] = i
	}
	source := sourcePackages(t)
	for dir := range source {
		_, listed := order[dir]
		switch {
		case slices.Contains(testOnly, dir):
			if !strings.Contains(string(page), "`"+dir+"`") {
				t.Errorf("test-only package %s is not named in %s", dir, architecture)
			}
		case !listed:
			t.Errorf("package %s is not in %s's package map", dir, architecture)
		}
	}
	for i, r := range rows {
		if !source[r.pkg] {
			t.Errorf("%s lists package %s, which has no Go source", architecture, r.pkg)
			continue
		}
		if r.pkg == "cmd/roformer" {
			continue
		}
		got := moduleImports(t, r.pkg)
		if !slices.Equal(got, r.imports) {
			t.Errorf("%s says %s imports %v; its source imports %v", architecture, r.pkg, r.imports, got)
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

func packageRows(t *testing.T, page string) []row {
	_, table, ok := strings.Cut(page, "| package | what it holds | imports (this module's) |\n|---|---|---|\n")
	if !ok {
		t.Fatalf("%s has no package table", architecture)
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
		t.Fatalf("%s's package table has no rows", architecture)
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
		// docs/ holds the scripts that regenerate results (//go:build
		// ignore programs), not packages of the library.
		if d.IsDir() && path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || path == "docs") {
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
// import, under any build constraint (go list would see only this
// platform's files).
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

// TestLinks checks every relative link of README.md and docs/*.md: the file
// it names exists, and its #anchor, if any, is a heading of that page under
// GitHub's rules (see anchor).
func TestLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"README.md"}, pages...)
	anchors := map[string]map[string]bool{} // page → its headings' anchors
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(text))
		anchors[page] = a
		return a
	}
	checked := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if fences := fenceLines(string(text)); fences%2 != 0 {
			t.Errorf("%s: %d lines open or close a code block: one is left open, and the rest of the page reads as code", page, fences)
		}
		for _, l := range links(string(text)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			checked++
			file, frag, _ := strings.Cut(l.target, "#")
			target := page
			if file != "" {
				target = path.Join(path.Dir(page), file)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", page, l.line, l.target, target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", page, l.line, l.target)
				continue
			}
			if !anchorsOf(target)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", page, l.line, l.target, target, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link reader is broken")
	}
}

type link struct {
	target string
	line   int
}

var (
	linkRE = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	codeRE = regexp.MustCompile("`[^`]*`")

	headingLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// links returns the targets of the Markdown links and images of text,
// outside fenced code blocks and code spans.
func links(text string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = codeRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, link{target: m[1], line: i + 1})
		}
	}
	return out
}

// fenceLines counts the lines of text that open or close a fenced code
// block.
func fenceLines(text string) int {
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			n++
		}
	}
	return n
}

// headingAnchors returns the anchors GitHub gives the ATX headings of a
// page outside fenced code blocks, the second of two equal ones suffixed -1,
// the third -2, and so on.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if len(line)-len(title) > 6 || (title != "" && title[0] != ' ') {
			continue // not a heading: #hashtag, or more than six #
		}
		a := anchor(title)
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// anchor is GitHub's anchor of a heading's text: the text of its links
// kept and their targets dropped, lower-cased, every character but letters,
// digits, spaces, '-' and '_' dropped, and each space made a '-'.
func anchor(title string) string {
	title = headingLinkRE.ReplaceAllString(strings.TrimSpace(title), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	for title, want := range map[string]string{
		"Exposing the server":                                                "exposing-the-server",
		"The ceiling at 8×128":                                               "the-ceiling-at-8128",
		"OpenBLAS's kernel set on Zen 4":                                     "openblass-kernel-set-on-zen-4",
		"Against the targets of issue #12":                                   "against-the-targets-of-issue-12",
		"`roformer serve`: routes, in brief":                                 "roformer-serve-routes-in-brief",
		"Dependencies, and why":                                              "dependencies-and-why",
		"5.1 In Chinese: a Tang or a Song poet? (`long-text-zh`; issue #18)": "51-in-chinese-a-tang-or-a-song-poet-long-text-zh-issue-18",
	} {
		if got := anchor(title); got != want {
			t.Errorf("anchor(%q) = %q, want %q", title, got, want)
		}
	}
	a := headingAnchors("# A\n## A\n```\n# A\n```\n### A\n#tag\n")
	if !a["a"] || !a["a-1"] || !a["a-2"] || a["a-3"] || a["tag"] {
		t.Errorf("headingAnchors: %v, want a, a-1, a-2", a)
	}
}

// TestReadmeSetUp checks that README.md gives, in one fenced block near
// its top, exactly the two set-up commands, and that the second is the test
// command .ci/run runs ("The README's test command").
func TestReadmeSetUp(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "```\ngo run ./cmd/roformer pretrain\ngo test ./...\n```\n"
	i := strings.Index(string(readme), want)
	if i < 0 {
		t.Fatalf("README.md has no block with exactly the two set-up commands:\n%s", want)
	}
	if lines := strings.Count(string(readme[:i]), "\n"); lines > 20 {
		t.Errorf("the set-up commands start on README.md's line %d, beyond its first screen (20 lines)", lines+1)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(ci), "# The README's test command.\n")
	if !ok || !strings.HasPrefix(after, "go test ./...\n") {
		t.Error(`.ci/run does not run "go test ./..." after "# The README's test command."`)
	}
	if !strings.Contains(string(readme[:i+len(want)+1500]), "(docs/architecture.md)") {
		t.Error("README.md does not link docs/architecture.md within its first screen after the set-up commands")
	}
}

// TestReadmeExample checks that every line of README.md's Go example is a
// line of the runnable example its section links to, so that the README shows code that
// compiles and whose output go test checks.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	if !ok {
		t.Fatal("README.md has no Go example")
	}
	code, _, _ := strings.Cut(rest, "```")
	_, section, _ := strings.Cut(string(readme), "\n## As a library\n")
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile(`\]\(([^)]+_test\.go)\)`).FindStringSubmatch(section)
	if m == nil {
		t.Fatal("README.md's section \"As a library\" does not link the example file its Go example comes from")
	}
	src, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(src), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, l := range strings.Split(code, "\n") {
		if l = strings.TrimSpace(l); l != "" && l != "..." && !have[l] {
			t.Errorf("README.md's example line %q is not in %s", l, m[1])
		}
	}
}

// TestReadmeDependencies checks that README.md's "Dependencies, and why"
// names every module that go.mod requires directly.
func TestReadmeDependencies(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Dependencies, and why\n")
	if !ok {
		t.Fatal(`README.md has no section "Dependencies, and why"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	direct := 0
	for _, line := range strings.Split(string(mod), "\n") {
		f := strings.Fields(line)
		if strings.HasPrefix(line, "require ") && len(f) >= 3 && f[1] != "(" {
			f = f[1:] // require path version
		} else if !strings.HasPrefix(line, "\t") || len(f) < 2 {
			continue
		}
		if strings.Contains(line, "// indirect") {
			continue
		}
		direct++
		if !strings.Contains(section, "`"+f[0]+"`") {
			t.Errorf("go.mod requires %s, which README.md's \"Dependencies, and why\" does not name", f[0])
		}
	}
	if direct == 0 {
		t.Fatal("no direct requirement read from go.mod")
	}
}
