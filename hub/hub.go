// Package hub finds models in a Hugging Face cache and downloads them into
// one, in the layout huggingface_hub uses, so that the toolkit and Python
// share their downloads.
//
// The cache folder is $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. A model
// org/name lives in models--org--name/ there:
//
//	models--org--name/
//	  blobs/<hash>                  the files' contents, named by their hash (the Hub's
//	                                ETag: sha256 for LFS files, git blob hash otherwise)
//	  refs/main                     the commit hash that main pointed to
//	  snapshots/<commit>/config.json -> ../../blobs/<hash>
//
// Resolve turns "org/name" or "org/name@revision" into a snapshot folder;
// Download fetches the files a RoFormer folder needs from the Hub (or any
// server answering like it: HF_ENDPOINT) into the cache, trusting the
// server with nothing it is not owed: every wait has a timeout, every body
// a limit at its announced size, every blob the hash it is named by, and
// the token goes to the endpoint alone (see Download for the bounds).
package hub

import (
	"errors"
	"fmt"
	"github.com/roformer-go/roformer/internal/boundedfile"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// DefaultRevision is the revision of a reference that names none.
const DefaultRevision = "main"

// CacheDir returns the Hugging Face hub cache folder the environment
// chooses: $HF_HUB_CACHE (or the older $HUGGINGFACE_HUB_CACHE), else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub.
func CacheDir() string {
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if d := os.Getenv(v); d != "" {
			return d
		}
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(".cache", "huggingface", "hub")
	}
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// RepoDir returns the folder of model repo ("org/name") in cacheDir:
// cacheDir/models--org--name.
func RepoDir(cacheDir, repo string) string {
	return filepath.Join(cacheDir, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

var (
	repoID   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	commitID = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// ParseRef splits a model reference "org/name" or "org/name@revision" into
// the repo and the revision (DefaultRevision when none is given). ok is
// false when ref is not shaped like a Hub model id.
func ParseRef(ref string) (repo, revision string, ok bool) {
	repo, revision, hasRev := strings.Cut(ref, "@")
	if !repoID.MatchString(repo) || strings.Contains(repo, "..") || (hasRev && revision == "") {
		return "", "", false
	}
	if !hasRev {
		revision = DefaultRevision
	}
	return repo, revision, true
}

// Resolve returns the folder a model reference names, looking in the cache
// folder CacheDir chooses: see ResolveIn.
func Resolve(ref string) (dir string, err error) { return ResolveIn(CacheDir(), ref) }

// ResolveIn returns the folder a model reference names. A ref that is an
// existing folder, or that is not shaped like a Hub model id ("org/name" or
// "org/name@revision"), is returned as it is: a folder path stays a folder
// path, and a missing one fails where it is opened. Otherwise the ref is
// looked up in cacheDir: the revision is a commit hash, or a name whose
// refs/<revision> file holds one; the snapshot folder of that commit is
// returned. When the default revision has no refs/main but the cache holds
// exactly one snapshot (a cache filled by hand), that snapshot is used.
//
// A model missing from the cache is an error that says where it looked and
// suggests `roformer download`.
func ResolveIn(cacheDir, ref string) (dir string, err error) {
	if fi, err := os.Stat(ref); err == nil && fi.IsDir() {
		return ref, nil
	}
	repo, rev, ok := ParseRef(ref)
	if !ok {
		return ref, nil
	}
	repoDir := RepoDir(cacheDir, repo)
	notFound := func(looked string) error {
		dl := "roformer download " + repo
		if rev != DefaultRevision {
			dl += " --revision " + rev
		}
		return fmt.Errorf("model %s: not a folder, and not in the Hugging Face cache (looked for %s; cache %s from HF_HUB_CACHE, HF_HOME or ~/.cache/huggingface/hub): run `%s` first", ref, looked, cacheDir, dl)
	}
	commit := rev
	if !commitID.MatchString(rev) {
		refFile := filepath.Join(repoDir, "refs", filepath.FromSlash(rev))
		// A ref holds a commit hash: 40 bytes and a newline (a FIFO or a
		// huge file in its place is refused, not waited on or read).
		data, err := boundedfile.Read(refFile, 4096)
		switch {
		case err == nil:
			commit = strings.TrimSpace(string(data))
		case errors.Is(err, os.ErrNotExist) && rev == DefaultRevision:
			snaps, _ := os.ReadDir(filepath.Join(repoDir, "snapshots"))
			if len(snaps) != 1 || !snaps[0].IsDir() {
				return "", notFound(refFile)
			}
			commit = snaps[0].Name()
		case errors.Is(err, os.ErrNotExist):
			return "", notFound(refFile)
		default:
			return "", fmt.Errorf("model %s: %w", ref, err)
		}
		if commit == "" || commit == "." || commit == ".." || strings.ContainsAny(commit, `/\`) {
			return "", fmt.Errorf("model %s: %s holds %q, not a commit hash", ref, refFile, commit)
		}
	}
	dir = filepath.Join(repoDir, "snapshots", commit)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", notFound(dir)
	}
	return dir, nil
}
