package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// names returns the sorted names in dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// noTemp fails the test if dir holds a temporary name.
func noTemp(t *testing.T, dir string) {
	t.Helper()
	for _, n := range names(t, dir) {
		if strings.HasPrefix(n, TempPrefix) {
			t.Errorf("left behind %s in %s", n, dir)
		}
	}
}

func wantFile(t *testing.T, path, content string, mode fs.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != content {
		t.Errorf("%s holds %q, want %q", path, b, content)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != mode {
		t.Errorf("%s has mode %v, want %v", path, st.Mode().Perm(), mode)
	}
}

func TestWriteFile(t *testing.T) {
	for _, o := range []Options{{}, {NoSync: true}, {Perm: 0o600}} {
		dir := t.TempDir()
		path := filepath.Join(dir, "a.json")
		if err := o.WriteFile(path, []byte("one")); err != nil {
			t.Fatal(err)
		}
		wantFile(t, path, "one", o.perm())
		if err := o.WriteFile(path, []byte("two, longer")); err != nil {
			t.Fatal(err)
		}
		wantFile(t, path, "two, longer", o.perm())
		if got := names(t, dir); !slices.Equal(got, []string{"a.json"}) {
			t.Errorf("folder holds %v", got)
		}
	}
	// The package-level functions use the zero Options.
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "b"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	wantFile(t, filepath.Join(dir, "b"), "b", 0o644)
	if err := Write(filepath.Join(dir, "c"), func(w io.Writer) error {
		_, err := io.WriteString(w, "c")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wantFile(t, filepath.Join(dir, "c"), "c", 0o644)
}

// TestWriteSmallWrites checks that many small writes through the buffer
// all arrive, in order.
func TestWriteSmallWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "many")
	var want strings.Builder
	for i := range 3 * bufSize / 4 {
		fmt.Fprintf(&want, "%d,", i)
	}
	if err := Write(path, func(w io.Writer) error {
		for i := range 3 * bufSize / 4 {
			if _, err := fmt.Fprintf(w, "%d,", i); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, want.String(), 0o644)
}

func TestWriteRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := WriteFile("rel", []byte("x")); err != nil {
		t.Fatal(err)
	}
	wantFile(t, "rel", "x", 0o644)
	noTemp(t, ".")
}

// TestWriteFailingFill checks that a writer failing midway, or panicking,
// leaves the old file as it was and no temporary file, and that its error
// comes back as it is.
func TestWriteFailingFill(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := WriteFile(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error {
		// More than the buffer holds, so that part reached the file.
		if _, err := w.Write(make([]byte, 3*bufSize)); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Errorf("err = %v, want fill's error as it is", err)
	}
	wantFile(t, path, "old", 0o644)
	noTemp(t, dir)

	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not come through")
			}
		}()
		Write(path, func(w io.Writer) error {
			io.WriteString(w, "half")
			panic("fill panics")
		})
	}()
	wantFile(t, path, "old", 0o644)
	noTemp(t, dir)

	// A writer failing on a new path leaves no file at all.
	if err := Write(filepath.Join(dir, "new"), func(io.Writer) error { return boom }); err != boom {
		t.Errorf("err = %v", err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"out"}) {
		t.Errorf("folder holds %v", got)
	}
}

// TestWriteFailures provokes the failures of the steps: a missing folder, a
// parent that is a file and a target that is a folder (which fails the
// rename); each error names the path and leaves nothing behind.
func TestWriteFailures(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := WriteFile(file, []byte("keep")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "folder")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	called := false
	fill := func(w io.Writer) error { called = true; _, err := io.WriteString(w, "x"); return err }
	for _, path := range []string{
		filepath.Join(dir, "missing", "out"),
		filepath.Join(file, "out"),
		target,
	} {
		called = false
		err := Write(path, fill)
		if err == nil || !strings.Contains(err.Error(), "writing "+path+": ") {
			t.Errorf("%s: err = %v, want one naming the path", path, err)
		}
		if path != target && called {
			t.Errorf("%s: fill was called although no file could be made", path)
		}
		if err := WriteFile(path, []byte("x")); err == nil {
			t.Errorf("%s: WriteFile succeeded", path)
		}
	}
	if got := names(t, dir); !slices.Equal(got, []string{"file", "folder"}) {
		t.Errorf("folder holds %v", got)
	}
	if got := names(t, target); len(got) != 0 {
		t.Errorf("target folder holds %v", got)
	}
	wantFile(t, file, "keep", 0o644)
}

func TestWriteUnwritableFolder(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only folders")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := WriteFile(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	err := WriteFile(path, []byte("new"))
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v", err)
	}
	wantFile(t, path, "old", 0o644)
	noTemp(t, dir)
}

func TestStagePublish(t *testing.T) {
	for _, o := range []Options{{}, {NoSync: true}} {
		parent := t.TempDir()
		target := filepath.Join(parent, "out")
		s, err := o.NewStage(target + "/") // an unclean path names the same target
		if err != nil {
			t.Fatal(err)
		}
		defer s.Discard()
		if !strings.HasPrefix(filepath.Base(s.Dir), TempPrefix+"out.partial-") || filepath.Dir(s.Dir) != parent {
			t.Errorf("stage %s", s.Dir)
		}
		if err := os.WriteFile(filepath.Join(s.Dir, "a"), []byte("a"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(s.Dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.Dir, "sub", "b"), []byte("b"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("a", filepath.Join(s.Dir, "link")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(target); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("target exists before Publish: %v", err)
		}
		if err := s.Publish(); err != nil {
			t.Fatal(err)
		}
		wantFile(t, filepath.Join(target, "a"), "a", 0o644)
		wantFile(t, filepath.Join(target, "sub", "b"), "b", 0o644)
		if st, err := os.Stat(target); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("target: %v %v, want a folder with mode 0755", st, err)
		}
		if got := names(t, parent); !slices.Equal(got, []string{"out"}) {
			t.Errorf("parent holds %v", got)
		}
		if err := s.Discard(); err != nil {
			t.Errorf("Discard after Publish: %v", err)
		}
		if got := names(t, target); !slices.Equal(got, []string{"a", "link", "sub"}) {
			t.Errorf("Discard after Publish touched the target: %v", got)
		}
		if err := s.Publish(); err == nil {
			t.Error("a second Publish succeeded")
		}
	}
}

func TestStageReplacesEmptyFolder(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "out")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := NewStage(target)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Discard()
	if err := os.WriteFile(filepath.Join(s.Dir, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(); err != nil {
		t.Fatal(err)
	}
	wantFile(t, filepath.Join(target, "a"), "a", 0o644)
}

// TestStageTargetExists checks that a file or a folder with something in
// it at the target is left as it is, and that the stage stays until
// Discard.
func TestStageTargetExists(t *testing.T) {
	for _, kind := range []string{"file", "folder", "link"} {
		parent := t.TempDir()
		target := filepath.Join(parent, "out")
		switch kind {
		case "file":
			if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
		case "folder":
			if err := os.MkdirAll(filepath.Join(target, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
		case "link":
			if err := os.Mkdir(filepath.Join(parent, "empty"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("empty", target); err != nil {
				t.Fatal(err)
			}
		}
		s, err := NewStage(target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.Dir, "a"), []byte("a"), 0o644); err != nil {
			t.Fatal(err)
		}
		err = s.Publish()
		if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), target) {
			t.Errorf("%s: err = %v, want one matching fs.ErrExist and naming the target", kind, err)
		}
		if _, err := os.Stat(filepath.Join(s.Dir, "a")); err != nil {
			t.Errorf("%s: the stage was not kept: %v", kind, err)
		}
		switch kind {
		case "file":
			wantFile(t, target, "keep", 0o644)
		case "folder":
			if got := names(t, target); !slices.Equal(got, []string{"sub"}) {
				t.Errorf("target holds %v", got)
			}
		case "link":
			if l, err := os.Readlink(target); err != nil || l != "empty" {
				t.Errorf("link: %q %v", l, err)
			}
		}
		if err := s.Discard(); err != nil {
			t.Fatal(err)
		}
		if err := s.Discard(); err != nil {
			t.Errorf("a second Discard: %v", err)
		}
		noTemp(t, parent)
	}
}

func TestNewStageFailures(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := WriteFile(file, nil); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{filepath.Join(dir, "missing", "out"), filepath.Join(file, "out")} {
		s, err := NewStage(target)
		if err == nil || s != nil || !strings.Contains(err.Error(), "staging "+target+": ") {
			t.Errorf("%s: %v %v", target, s, err)
		}
	}
	if got := names(t, dir); !slices.Equal(got, []string{"file"}) {
		t.Errorf("folder holds %v", got)
	}
}

// TestStageAllOrNothing publishes a folder of many files while readers look
// at the target: each sees no folder or all of it. A fill that fails and is
// discarded leaves no target and no stage.
func TestStageAllOrNothing(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "out")
	const n = 50
	s, err := Options{NoSync: true}.NewStage(target)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(s.Dir, fmt.Sprintf("f%02d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				ents, err := os.ReadDir(target)
				switch {
				case errors.Is(err, fs.ErrNotExist):
				case err != nil || len(ents) != n:
					bad.Add(1)
				}
			}
		}()
	}
	if err := s.Publish(); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d looks at the target saw part of it", bad.Load())
	}

	failed := filepath.Join(parent, "failed")
	s, err = NewStage(failed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The fill fails here; the caller discards instead of publishing.
	if err := s.Discard(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, parent); !slices.Equal(got, []string{"out"}) {
		t.Errorf("parent holds %v", got)
	}
}
