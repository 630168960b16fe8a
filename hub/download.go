package hub

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/roformer-go/roformer/checkpoint"
	"github.com/roformer-go/roformer/internal/jsonscan"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Options adjust Download. The zero value downloads from $HF_ENDPOINT (else
// DefaultEndpoint) into CacheDir with $HF_TOKEN, within the Default bounds
// (DefaultConnectTimeout and the others).
type Options struct {
	// CacheDir is the hub cache folder; empty means CacheDir().
	CacheDir string
	// Endpoint is the Hub's base URL; empty means $HF_ENDPOINT, else
	// DefaultEndpoint.
	Endpoint string
	// Token is sent as "Authorization: Bearer <token>" to the endpoint's
	// origin (scheme, host and port) only, never to a host a redirect
	// leads to; empty means $HF_TOKEN (or the older
	// $HUGGING_FACE_HUB_TOKEN), and none when those are empty too.
	Token string
	// Client makes the requests; nil means a client with the timeouts
	// below. A given client is copied, and its transport put behind the
	// header and idle bounds, so that they hold for it too; the token
	// rule holds before its CheckRedirect.
	Client *http.Client
	// Progress, when not nil, receives one line per file.
	Progress io.Writer

	// ConnectTimeout bounds a TCP connection; zero means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// TLSHandshakeTimeout bounds a TLS handshake; zero means
	// DefaultTLSHandshakeTimeout.
	TLSHandshakeTimeout time.Duration
	// HeaderTimeout bounds the wait for response headers; zero means
	// DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next bytes of a body (reset by
	// every read that brings some); zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxTextSize bounds a .json or .txt file; zero means
	// DefaultMaxTextSize.
	MaxTextSize int64
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
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ConnectTimeout, DefaultConnectTimeout)
	def(&o.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	def(&o.HeaderTimeout, DefaultHeaderTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)
	if o.MaxTextSize <= 0 {
		o.MaxTextSize = DefaultMaxTextSize
	}
	return o
}

// optionalFiles are fetched when the repo has them.
var optionalFiles = []string{"vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"}

// weightChoices are the weights files in order of preference: a single
// file, or an index whose weight_map names the shards.
var weightChoices = checkpoint.WeightFiles()

// isText reports whether name is a small text file (a config, vocabulary,
// tokenizer or shard index): one read up to Options.MaxTextSize when the
// server announces no size. Every other file (the weights) must have an
// announced size, or is refused.
func isText(name string) bool {
	switch path.Ext(name) {
	case ".json", ".txt":
		return true
	}
	return false
}

// Download fetches the files of a RoFormer model folder from model repo
// ("org/name") at revision (a branch, tag or commit hash; empty means
// DefaultRevision) into the hub cache and returns the snapshot folder.
//
// The file list comes from GET {endpoint}/api/models/{repo}/revision/{rev}
// (with blobs=true, so that it gives each file's size and hash too).
// Fetched are config.json, the weights (model.safetensors, else
// pytorch_model.bin, either one sharded with its index and every shard it
// names), and vocab.txt, tokenizer_config.json, special_tokens_map.json and
// tokenizer.json when the repo has them.
//
// Each file is asked for with HEAD {endpoint}/{repo}/resolve/{commit}/{file}
// for its ETag (X-Linked-Etag for a file stored in LFS, whose ETag is its
// sha256) and size (X-Linked-Size, else Content-Length), and fetched,
// following redirects to a CDN, into blobs/<hash>.incomplete; a download cut
// short is resumed from there with a Range request. A blob already in the
// cache is not fetched again. Each file is linked as
// snapshots/<commit>/<file> -> ../../blobs/<hash> (copied where symbolic
// links cannot be made), and refs/<revision> records the commit.
//
// The server gets only what it is owed:
//
//   - Every file is verified by a hash computed here: sha256 when the ETag
//     has 64 hex digits (LFS files), git's blob hash (sha1 of
//     "blob <size>\x00" and the content) when it has 40. An ETag that is
//     neither is refused, as is one that differs from the hash the file
//     list gives. The blob is named by the verified hash, so two files with
//     different contents never share a blob.
//   - A body is read through a limit at its announced size (from the file
//     list, X-Linked-Size, Content-Length or Content-Range, which must
//     agree): one byte more fails the download at once, and nothing beyond
//     the announced size is written. A weight file with no announced size
//     is refused; a text file (.json, .txt) is read up to
//     Options.MaxTextSize, and one announced larger is refused. The two
//     JSON answers that are decoded are bounded apart: the file list to
//     16 MiB and 131,072 files, a shard index to 32 MiB and 2^20 tensors
//     (an index announced larger is refused before it is fetched).
//   - Every request is bounded in time (Options.ConnectTimeout and the
//     others); a body that stalls fails with how much of it came.
//   - The token goes to the endpoint's origin only (see Options.Token).
//   - Inside the repo folder models--org--name, nothing is written through
//     a symbolic link: files are opened through an os.Root of that folder,
//     which no link can leave, and the .incomplete file with O_NOFOLLOW. A
//     snapshot link is replaced (atomically, by a rename) unless it is the
//     link the cache would make; a blob that is not a regular file is
//     refused. The cache folder and the repo folder themselves may be links
//     (a cache moved to another disk). huggingface_hub follows whatever
//     links it finds; it takes a file lock, which this does not: two
//     downloads of one repo at once may fail, but do not corrupt a blob.
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
	if strings.Contains(revision, "..") || strings.HasPrefix(revision, "/") {
		return "", fmt.Errorf("hub: %s: bad revision %q", repo, revision)
	}
	if _, err := url.Parse(o.Endpoint); err != nil {
		return "", fmt.Errorf("hub: bad endpoint %q: %w", o.Endpoint, err)
	}
	client, owned := o.newClient()
	if owned {
		defer client.CloseIdleConnections()
	}
	d := &downloader{o: o, client: client, repo: repo}
	info, err := d.repoInfo(ctx, revision)
	if err != nil {
		return "", err
	}
	commit := info.Sha
	if !commitID.MatchString(commit) {
		return "", fmt.Errorf("hub: %s@%s: the Hub answered the commit %q, not a commit hash", repo, revision, commit)
	}
	d.commit = commit
	d.listed = map[string]sibling{}
	for _, s := range info.Siblings {
		d.listed[s.Rfilename] = s
	}
	if _, ok := d.listed["config.json"]; !ok {
		return "", fmt.Errorf("hub: %s@%s has no config.json: not a transformers model", repo, revision)
	}
	files := []string{"config.json"}
	for _, f := range optionalFiles {
		if _, ok := d.listed[f]; ok {
			files = append(files, f)
		}
	}
	weights := ""
	for _, f := range weightChoices {
		if _, ok := d.listed[f]; ok {
			weights = f
			break
		}
	}
	if weights == "" {
		return "", fmt.Errorf("hub: %s@%s has no weights (none of %s)", repo, revision, strings.Join(weightChoices, ", "))
	}
	if _, size := d.listed[weights].expected(); strings.HasSuffix(weights, ".index.json") && size > checkpoint.MaxIndexBytes {
		return "", fmt.Errorf("hub: %s@%s: the file list gives %s %d bytes, more than the %d-byte limit of a shard index: refused", repo, revision, weights, size, checkpoint.MaxIndexBytes)
	}

	repoDir := RepoDir(o.CacheDir, repo)
	if err := os.MkdirAll(repoDir, 0o755); err != nil {
		return "", fmt.Errorf("hub: %s: %w", repo, err)
	}
	root, err := os.OpenRoot(repoDir)
	if err != nil {
		return "", fmt.Errorf("hub: %s: %w", repo, err)
	}
	defer root.Close()
	d.root, d.dir = root, repoDir

	for _, f := range append(files, weights) {
		if err := d.file(ctx, f); err != nil {
			return "", err
		}
	}
	if strings.HasSuffix(weights, ".index.json") {
		shards, err := indexShards(root, d.snapPath(weights))
		if err != nil {
			return "", fmt.Errorf("hub: %s: %s: %w", repo, weights, err)
		}
		for _, s := range shards {
			if _, ok := d.listed[s]; !ok {
				return "", fmt.Errorf("hub: %s: %s names the shard %s, which the repo does not have", repo, weights, s)
			}
			if err := d.file(ctx, s); err != nil {
				return "", err
			}
		}
	}
	if revision != commit {
		if err := writeFileIn(root, path.Join("refs", revision), []byte(commit)); err != nil {
			return "", fmt.Errorf("hub: %s: refs/%s: %w", repo, revision, err)
		}
	}
	return filepath.Join(repoDir, "snapshots", commit), nil
}

// sibling is one file of the Hub's file list. With blobs=true the Hub adds
// blobId (the git blob hash), size, and for a file stored in LFS its
// sha256 and size.
type sibling struct {
	Rfilename string `json:"rfilename"`
	BlobID    string `json:"blobId,omitempty"`
	Size      *int64 `json:"size,omitempty"`
	LFS       *struct {
		SHA256 string `json:"sha256"`
		Size   *int64 `json:"size"`
	} `json:"lfs,omitempty"`
}

// expected returns the hash and size the file list gives ("" and -1 when
// it gives none).
func (s sibling) expected() (hash string, size int64) {
	size = -1
	if s.LFS != nil {
		hash = strings.ToLower(s.LFS.SHA256)
		if s.LFS.Size != nil {
			size = *s.LFS.Size
		}
	} else {
		hash = strings.ToLower(s.BlobID)
	}
	if size < 0 && s.Size != nil {
		size = *s.Size
	}
	return hash, size
}

type repoInfo struct {
	Sha      string      `json:"sha"`
	Siblings siblingList `json:"siblings"`
}

// siblingList is the file list's siblings; more than maxListedFiles are
// refused before any is decoded.
type siblingList []sibling

func (l *siblingList) UnmarshalJSON(data []byte) error {
	if n := jsonscan.Entries(data); n > maxListedFiles {
		return &tooManyError{what: "siblings", n: n, limit: maxListedFiles}
	}
	return json.Unmarshal(data, (*[]sibling)(l))
}

// tooManyError is a JSON list or object with more entries than this
// package keeps.
type tooManyError struct {
	what     string
	n, limit int
}

func (e *tooManyError) Error() string {
	return fmt.Sprintf("%s has %d entries, more than the limit of %d", e.what, e.n, e.limit)
}

type downloader struct {
	o      Options
	client *http.Client
	repo   string
	commit string
	root   *os.Root // the repo folder, models--org--name
	dir    string   // its path, for messages
	listed map[string]sibling
}

func (d *downloader) repoInfo(ctx context.Context, revision string) (*repoInfo, error) {
	u := d.o.Endpoint + "/api/models/" + d.repo + "/revision/" + url.PathEscape(revision) + "?blobs=true"
	req, err := d.request(ctx, http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("hub: %s@%s: file list: %w", d.repo, revision, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, d.repo, revision, "the file list")
	}
	if resp.ContentLength > maxFileList {
		return nil, fmt.Errorf("hub: %s@%s: the file list from %s is %d bytes (Content-Length), more than the %d-byte limit: refused",
			d.repo, revision, u, resp.ContentLength, maxFileList)
	}
	var info repoInfo
	lr := &limitReader{r: resp.Body, n: maxFileList}
	if err := json.NewDecoder(lr).Decode(&info); err != nil {
		var many *tooManyError
		switch {
		case lr.over:
			return nil, fmt.Errorf("hub: %s@%s: the file list from %s is longer than the %d-byte limit: refused", d.repo, revision, u, maxFileList)
		case errors.As(err, &many):
			return nil, fmt.Errorf("hub: %s@%s: the file list from %s names %d files, more than the limit of %d: refused", d.repo, revision, u, many.n, many.limit)
		}
		return nil, fmt.Errorf("hub: %s@%s: file list from %s: %w", d.repo, revision, u, err)
	}
	for _, s := range info.Siblings {
		h, size := s.expected()
		if (h != "" && !isHash(h)) || (s.LFS != nil && !sha256Hex(h)) || (s.Size != nil && *s.Size < 0) || size < -1 {
			return nil, fmt.Errorf("hub: %s@%s: the file list gives %s the hash %q and size %d: not a hash and a size", d.repo, revision, s.Rfilename, h, size)
		}
	}
	return &info, nil
}

// limitReader reads at most n bytes from r and fails after them, setting
// over.
type limitReader struct {
	r    io.Reader
	n    int64
	over bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		var b [1]byte
		if k, _ := l.r.Read(b[:]); k > 0 {
			l.over = true
			return 0, errors.New("over the limit")
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.r.Read(p)
	l.n -= int64(k)
	return k, err
}

// request makes a request with the toolkit's User-Agent, and the token when
// u has the endpoint's origin.
func (d *downloader) request(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "roformer-go/hub")
	if d.o.Token != "" && d.o.ownOrigin(req.URL) {
		req.Header.Set("Authorization", "Bearer "+d.o.Token)
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
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		why += " (" + msg + ")"
	}
	return fmt.Errorf("hub: %s@%s: %s: %s: %s", repo, revision, what, resp.Status, why)
}

// snapPath is the path of file name of the snapshot, in the repo folder.
func (d *downloader) snapPath(name string) string { return path.Join("snapshots", d.commit, name) }

// file fetches one file of the snapshot, unless it is linked already.
func (d *downloader) file(ctx context.Context, name string) error {
	clean := path.Clean(name)
	if clean != name || name == "" || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "../") || name == ".." || strings.ContainsAny(name, `\`+"\x00") {
		return fmt.Errorf("hub: %s: refusing the file name %q", d.repo, name)
	}
	listHash, listSize := d.listed[name].expected()
	link := d.snapPath(name)
	done, err := d.linked(link, name, listHash, listSize)
	if err != nil || done {
		return err
	}
	u := d.o.Endpoint + "/" + d.repo + "/resolve/" + d.commit + "/" + escapePath(name)
	m, err := d.meta(ctx, u, name, listHash, listSize)
	if err != nil {
		return err
	}
	blob := "blobs/" + m.hash
	fi, err := d.root.Lstat(blob)
	switch {
	case err == nil && fi.Mode().IsRegular():
		if m.size >= 0 && fi.Size() != m.size {
			return fmt.Errorf("hub: %s: %s: the cached %s has %d bytes, the Hub announces %d: remove it and download again", d.repo, name, blob, fi.Size(), m.size)
		}
	case err == nil:
		return fmt.Errorf("hub: %s: %s: %s in the cache is a %s, not a file: refusing it (remove it and download again)", d.repo, name, blob, kindOf(fi))
	case errors.Is(err, fs.ErrNotExist):
		if err := d.fetch(ctx, m, name, blob, false); err != nil {
			return err
		}
	default:
		return fmt.Errorf("hub: %s: %s: %w", d.repo, name, err)
	}
	if err := linkBlob(d.root, blob, link, name); err != nil {
		return fmt.Errorf("hub: %s: linking %s: %w", d.repo, name, err)
	}
	return nil
}

func kindOf(fi fs.FileInfo) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symbolic link"
	case fi.IsDir():
		return "folder"
	}
	return "special file"
}

// linkTarget is what the snapshot link for file name points to: the blob,
// relative to the link's folder, as huggingface_hub writes it.
func linkTarget(name, blob string) string {
	up := strings.Repeat("../", 2+strings.Count(name, "/"))
	return filepath.FromSlash(up + blob)
}

// linked reports whether the snapshot already holds file name: a link as
// the cache makes it, to a blob that is a regular file (and has the hash
// the file list gives, when it gives one), or a regular file (a copy, where
// links cannot be made) of the listed size. Another link there is not
// followed: it will be replaced.
func (d *downloader) linked(link, name, listHash string, listSize int64) (bool, error) {
	fi, err := d.root.Lstat(link)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("hub: %s: %s: %w", d.repo, name, err)
	case fi.Mode().IsRegular():
		return listSize < 0 || fi.Size() == listSize, nil
	case fi.Mode()&fs.ModeSymlink == 0:
		return false, fmt.Errorf("hub: %s: %s in the cache is a %s: remove it and download again", d.repo, link, kindOf(fi))
	}
	target, err := d.root.Readlink(link)
	if err != nil {
		return false, nil
	}
	h, ok := strings.CutPrefix(filepath.ToSlash(target), strings.Repeat("../", 2+strings.Count(name, "/"))+"blobs/")
	if !ok || !isHash(h) || (listHash != "" && h != listHash) {
		return false, nil
	}
	bi, err := d.root.Lstat("blobs/" + h)
	return err == nil && bi.Mode().IsRegular() && (listSize < 0 || bi.Size() == listSize), nil
}

type fileMeta struct {
	url  string // where the body is fetched
	hash string // lower-case sha256 (64 hex digits) or git blob hash (40)
	size int64  // -1 when no one announced it
}

// meta asks HEAD for the file's ETag, size and where to download it:
// redirects within the origin (a renamed repo) are followed; one that
// carries the ETag (the Hub's answer for an LFS file) gives the download
// URL. What it answers must agree with the file list.
func (d *downloader) meta(ctx context.Context, u, name, listHash string, listSize int64) (fileMeta, error) {
	client := *d.client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	fail := func(format string, a ...any) (fileMeta, error) {
		return fileMeta{}, fmt.Errorf("hub: %s: %s: "+format, append([]any{d.repo, name}, a...)...)
	}
	for range maxRedirects {
		req, err := d.request(ctx, http.MethodHead, u)
		if err != nil {
			return fileMeta{}, err
		}
		req.Header.Set("Accept-Encoding", "identity") // the size of the file, not of a compressed form
		resp, err := client.Do(req)
		if err != nil {
			return fail("%w", err)
		}
		resp.Body.Close()
		etag := resp.Header.Get("X-Linked-Etag")
		if etag == "" {
			etag = resp.Header.Get("ETag")
		}
		etag = strings.ToLower(strings.Trim(strings.TrimPrefix(etag, "W/"), `"`))
		size := int64(-1)
		if s := resp.Header.Get("X-Linked-Size"); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 {
				return fail("bad X-Linked-Size %q", s)
			}
			size = n
		} else if resp.StatusCode == http.StatusOK && resp.ContentLength >= 0 {
			size = resp.ContentLength
		}
		var where string
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := resp.Location()
			if err != nil {
				return fail("redirect without a Location")
			}
			base, _ := url.Parse(u)
			if origin(loc) == origin(base) && etag == "" {
				u = loc.String()
				continue
			}
			where = loc.String()
		case resp.StatusCode == http.StatusOK:
			where = u
		default:
			return fileMeta{}, statusError(resp, d.repo, d.commit, name)
		}
		switch {
		case etag != "" && !isHash(etag):
			return fail("the ETag %q is not a sha256 or git blob hash, so the file could not be verified: refused", etag)
		case etag != "" && listHash != "" && etag != listHash:
			return fail("the ETag says %s, the file list %s: refused", etag, listHash)
		case etag == "":
			etag = listHash
		}
		if etag == "" {
			return fail("the server sent no ETag, so the file could not be verified: refused")
		}
		switch {
		case size >= 0 && listSize >= 0 && size != listSize:
			return fail("the server announces %d bytes, the file list %d: refused", size, listSize)
		case size < 0:
			size = listSize
		}
		return fileMeta{url: where, hash: etag, size: size}, nil
	}
	return fail("more than %d redirects", maxRedirects)
}

func isHash(s string) bool { return (len(s) == 40 || len(s) == 64) && isLowerHex(s) }

func sha256Hex(s string) bool { return len(s) == 64 && isLowerHex(s) }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// fetch downloads m into blob through blob+".incomplete", resuming what an
// earlier try left there, and checks the content against the hash.
func (d *downloader) fetch(ctx context.Context, m fileMeta, name, blob string, retried bool) error {
	t := &transfer{d: d, m: m, name: name, part: blob + ".incomplete", text: isText(name), size: m.size}
	if t.text && m.size > d.o.MaxTextSize {
		return t.fail("announced %d bytes, over the %d a text file may have: refused", m.size, d.o.MaxTextSize)
	}
	if err := t.open(); err != nil {
		return err
	}
	defer t.f.Close()
	t.announce()
	if t.size < 0 || t.have < t.size {
		req, err := d.request(ctx, http.MethodGet, m.url)
		if err != nil {
			return err
		}
		req.Header.Set("Accept-Encoding", "identity") // byte ranges of the file itself, not of a compressed form
		if t.have > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", t.have))
		}
		resp, err := d.client.Do(req)
		if err != nil {
			return t.fail("%w", err)
		}
		defer resp.Body.Close()
		retry, err := t.answer(resp, retried)
		if err != nil {
			return err
		}
		if retry {
			t.f.Close()
			d.root.Remove(t.part)
			return d.fetch(ctx, m, name, blob, true)
		}
		if err := t.receive(resp.Body); err != nil {
			return err
		}
	}
	if err := t.f.Sync(); err != nil {
		return t.fail("%w", err)
	}
	if err := verify(t.f, m.hash); err != nil {
		return t.removed("%v", err)
	}
	if err := t.f.Close(); err != nil {
		return t.fail("%w", err)
	}
	if err := d.root.Rename(t.part, blob); err != nil {
		return t.fail("%w", err)
	}
	return nil
}

// transfer is one file's download in progress (see fetch).
type transfer struct {
	d    *downloader
	m    fileMeta
	name string
	part string   // the partial file's path in the cache
	f    *os.File // the partial file
	text bool     // a text file, bounded by MaxTextSize
	have int64    // bytes kept from an earlier try
	size int64    // the file's size, -1 while no one announced it
}

// fail returns the error for the file, prefixed with the repo and its name.
func (t *transfer) fail(format string, a ...any) error {
	return fmt.Errorf("hub: %s: %s: "+format, append([]any{t.d.repo, t.name}, a...)...)
}

// removed removes the partial file and returns fail's error, saying so.
func (t *transfer) removed(format string, a ...any) error {
	t.f.Close()
	t.d.root.Remove(t.part)
	return t.fail(format+"; the partial file was removed", a...)
}

// partPath is the partial file's path on disk, for messages.
func (t *transfer) partPath() string {
	return filepath.Join(t.d.dir, filepath.FromSlash(t.part))
}

// open opens (or creates) the partial file, refusing anything but a regular
// file, and keeps what it holds unless that is more than the file may have.
// On success the caller closes t.f.
func (t *transfer) open() error {
	if err := t.d.root.MkdirAll("blobs", 0o755); err != nil {
		return t.fail("%w", err)
	}
	f, err := openNoFollow(t.d.root, t.part)
	if err != nil {
		return t.fail("%w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return t.fail("%w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return t.fail("%s is a %s, not a file: refusing it", t.part, kindOf(fi))
	}
	t.f, t.have = f, fi.Size()
	if (t.size >= 0 && t.have > t.size) || (t.text && t.have > t.d.o.MaxTextSize) {
		t.have = 0
	}
	return nil
}

// announce writes the "fetching" line to Options.Progress.
func (t *transfer) announce() {
	if t.d.o.Progress == nil {
		return
	}
	s := "size unknown"
	if t.size >= 0 {
		s = fmt.Sprintf("%d bytes", t.size)
	}
	if t.have > 0 {
		fmt.Fprintf(t.d.o.Progress, "fetching %s (%s, resuming at %d)\n", t.name, s, t.have)
	} else {
		fmt.Fprintf(t.d.o.Progress, "fetching %s (%s)\n", t.name, s)
	}
}

// answer checks the GET's status, Content-Range and Content-Length against
// what is known of the file, and learns its size from them. It reports
// retry when the server refused the range of a first try: the partial file
// is then stale.
func (t *transfer) answer(resp *http.Response, retried bool) (retry bool, err error) {
	switch {
	case resp.StatusCode == http.StatusPartialContent && t.have > 0:
		cr := resp.Header.Get("Content-Range")
		start, end, total, ok := contentRange(cr)
		if !ok || start != t.have || (total >= 0 && end != total-1) || (total >= 0 && t.size >= 0 && total != t.size) {
			return false, t.fail("asked for bytes from %d of %s, got Content-Range %q", t.have, sizeText(t.size), cr)
		}
		if t.size < 0 {
			t.size = total
		}
	case resp.StatusCode == http.StatusOK:
		t.have = 0 // the server sent the whole file
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && t.have > 0 && !retried:
		return true, nil
	default:
		return false, statusError(resp, t.d.repo, t.d.commit, t.name)
	}
	if cl := resp.ContentLength; cl >= 0 {
		switch {
		case t.size < 0:
			t.size = t.have + cl
		case t.have+cl != t.size:
			return false, t.fail("announced %d bytes, but the answer from byte %d has Content-Length %d: refused", t.size, t.have, cl)
		}
	}
	return false, nil
}

// receive writes body into the partial file from byte have, never more than
// the announced size (or MaxTextSize for a text file of unknown size).
func (t *transfer) receive(body io.Reader) error {
	maxText := t.d.o.MaxTextSize
	limit := t.size
	switch {
	case t.size < 0 && !t.text:
		return t.removed("the server announced no size for a weights file: refusing a download without a bound")
	case t.size < 0:
		limit = maxText
	case t.text && t.size > maxText:
		return t.removed("announced %d bytes, over the %d a text file may have: refused", t.size, maxText)
	}
	if err := t.f.Truncate(t.have); err != nil {
		return t.fail("%w", err)
	}
	if _, err := t.f.Seek(t.have, io.SeekStart); err != nil {
		return t.fail("%w", err)
	}
	n, over, err := copyBounded(t.f, body, limit-t.have)
	var stall *StallError
	switch {
	case over && t.size >= 0:
		return t.removed("the server sent more than the %d bytes it announced: refused (nothing beyond them was written)", t.size)
	case over:
		return t.removed("no size announced, and longer than the %d bytes a text file may have: refused", maxText)
	case errors.As(err, &stall):
		return t.fail("no bytes for %v from %s after %d of %s (run again to resume from %s)", stall.Wait, stall.URL, t.have+n, sizeText(t.size), t.partPath())
	case err != nil:
		return t.fail("download cut short after %d of %s (run again to resume from %s): %w", t.have+n, sizeText(t.size), t.partPath(), err)
	case t.size >= 0 && t.have+n != t.size:
		return t.fail("download cut short: got %d of %d bytes (run again to resume from %s)", t.have+n, t.size, t.partPath())
	}
	return nil
}

func sizeText(size int64) string {
	if size < 0 {
		return "an unknown number of bytes"
	}
	return fmt.Sprintf("%d bytes", size)
}

// copyBounded copies src to dst until src ends, writing at most limit
// bytes: over reports a src longer than that, found as soon as a read
// brings a byte beyond it. Memory is one 32 KiB buffer.
func copyBounded(dst io.Writer, src io.Reader, limit int64) (n int64, over bool, err error) {
	buf := make([]byte, 32<<10)
	for {
		k, rerr := src.Read(buf)
		if int64(k) > limit-n {
			return n, true, nil
		}
		if k > 0 {
			if _, err := dst.Write(buf[:k]); err != nil {
				return n, false, err
			}
			n += int64(k)
		}
		switch {
		case rerr == io.EOF:
			return n, false, nil
		case rerr != nil:
			return n, false, rerr
		}
	}
}

// verify checks the file's content against hash: its sha256 for 64 hex
// digits (a file stored in LFS), its git blob hash for 40.
func verify(f *os.File, want string) error {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	var h hash.Hash
	kind := "sha256"
	if sha256Hex(want) {
		h = sha256.New()
	} else {
		h, kind = sha1.New(), "git blob hash"
		fmt.Fprintf(h, "blob %d\x00", size)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("corrupted download: %s %s of %d bytes, the ETag says %s", kind, got, size, want)
	}
	return nil
}

// contentRange parses "bytes start-end/total" (total -1 for "*").
func contentRange(cr string) (start, end, total int64, ok bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, 0, 0, false
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, false
	}
	s, e, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, false
	}
	start, err1 := strconv.ParseInt(s, 10, 64)
	end, err2 := strconv.ParseInt(e, 10, 64)
	total = -1
	var err3 error
	if tot != "*" {
		total, err3 = strconv.ParseInt(tot, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || start < 0 || end < start || (tot != "*" && total <= end) {
		return 0, 0, 0, false
	}
	return start, end, total, true
}

// tempName returns a fresh name for a temporary file beside name.
func tempName(name string) string {
	var b [8]byte
	rand.Read(b[:])
	return path.Join(path.Dir(name), ".tmp-"+path.Base(name)+"-"+hex.EncodeToString(b[:]))
}

// linkBlob makes link, the snapshot's file name, a link to blob, both in the
// repo folder root: a relative symbolic link made beside it and renamed over
// it (so that whatever was there, a link included, is replaced and never
// followed), or, where links cannot be made, a copy of the blob put there
// the same way.
func linkBlob(root *os.Root, blob, link, name string) error {
	if err := root.MkdirAll(path.Dir(link), 0o755); err != nil {
		return err
	}
	if fi, err := root.Lstat(link); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a folder", link)
	}
	tmp := tempName(link)
	if err := root.Symlink(linkTarget(name, blob), tmp); err == nil {
		if err := root.Rename(tmp, link); err != nil {
			root.Remove(tmp)
			return err
		}
		return nil
	}
	src, err := root.Open(blob)
	if err != nil {
		return err
	}
	defer src.Close()
	return writeIn(root, link, func(w io.Writer) error { _, err := io.Copy(w, src); return err })
}

// writeFileIn writes data to the file name of root atomically.
func writeFileIn(root *os.Root, name string, data []byte) error {
	return writeIn(root, name, func(w io.Writer) error { _, err := w.Write(data); return err })
}

// writeIn writes what fill writes to the file name of root atomically: into
// a new temporary file beside it (never a link), synced and renamed over it.
func writeIn(root *os.Root, name string, fill func(io.Writer) error) error {
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	tmp := tempName(name)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
	}
	return err
}

// indexShards returns the shard files a sharded checkpoint's index names,
// sorted, read through root within checkpoint's limits of an index
// (checkpoint.ShardFiles: the file's bytes, its weight_map's entries, shard
// names inside the folder), so that an index this package fetches is one
// that package reads.
func indexShards(root *os.Root, index string) ([]string, error) {
	f, err := root.Open(index)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > checkpoint.MaxIndexBytes {
		return nil, fmt.Errorf("%d bytes, more than the %d-byte limit of a shard index", st.Size(), checkpoint.MaxIndexBytes)
	}
	return checkpoint.ShardFiles(f, index)
}

func escapePath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
