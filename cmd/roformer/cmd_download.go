package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/roformer-go/roformer/hub"
)

func init() {
	register(&command{name: "download", summary: "fetch a model from the Hugging Face Hub into the Hugging Face cache (then --model org/name finds it)", run: cmdDownload})
}

type downloadOptions struct {
	repo, revision, cache string
	quiet                 bool

	idle, connect, header time.Duration
}

func cmdDownload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("download", "org/name [--revision R] [--cache DIR] [--timeout D]", stderr)
	var o downloadOptions
	fs.StringVar(&o.revision, "revision", hub.DefaultRevision, "branch, tag or commit hash to fetch")
	fs.StringVar(&o.cache, "cache", "", "hub cache folder (default $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	fs.DurationVar(&o.idle, "timeout", hub.DefaultIdleTimeout, "longest wait for the next bytes of a file (not for the whole file): a server silent this long fails the download, which a rerun resumes")
	fs.DurationVar(&o.connect, "connect-timeout", hub.DefaultConnectTimeout, "longest wait for a connection to the Hub or its CDN (the TLS handshake has as long again)")
	fs.DurationVar(&o.header, "header-timeout", hub.DefaultHeaderTimeout, "longest wait for the server to answer a request")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// The model id may come before the flags: parse what follows it too.
	if fs.NArg() > 0 {
		o.repo = fs.Arg(0)
		if err := parseFlags(fs, fs.Args()[1:]); err != nil {
			return err
		}
	}
	switch {
	case o.repo == "":
		return usagef("the model id (org/name) is required")
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case o.idle <= 0 || o.connect <= 0 || o.header <= 0:
		return usagef("--timeout, --connect-timeout and --header-timeout must be positive")
	}
	if fi, err := os.Stat(o.repo); (err == nil && !fi.IsDir()) || modelFileExt(o.repo) != "" {
		return usagef("%s is a file's name, not a model id (org/name): download fetches a Hub model; a local model folder is given as --model DIR", o.repo)
	}
	if repo, rev, ok := hub.ParseRef(o.repo); ok && rev != hub.DefaultRevision {
		o.repo, o.revision = repo, rev // org/name@rev
	} else if !ok {
		return usagef("%q is not a model id of the form org/name", o.repo)
	}
	return runDownload(ctx, o, stdout, stderr)
}

// runDownload fetches the model and prints its snapshot folder. What the
// download refuses (a body longer than announced, weights of no announced
// size, an ETag that is no hash, a planted link, a stalled server) is
// described at hub.Download.
func runDownload(ctx context.Context, o downloadOptions, stdout, stderr io.Writer) error {
	opts := hub.Options{CacheDir: o.cache, IdleTimeout: o.idle, ConnectTimeout: o.connect, TLSHandshakeTimeout: o.connect, HeaderTimeout: o.header}
	if !o.quiet {
		opts.Progress = stderr
	}
	dir, err := hub.Download(ctx, o.repo, o.revision, opts)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, dir)
	return nil
}
