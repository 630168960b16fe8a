package testutil

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// Mpirun returns the command `mpirun -np np --oversubscribe
// --allow-run-as-root prog args...` with the
// environment of the test plus env, skipping t when Open MPI's mpirun is not
// installed (CI installs openmpi-bin). --oversubscribe lets np exceed the
// cores; --allow-run-as-root lets tests run in root containers.
func Mpirun(t testing.TB, np int, env []string, prog string, args ...string) *exec.Cmd {
	t.Helper()
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)")
	}
	a := append([]string{"-np", strconv.Itoa(np), "--oversubscribe", "--allow-run-as-root"}, prog)
	cmd := exec.Command(mpirun, append(a, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}
