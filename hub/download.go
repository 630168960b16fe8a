package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/roformer-go/roformer/internal/atomicfile"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Options adjust Download. The zero value downloads from $HF_ENDPOINT (else
// DefaultEndpoint) into CacheDir with $HF_TOKEN and http.DefaultClient.
type Options struct {
	// CacheDir is the hub cache folder; empty means CacheDir().
	CacheDir string
	// Endpoint is the Hub's base URL; empty means $HF_ENDPOINT, else
	// DefaultEndpoint.
	Endpoint string
	// Token is sent as "Authorization: Bearer <token>"; empty means
	// $HF_TOKEN (or the older $HUGGING_FACE_HUB_TOKEN), and none when
	// those are empty too.
	Token string
	// Client makes the requests; nil means http.DefaultClient.
	Client *http.Client
	// Progress, when not nil, receives one line per file.
	Progress io.Writer
}

func (o Options) withDefaults() Options {
	if o.CacheDir == "" {
		o.CacheDir = CacheDir()
	}
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("HF_ENDPOINT")
	}
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	if o.Token == "" {
		o.Token = os.Getenv("HF_TOKEN")
	}
	if o.Token == "" {
		o.Token = os.Getenv("HUGGING_FACE_HUB_TOKEN")
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	return o
}

// optionalFiles are fetched when the repo has them.
var optionalFiles = []string{"vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"}

// weightChoices are the weights files in order of preference: a single
// file, or an index whose weight_map names the shards.
var weightChoices = []string{"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json"}

// Download fetches the files of a RoFormer model folder from model repo
// ("org/name") at revision (a branch, tag or commit hash; empty means
// DefaultRevision) into the hub cache and returns the snapshot folder.
//
// The file list comes from GET {endpoint}/api/models/{repo}/revision/{rev}.
// Fetched are config.json, the weights (model.safetensors, else
// pytorch_model.bin, either one sharded with its index and every shard it
// names), and vocab.txt, tokenizer_config.json, special_tokens_map.json and
// tokenizer.json when the repo has them.
//
// Each file is asked for with HEAD {endpoint}/{repo}/resolve/{commit}/{file}
// for its ETag (X-Linked-Etag for a file stored in LFS, whose ETag is its
// sha256) and fetched, following redirects to a CDN, into
// blobs/<etag>.incomplete; a download cut short is resumed from there with
// a Range request. The body is checked against the ETag before it is
// renamed to blobs/<etag>: its sha256 for an LFS file, its git blob hash
// otherwise. A blob already in the cache is not fetched again. Each file is
// linked as snapshots/<commit>/<file> -> ../../blobs/<etag> (copied where
// symbolic links cannot be made), and refs/<revision> records the commit.
//
// Errors name the repo and the file; 401, 403 and 404 answers say whether
// the repo, revision or file is missing, private or gated.
func Download(ctx context.Context, repo, revision string, opts Options) (dir string, err error) {
	o := opts.withDefaults()
	if r, _, ok := ParseRef(repo); !ok || r != repo {
		return "", fmt.Errorf("hub: %q is not a model id of the form org/name", repo)
	}
	if revision == "" {
		revision = DefaultRevision
	}
	if strings.Contains(revision, "..") {
		return "", fmt.Errorf("hub: %s: bad revision %q", repo, revision)
	}
	info, err := o.repoInfo(ctx, repo, revision)
	if err != nil {
		return "", err
	}
	commit := info.Sha
	if !commitID.MatchString(commit) {
		return "", fmt.Errorf("hub: %s@%s: the Hub answered the commit %q, not a commit hash", repo, revision, commit)
	}
	have := map[string]bool{}
	for _, s := range info.Siblings {
		have[s.Rfilename] = true
	}
	if !have["config.json"] {
		return "", fmt.Errorf("hub: %s@%s has no config.json: not a transformers model", repo, revision)
	}
	repoDir := RepoDir(o.CacheDir, repo)
	snap := filepath.Join(repoDir, "snapshots", commit)
	d := downloader{o: o, repo: repo, commit: commit, repoDir: repoDir, snap: snap}

	files := []string{"config.json"}
	for _, f := range optionalFiles {
		if have[f] {
			files = append(files, f)
		}
	}
	weights := ""
	for _, f := range weightChoices {
		if have[f] {
			weights = f
			break
		}
	}
	if weights == "" {
		return "", fmt.Errorf("hub: %s@%s has no weights (none of %s)", repo, revision, strings.Join(weightChoices, ", "))
	}
	for _, f := range files {
		if err := d.file(ctx, f); err != nil {
			return "", err
		}
	}
	if err := d.file(ctx, weights); err != nil {
		return "", err
	}
	if strings.HasSuffix(weights, ".index.json") {
		shards, err := indexShards(filepath.Join(snap, weights))
		if err != nil {
			return "", fmt.Errorf("hub: %s: %s: %w", repo, weights, err)
		}
		for _, s := range shards {
			if !have[s] {
				return "", fmt.Errorf("hub: %s: %s names the shard %s, which the repo does not have", repo, weights, s)
			}
			if err := d.file(ctx, s); err != nil {
				return "", err
			}
		}
	}
	if revision != commit {
		refFile := filepath.Join(repoDir, "refs", filepath.FromSlash(revision))
		if err := os.MkdirAll(filepath.Dir(refFile), 0o755); err != nil {
			return "", err
		}
		if err := atomicfile.WriteFile(refFile, []byte(commit)); err != nil {
			return "", err
		}
	}
	return snap, nil
}

type repoInfo struct {
	Sha      string `json:"sha"`
	Siblings []struct {
		Rfilename string `json:"rfilename"`
	} `json:"siblings"`
}

func (o Options) repoInfo(ctx context.Context, repo, revision string) (*repoInfo, error) {
	u := o.Endpoint + "/api/models/" + repo + "/revision/" + url.PathEscape(revision)
	req, err := o.request(ctx, http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("hub: %s@%s: file list: %w", repo, revision, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, repo, revision, "the file list")
	}
	var info repoInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return nil, fmt.Errorf("hub: %s@%s: file list from %s: %w", repo, revision, u, err)
	}
	return &info, nil
}

func (o Options) request(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "roformer-go/hub")
	if o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+o.Token)
	}
	return req, nil
}

// statusError explains a failed answer, naming the repo and what was asked.
func statusError(resp *http.Response, repo, revision, what string) error {
	code := resp.Header.Get("X-Error-Code")
	msg := resp.Header.Get("X-Error-Message")
	var why string
	switch {
	case code == "GatedRepo":
		why = "the repo is gated: accept its conditions on the Hub and set HF_TOKEN"
	case resp.StatusCode == http.StatusUnauthorized:
		why = "not authorized: the repo is private or gated, or does not exist; set HF_TOKEN to a token that can read it"
	case resp.StatusCode == http.StatusForbidden:
		why = "forbidden: HF_TOKEN cannot read this repo"
	case code == "RepoNotFound":
		why = "no such repo"
	case code == "RevisionNotFound":
		why = "no such revision"
	case code == "EntryNotFound":
		why = "no such file in the repo"
	case resp.StatusCode == http.StatusNotFound:
		why = "not found (no such repo, revision or file)"
	default:
		why = "unexpected answer"
	}
	if msg != "" {
		why += " (" + msg + ")"
	}
	return fmt.Errorf("hub: %s@%s: %s: %s: %s", repo, revision, what, resp.Status, why)
}

type downloader struct {
	o             Options
	repo, commit  string
	repoDir, snap string
}

// file fetches one file of the snapshot, unless it is linked already.
func (d *downloader) file(ctx context.Context, name string) error {
	clean := path.Clean(name)
	if clean != name || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "../") || name == ".." {
		return fmt.Errorf("hub: %s: refusing the file name %q", d.repo, name)
	}
	link := filepath.Join(d.snap, filepath.FromSlash(name))
	if fi, err := os.Stat(link); err == nil && fi.Mode().IsRegular() {
		return nil // already in the snapshot (Stat follows the link to its blob)
	}
	u := d.o.Endpoint + "/" + d.repo + "/resolve/" + d.commit + "/" + escapePath(name)
	m, err := d.meta(ctx, u, name)
	if err != nil {
		return err
	}
	blob := filepath.Join(d.repoDir, "blobs", m.etag)
	if _, err := os.Stat(blob); err != nil {
		if err := d.fetch(ctx, m, name, blob); err != nil {
			return err
		}
	}
	return linkBlob(blob, link, name)
}

type fileMeta struct {
	url, etag string
	size      int64 // -1 when unknown
}

// meta asks HEAD for the file's ETag and where to download it: redirects on
// the same host (a renamed repo) are followed; one to another host (a CDN)
// gives the download URL.
func (d *downloader) meta(ctx context.Context, u, name string) (fileMeta, error) {
	client := *d.o.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for range 10 {
		req, err := d.o.request(ctx, http.MethodHead, u)
		if err != nil {
			return fileMeta{}, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fileMeta{}, fmt.Errorf("hub: %s: %s: %w", d.repo, name, err)
		}
		resp.Body.Close()
		etag := resp.Header.Get("X-Linked-Etag")
		if etag == "" {
			etag = resp.Header.Get("ETag")
		}
		etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
		size := int64(-1)
		if s := resp.Header.Get("X-Linked-Size"); s != "" {
			size, _ = strconv.ParseInt(s, 10, 64)
		} else if resp.StatusCode == http.StatusOK && resp.ContentLength >= 0 {
			size = resp.ContentLength
		}
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := resp.Location()
			if err != nil {
				return fileMeta{}, fmt.Errorf("hub: %s@%s: %s: redirect without a Location", d.repo, d.commit, name)
			}
			base, _ := url.Parse(u)
			if loc.Host == base.Host && etag == "" {
				u = loc.String()
				continue
			}
			if err := checkETag(etag, d.repo, name); err != nil {
				return fileMeta{}, err
			}
			return fileMeta{url: loc.String(), etag: etag, size: size}, nil
		case resp.StatusCode == http.StatusOK:
			if err := checkETag(etag, d.repo, name); err != nil {
				return fileMeta{}, err
			}
			return fileMeta{url: u, etag: etag, size: size}, nil
		default:
			return fileMeta{}, statusError(resp, d.repo, d.commit, name)
		}
	}
	return fileMeta{}, fmt.Errorf("hub: %s: %s: too many redirects", d.repo, name)
}

func checkETag(etag, repo, name string) error {
	if etag == "" || strings.ContainsAny(etag, `/\`) || etag == "." || etag == ".." {
		return fmt.Errorf("hub: %s: %s: the server sent no usable ETag (%q)", repo, name, etag)
	}
	return nil
}

func sha256Hex(s string) bool { return len(s) == 64 && isHex(s) }

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// fetch downloads m into blob through blob+".incomplete", resuming what an
// earlier try left there, and checks the content against the ETag.
func (d *downloader) fetch(ctx context.Context, m fileMeta, name, blob string) error {
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return err
	}
	part := blob + ".incomplete"
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if m.size >= 0 && have > m.size {
		have = 0
	}
	if d.o.Progress != nil {
		size := "size unknown"
		if m.size >= 0 {
			size = fmt.Sprintf("%d bytes", m.size)
		}
		if have > 0 {
			fmt.Fprintf(d.o.Progress, "fetching %s (%s, resuming at %d)\n", name, size, have)
		} else {
			fmt.Fprintf(d.o.Progress, "fetching %s (%s)\n", name, size)
		}
	}
	if m.size < 0 || have < m.size {
		req, err := d.o.request(ctx, http.MethodGet, m.url)
		if err != nil {
			return err
		}
		req.Header.Set("Accept-Encoding", "identity") // byte ranges of the file itself, not of a compressed form
		if have > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
		}
		resp, err := d.o.Client.Do(req)
		if err != nil {
			return fmt.Errorf("hub: %s: %s: %w", d.repo, name, err)
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusPartialContent && have > 0:
			if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
				return fmt.Errorf("hub: %s: %s: asked for bytes from %d, got Content-Range %q", d.repo, name, have, resp.Header.Get("Content-Range"))
			}
		case resp.StatusCode == http.StatusOK:
			have = 0 // the server sent the whole file
		case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
			f.Close()
			os.Remove(part)
			return d.fetch(ctx, m, name, blob)
		default:
			return statusError(resp, d.repo, d.commit, name)
		}
		if err := f.Truncate(have); err != nil {
			return err
		}
		if _, err := f.Seek(have, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			return fmt.Errorf("hub: %s: %s: download cut short (run again to resume from %s): %w", d.repo, name, part, err)
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := verify(f, m, d.repo, name); err != nil {
		f.Close()
		os.Remove(part)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(part, blob)
}

// verify checks the file's size and its hash against the ETag: sha256 for a
// file stored in LFS (a 64-digit ETag), the git blob hash for a 40-digit one.
func verify(f *os.File, m fileMeta, repo, name string) error {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if m.size >= 0 && size != m.size {
		return fmt.Errorf("hub: %s: %s: got %d bytes, expected %d; the partial file was removed", repo, name, size, m.size)
	}
	var h hash.Hash
	kind := ""
	switch {
	case sha256Hex(m.etag):
		h, kind = sha256.New(), "sha256"
	case len(m.etag) == 40 && isHex(m.etag):
		h, kind = sha1.New(), "git blob hash"
		fmt.Fprintf(h, "blob %d\x00", size)
	default:
		return nil // an ETag that is no hash: nothing to check against
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(m.etag) {
		return fmt.Errorf("hub: %s: %s: corrupted download: %s %s, the ETag says %s; the partial file was removed", repo, name, kind, got, m.etag)
	}
	return nil
}

func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	start, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(start, 10, 64)
	return n, err == nil
}

// linkBlob links snapshot file link to blob with a relative symbolic link,
// or copies the blob where links cannot be made.
func linkBlob(blob, link, name string) error {
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(link), blob)
	if err != nil {
		return err
	}
	os.Remove(link)
	if err := os.Symlink(rel, link); err == nil {
		return nil
	}
	data, err := os.ReadFile(blob)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(link, data); err != nil {
		return fmt.Errorf("hub: linking %s: %w", name, err)
	}
	return nil
}

// indexShards returns the shard files a sharded checkpoint's index names.
func indexShards(index string) ([]string, error) {
	data, err := os.ReadFile(index)
	if err != nil {
		return nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, err
	}
	if len(idx.WeightMap) == 0 {
		return nil, errors.New("no weight_map")
	}
	var shards []string
	for _, s := range idx.WeightMap {
		if !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	return shards, nil
}

func escapePath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
