package hub

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// The bounds a download works within, unless Options says otherwise.
//
// A Hub that stops answering, or stops sending in the middle of a body, is
// the common failure of a long download (a dropped Wi-Fi, a proxy that
// holds the connection open); without a timeout such a download waits
// forever. The bounds are on waiting, not on the whole transfer: a weight
// file of tens of gigabytes takes as long as it takes, as long as bytes keep
// arriving.
const (
	// DefaultConnectTimeout bounds the TCP connection to one address.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultTLSHandshakeTimeout bounds the TLS handshake.
	DefaultTLSHandshakeTimeout = 10 * time.Second
	// DefaultHeaderTimeout bounds the wait for the response headers once the
	// request is sent. The Hub answers in well under a second; a CDN that
	// must fetch a cold file first may take some seconds.
	DefaultHeaderTimeout = 30 * time.Second
	// DefaultIdleTimeout bounds the wait for the next bytes of a body: a
	// body that sends nothing for this long fails, saying so. It is reset
	// by every read that makes progress, so it does not bound the length
	// of a download.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultMaxTextSize bounds a text file (config.json, vocab.txt,
	// tokenizer.json, a shard index: any .json or .txt file): one whose
	// size is not announced is read up to this size and refused beyond, and
	// one announced larger is refused before it is fetched. The largest of
	// these in real repos are tokenizer.json files of some tens of MB; the
	// readers of this toolkit want far less.
	DefaultMaxTextSize = 64 << 20
)

// Limits of the two JSON files this package decodes: the Hub's file list
// and a sharded checkpoint's index.
//
// The file list (with blobs=true) gives about 250 bytes per LFS file and
// half that for another, and the model's other metadata (its card, the
// Spaces that use it) some tens of KB: a model repo of a few dozen files
// answers under 1 MB, and 16 MiB hold some 65,000 LFS files. The Hub itself
// recommends under 100,000 files a repo; maxListedFiles is above that.
//
// A shard index's bounds are checkpoint's (checkpoint.MaxIndexBytes,
// MaxIndexTensors), so that an index this package fetches is one that
// package reads.
const (
	maxFileList    = 16 << 20 // bytes of the file list
	maxListedFiles = 1 << 17  // its entries (siblings)
)

// maxRedirects bounds the redirects one request follows (as net/http does).
const maxRedirects = 10

// StallError reports a server that stopped sending: no response headers
// within the header bound, or no bytes of a body within the idle bound.
type StallError struct {
	URL  string        // where it was asked for, without the query
	Wait time.Duration // how long nothing came
	Body bool          // whether the body stalled (else the headers never came)
}

func (e *StallError) Error() string {
	if e.Body {
		return fmt.Sprintf("no bytes for %v from %s", e.Wait, e.URL)
	}
	return fmt.Sprintf("no answer within %v from %s", e.Wait, e.URL)
}

// Timeout reports true: a StallError is a timeout, as a net.Error says.
func (e *StallError) Timeout() bool { return true }

// shortURL is u without its query: signed CDN addresses carry a long,
// short-lived signature there, which errors need not show.
func shortURL(u *url.URL) string {
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

// origin returns scheme://host:port of u, lower case, with the scheme's
// default port filled in, so that https://h and https://h:443 compare equal.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// guardTransport bounds every round trip: the answer (connection, TLS and
// response headers) within answer, and each read of the body within idle
// of the last one that made progress. It is put in front of every
// transport, the caller's included, so that the bounds hold whatever
// Options.Client is.
type guardTransport struct {
	next         http.RoundTripper
	answer, idle time.Duration
}

func (g *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	var fired atomic.Bool
	t := time.AfterFunc(g.answer, func() { fired.Store(true); cancel() })
	resp, err := g.next.RoundTrip(req.WithContext(ctx))
	if !t.Stop() && fired.Load() {
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		return nil, &StallError{URL: shortURL(req.URL), Wait: g.answer}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	b := &idleBody{rc: resp.Body, idle: g.idle, cancel: cancel, url: shortURL(req.URL)}
	b.t = time.AfterFunc(g.idle, func() { b.stalled.Store(true); cancel() })
	resp.Body = b
	return resp, nil
}

// CloseIdleConnections closes the idle connections of the transport
// behind, when it has any.
func (g *guardTransport) CloseIdleConnections() {
	if c, ok := g.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// idleBody cancels its request when no read has made progress for idle:
// a deadline reset by every read that returns bytes.
type idleBody struct {
	rc      io.ReadCloser
	idle    time.Duration
	t       *time.Timer
	stalled atomic.Bool
	cancel  context.CancelFunc
	url     string
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.t.Reset(b.idle)
	}
	if err != nil && err != io.EOF && b.stalled.Load() {
		err = &StallError{URL: b.url, Wait: b.idle, Body: true}
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.t.Stop()
	err := b.rc.Close()
	b.cancel()
	return err
}

// newClient returns the client Download uses and whether it owns its
// transport (then Download closes the idle connections when done).
//
// With no Options.Client, the transport has the connect, TLS and header
// timeouts, and honours $HTTPS_PROXY as net/http's default does. A given
// client is copied; its transport (or the timed one, when it has none) is
// put behind guardTransport, so the idle bound holds for it too, and its
// redirect policy runs after the token rule below.
//
// On every redirect the Authorization header is dropped unless the target
// has the endpoint's origin (scheme, host and port), as huggingface_hub
// does: net/http keeps it on a redirect to a subdomain or to another port
// of the same host, which would hand the token to whatever answers there.
// The Hub sends LFS files through a redirect to a CDN on another host,
// which needs no token: its address is signed.
func (o Options) newClient() (c *http.Client, owned bool) {
	var cl http.Client
	if o.Client != nil {
		cl = *o.Client
	}
	next := cl.Transport
	if next == nil {
		dialer := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
		next = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          16,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   o.TLSHandshakeTimeout,
			ResponseHeaderTimeout: o.HeaderTimeout,
			ExpectContinueTimeout: time.Second,
		}
		owned = true
	}
	// The guard's answer bound is a backstop behind the transport's own
	// (finer) ones, and the only one for a caller's transport.
	cl.Transport = &guardTransport{next: next, answer: o.ConnectTimeout + o.TLSHandshakeTimeout + o.HeaderTimeout, idle: o.IdleTimeout}
	user := cl.CheckRedirect
	cl.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !o.ownOrigin(req.URL) {
			req.Header.Del("Authorization")
		}
		if user != nil {
			return user(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return &cl, owned
}

// ownOrigin reports whether u has the endpoint's origin: the only place
// the token goes.
func (o Options) ownOrigin(u *url.URL) bool {
	e, err := url.Parse(o.Endpoint)
	return err == nil && origin(e) == origin(u)
}
