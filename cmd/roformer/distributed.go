package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/roformer-go/roformer/distributed"
)

// distributedFlag registers --distributed on fs.
func distributedFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("distributed", false, "run as one rank of an MPI job (Open MPI, loaded at run time); automatic under Open MPI's mpirun, where --batch is per rank and the global batch is batch × accum × ranks (docs/distributed.md)")
}

// joinGroup returns the data-parallel group of the command: the ranks of
// the MPI job when the process runs under Open MPI's mpirun (or when
// explicit, --distributed), else this process alone. threads, when the
// user did not set --threads, becomes the CPUs divided among the ranks on
// this host. ROFORMER_MPI_LIB names the library file when it is not
// libmpi.so.40.
func joinGroup(explicit bool, threads *int, threadsSet bool) (distributed.Comm, error) {
	l, under, err := distributed.Detect(os.Getenv)
	if err != nil {
		return nil, err
	}
	if !under && !explicit {
		return distributed.Local(), nil
	}
	c, err := distributed.Init(os.Getenv("ROFORMER_MPI_LIB"))
	if err != nil {
		return nil, fmt.Errorf("%w (the process runs under mpirun or was given --distributed; ROFORMER_MPI_LIB names another libmpi file)", err)
	}
	if !threadsSet && l.LocalSize > 1 {
		*threads = max(1, runtime.NumCPU()/l.LocalSize)
	}
	return c, nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// rankOutputs is what one rank of a training job prints to: rank 0 the
// results on stdout and its progress on stderr (none with quiet); the
// other ranks nothing, so that N processes print what one would.
func rankOutputs(g distributed.Comm, quiet bool, stdout, stderr io.Writer) (out, progress io.Writer) {
	if g.Rank() != 0 {
		return io.Discard, io.Discard
	}
	if quiet {
		return stdout, io.Discard
	}
	return stdout, stderr
}

// leaveGroup ends a command's part in an MPI job. A command that ended
// together on every rank (success, or an interruption the ranks agreed on)
// leaves with MPI_Finalize and returns err; any other error is printed with
// the rank and ends the whole job (MPI_Abort), since the other ranks may be
// waiting for this one in a collective.
func leaveGroup(g distributed.Comm, verb string, err error, stderr io.Writer) error {
	if g.Size() == 1 {
		return err
	}
	if err == nil || errors.Is(err, errInterrupted) || errors.Is(err, distributed.ErrOtherRank) {
		if cerr := g.Close(); err == nil {
			err = cerr
		}
		if err != nil && g.Rank() != 0 {
			// rank 0 reports it; the others exit with its status quietly
			return quietError{err}
		}
		return err
	}
	fmt.Fprintf(stderr, "roformer %s: rank %d of %d: %s\nroformer %s: ending the MPI job\n", verb, g.Rank(), g.Size(), errorMessage(verb, err), verb)
	g.Abort(1)
	return quietError{err} // printed above, once
}

// quietError is an error whose message main does not print (the exit code
// stays that of the error it wraps).
type quietError struct{ err error }

func (q quietError) Error() string { return q.err.Error() }
func (q quietError) Unwrap() error { return q.err }

// bcastString returns rank 0's s on every rank.
func bcastString(g distributed.Comm, s string) (string, error) {
	if g.Size() == 1 {
		return s, nil
	}
	n := []byte(fmt.Sprintf("%020d", len(s)))
	if err := g.Bcast(n, 0); err != nil {
		return "", err
	}
	var k int
	if _, err := fmt.Sscanf(string(n), "%d", &k); err != nil {
		return "", fmt.Errorf("broadcast of a string length: %w", err)
	}
	b := make([]byte, k)
	copy(b, s)
	if err := g.Bcast(b, 0); err != nil {
		return "", err
	}
	return string(b), nil
}
