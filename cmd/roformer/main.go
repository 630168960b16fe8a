// Command roformer is the command-line shell over the roformer packages:
// load Hugging Face RoFormer checkpoints, run them, tokenize, train and serve.
//
// Usage:
//
//	roformer <command> [flags] [args]
//
// Exit codes: 0 success, 1 the command failed (bad input, I/O, numerics),
// 2 the command line itself was wrong (unknown verb or flag), 130 the
// command was interrupted (SIGINT/SIGTERM; training saved a checkpoint).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
)

// command is one CLI verb. Each cmd_<verb>.go registers its own in init.
type command struct {
	name    string
	summary string
	// run parses args (the words after the verb) and does the work. It writes
	// results to stdout and progress or diagnostics to stderr.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("roformer: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// usageError marks an error in the command line itself (exit code 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// usagef returns a usage error (exit code 2).
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// newFlags returns a flag set for a verb that reports errors instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: roformer %s %s\n\n%s\n\nflags:\n", name, synopsis, commands[name].summary)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, turning flag errors into usage errors. It returns
// errHelp when -h was given (exit 0).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return usageError{err}
	}
	return nil
}

var errHelp = errors.New("help requested")

// errInterrupted marks a command stopped by a signal (exit code 130).
var errInterrupted = errors.New("interrupted")

func usage(w io.Writer) {
	fmt.Fprintln(w, "roformer: the Go toolkit for RoFormer (rotary position embedding transformers)")
	fmt.Fprintln(w, "\nusage: roformer <command> [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'roformer <command> -h' for the flags of a command.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one CLI invocation and returns the exit code.
func run(args []string, stdout, stderr io.Writer) (code int) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "roformer: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer func() {
		// Kernels panic only on programmer errors; report them as failures
		// with a stack for the bug report instead of crashing mid-output.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "roformer %s: internal error: %v\n%s", c.name, r, debug.Stack())
			code = 1
		}
	}()
	err := c.run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		return 0
	}
	var quiet quietError
	if errors.As(err, &quiet) {
		stderr = io.Discard
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, errInterrupted) {
		fmt.Fprintf(stderr, "roformer %s: %v\n", c.name, err)
		return 130
	}
	var ue usageError
	if errors.As(err, &ue) {
		msg := err.Error()
		if !strings.HasPrefix(msg, "flag provided but not defined") {
			fmt.Fprintf(stderr, "roformer %s: %v\n", c.name, err)
		}
		fmt.Fprintf(stderr, "run 'roformer %s -h' for usage\n", c.name)
		return 2
	}
	fmt.Fprintf(stderr, "roformer %s: %v\n", c.name, err)
	return 1
}
