// Command roformer is the command-line shell over the roformer packages:
// load Hugging Face RoFormer checkpoints, run them, tokenize, train and serve.
//
// Usage:
//
//	roformer <command> [flags] [args]
//
//	roformer help [<command>]    the commands, or one command's flags (stdout)
//	roformer --version           the version (as roformer version)
//
// Exit codes: 0 success, 1 the command failed (bad input, I/O, numerics),
// 2 the command line itself was wrong (unknown verb or flag), 130 the
// command was interrupted (SIGINT/SIGTERM; training saved a checkpoint).
//
// Signals: the first SIGINT or SIGTERM cancels the verb's context; a verb
// still running a second later (signalGrace: blocked in an open, a read,
// the network, or computing) is ended with exit 130, after any save in
// progress (internal/saving) has ended; a second signal exits at once.
// See interruptOnSignal.
//
// Errors: each error is printed once, on one line that begins with one
// prefix, "roformer VERB: " (or "roformer: " before a verb is known). A
// package's own prefix after it stays ("roformer inspect: checkpoint: …"
// says which package failed), except a leading "roformer: ": that is the
// prefix of the package model/roformer (named roformer, as HF's module is),
// and after the CLI's prefix it would read as a second one, so it is
// dropped where the error is printed (see errorLine). A mistyped verb or
// flag gets a "did you mean" (see suggest), a flag error the hint
// "run 'roformer VERB -h' for usage" instead of the whole flag list.
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
	"time"

	"github.com/roformer-go/roformer/internal/saving"
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
// errHelp when -h was given (exit 0), after printing the verb's usage.
//
// The flag package itself would print a bad flag's error and then the whole
// usage before returning the error that main prints again; parseFlags
// silences it while parsing, so main prints the error once, with a "did you
// mean" for a mistyped flag name and the hint to run the verb with -h.
//
// A --model flag naming a file is refused here, before the verb checks its
// other flags, as checkModelPath says.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return errHelp
		}
		const undefined = "flag provided but not defined: -"
		if name, ok := strings.CutPrefix(err.Error(), undefined); ok {
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			if s := suggest(strings.TrimLeft(name, "-"), names, "-"); s != "" {
				return usageError{fmt.Errorf("%v; %s", err, s)}
			}
		}
		return usageError{err}
	}
	if f := fs.Lookup("model"); f != nil {
		return checkModelPath(f.Value.String())
	}
	return nil
}

var errHelp = errors.New("help requested")

// errInterrupted marks a command stopped by a signal (exit code 130).
var errInterrupted = errors.New("interrupted")

func usage(w io.Writer) {
	fmt.Fprintln(w, "roformer: the Go toolkit for RoFormer (rotary position embedding transformers)")
	fmt.Fprintln(w, "\nusage: roformer <command> [flags] [args]\n\ncommands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'roformer help <command>' or 'roformer <command> -h' for the flags of a command.")
}

// commandNames returns the verbs, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// suggest returns `did you mean "X"?` (or "X" or "Y") for a mistyped word:
// the one name the word (two letters or more) is the start of ("gen":
// generate), else the names within edit distance 2 of it that are closest
// ("fillmask", "fill-msk": fill-mask), ignoring case, else "". A distance
// as long as the word ("x" and "env") is no hint. prefix is written before
// each name ("-" for flags).
func suggest(word string, names []string, prefix string) string {
	w := strings.ToLower(word)
	var picks []string
	if len(w) >= 2 {
		for _, n := range names {
			if strings.HasPrefix(strings.ToLower(n), w) {
				picks = append(picks, n)
			}
		}
		if len(picks) != 1 {
			picks = nil
		}
	}
	if picks == nil {
		best := 3
		for _, n := range names {
			d := levenshtein(w, strings.ToLower(n))
			switch {
			case d >= len([]rune(w)) || d > best:
			case d < best:
				best, picks = d, []string{n}
			default:
				picks = append(picks, n)
			}
		}
	}
	if len(picks) == 0 {
		return ""
	}
	q := make([]string, len(picks))
	for i, p := range picks {
		q[i] = fmt.Sprintf("%q", prefix+p)
	}
	return "did you mean " + strings.Join(q, " or ") + "?"
}

// levenshtein returns the edit distance of a and b (insertions, deletions
// and substitutions of runes).
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// errorLine returns the line that reports err of verb: one prefix,
// "roformer VERB: ", before errorMessage.
func errorLine(verb string, err error) string {
	return "roformer " + verb + ": " + errorMessage(verb, err)
}

// errorMessage returns err's message with its leading "roformer: "
// (model/roformer's prefix, or a verb's) or "roformer VERB: " dropped, for
// a line that carries the CLI's prefix already.
func errorMessage(verb string, err error) string {
	prefix := "roformer " + verb + ": "
	msg := err.Error()
	for {
		m := strings.TrimPrefix(strings.TrimPrefix(msg, prefix), "roformer: ")
		if m == msg {
			return msg
		}
		msg = m
	}
}

// unknownCommand reports a word that names no verb (exit 2): with a
// suggestion when one is close, else with the list of verbs.
func unknownCommand(w io.Writer, word string) int {
	if strings.HasPrefix(word, "-") {
		fmt.Fprintf(w, "roformer: unknown flag %q before a command: flags come after it (roformer <command> [flags])\n", word)
		fmt.Fprintln(w, "run 'roformer -h' for the commands")
		return 2
	}
	if s := suggest(word, commandNames(), ""); s != "" {
		fmt.Fprintf(w, "roformer: unknown command %q; %s\n", word, s)
		fmt.Fprintln(w, "run 'roformer -h' for the commands")
		return 2
	}
	fmt.Fprintf(w, "roformer: unknown command %q\n\n", word)
	usage(w)
	return 2
}

func init() {
	register(&command{name: "version", summary: "print the version (as roformer --version; roformer env says more)", run: cmdVersion})
}

func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("version takes no arguments, got %q", fs.Args())
	}
	fmt.Fprintln(stdout, "roformer", versionString())
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one CLI invocation and returns the exit code.
//
// "roformer help VERB [WORDS]" runs "roformer VERB [WORDS] -h" with its usage
// on stdout ("roformer help experiment decay" prints that experiment's
// flags); "roformer help" prints the commands on stdout, "roformer -h" on
// stderr.
func run(args []string, stdout, stderr io.Writer) (code int) {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	verbErr := stderr // where the verb writes its usage and progress
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stderr)
		return 0
	case "-version", "--version":
		args = []string{"version"}
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		if _, ok := commands[args[1]]; !ok {
			return unknownCommand(stderr, args[1])
		}
		args = append(append([]string{args[1]}, args[2:]...), "-h")
		verbErr = stdout
	}
	c, ok := commands[args[0]]
	if !ok {
		return unknownCommand(stderr, args[0])
	}
	ctx, stop := interruptOnSignal(c.name, stderr, !ownShutdown[c.name])
	defer stop()
	defer func() {
		// Kernels panic only on programmer errors; report them as failures
		// with a stack for the bug report instead of crashing mid-output.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "roformer %s: internal error: %v\n%s", c.name, r, debug.Stack())
			code = 1
		}
	}()
	err := c.run(ctx, args[1:], stdout, verbErr)
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
		fmt.Fprintln(stderr, errorLine(c.name, err))
		return 130
	}
	fmt.Fprintln(stderr, errorLine(c.name, err))
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "run 'roformer %s -h' for usage\n", c.name)
		return 2
	}
	return 1
}

// signalGrace is how long a verb may run on after the first SIGINT or
// SIGTERM has cancelled its context before the process exits anyway.
const signalGrace = time.Second

// ownShutdown are the verbs that bound their own shutdown after a signal,
// for which signalGrace does not apply: serve drains its requests in
// flight for up to --drain-timeout.
var ownShutdown = map[string]bool{"serve": true}

// interruptOnSignal returns the context of verb, cancelled on the first
// SIGINT or SIGTERM (its cause wraps context.Canceled and names the
// signal, as signal.NotifyContext's does), and stop, which ends the watch
// when the verb has returned.
//
// Most verbs return soon after the cancellation, with their own message
// and exit code 130. One that is still running signalGrace later (waiting
// in a syscall that no context reaches, such as the open of a named pipe
// or a read from one, or computing between two checks of its context)
// is ended here with exit code 130 when force is set. First saving.Drain
// stops new saves from beginning and waits for those in progress (a
// checkpoint being written, a model being published), so that none is
// cut short, and the verb then has another signalGrace to return on its
// own path (pretrain's save on the signal ends so: its message says where
// the checkpoint is); everything else the toolkit writes goes through
// internal/atomicfile, so what an exit interrupts was never visible. A
// second signal exits at once, during a save too (the save is then lost,
// its temporary files are left for the next run to remove; what was saved
// before is whole).
func interruptOnSignal(verb string, stderr io.Writer, force bool) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		var first os.Signal
		select {
		case first = <-sigs:
		case <-done:
			return
		}
		cancel(signalCause{first})
		var grace <-chan time.Time // nil: only a second signal ends the process
		if force {
			grace = time.After(signalGrace)
		}
		var saved <-chan struct{}
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				fmt.Fprintf(stderr, "roformer %s: interrupted again (%s): exiting at once\n", verb, signalName(s))
				os.Exit(130)
			case <-grace:
				grace, saved = nil, saving.Drain()
				select {
				case <-saved:
					fmt.Fprintf(stderr, "roformer %s: interrupted (%s) and still running %v later: exiting (what was saved is whole: files are written atomically)\n",
						verb, signalName(first), signalGrace)
					os.Exit(130)
				default:
					fmt.Fprintf(stderr, "roformer %s: interrupted (%s): waiting for the save in progress to end (signal again to exit at once)\n", verb, signalName(first))
				}
			case <-saved:
				// The save has ended: the verb, which cannot begin another,
				// has a second grace to return on its own path.
				saved, grace = nil, time.After(signalGrace)
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// signalCause is the cause of a context cancelled by a signal: "interrupt
// signal received", as signal.NotifyContext says, and context.Canceled.
type signalCause struct{ s os.Signal }

func (c signalCause) Error() string        { return c.s.String() + " signal received" }
func (c signalCause) Is(target error) bool { return target == context.Canceled }

// signalName is SIGINT or SIGTERM.
func signalName(s os.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}
