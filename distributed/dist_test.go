package distributed_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/roformer-go/roformer/distributed"
	"github.com/roformer-go/roformer/internal/testutil"
)

func TestLocal(t *testing.T) {
	c := distributed.Local()
	if c.Rank() != 0 || c.Size() != 1 {
		t.Fatalf("Local: rank %d size %d, want 0 1", c.Rank(), c.Size())
	}
	f := []float32{1, 2}
	d := []float64{3}
	b := []byte("x")
	if err := c.AllreduceSum32(f); err != nil || f[0] != 1 || f[1] != 2 {
		t.Errorf("AllreduceSum32: %v %v", f, err)
	}
	if err := c.AllreduceSum64(d); err != nil || d[0] != 3 {
		t.Errorf("AllreduceSum64: %v %v", d, err)
	}
	if err := c.Bcast(b, 0); err != nil || string(b) != "x" {
		t.Errorf("Bcast: %q %v", b, err)
	}
	if err := c.Bcast(b, 1); err == nil {
		t.Error("Bcast from root 1 of a group of 1: no error")
	}
	if g, err := c.Gather(b, 0); err != nil || len(g) != 1 || string(g[0]) != "x" {
		t.Errorf("Gather: %q %v", g, err)
	}
	if err := c.Barrier(); err != nil {
		t.Error(err)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    distributed.Launch
		ok, bad bool
	}{
		{name: "none", env: nil},
		{name: "openmpi", env: map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
			want: distributed.Launch{Launcher: "Open MPI", Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2}, ok: true},
		{name: "no-rank", env: map[string]string{"OMPI_COMM_WORLD_SIZE": "4"}, bad: true},
		{name: "rank-too-big", env: map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "2"}, bad: true},
		{name: "not-a-number", env: map[string]string{"OMPI_COMM_WORLD_SIZE": "two", "OMPI_COMM_WORLD_RANK": "0"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, ok, err := distributed.Detect(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.bad {
				t.Fatalf("error %v, want error %v", err, tc.bad)
			}
			if ok != tc.ok || l != tc.want {
				t.Errorf("got %+v %v, want %+v %v", l, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestMPI runs TestMPIChild in 3 processes under mpirun.
func TestMPI(t *testing.T) {
	if os.Getenv("DIST_TEST_CHILD") != "" {
		t.Skip("child")
	}
	cmd := testutil.Mpirun(t, 3, []string{"DIST_TEST_CHILD=1"}, os.Args[0], "-test.run=^TestMPIChild$", "-test.v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	for r := range 3 {
		if !bytes.Contains(out, fmt.Appendf(nil, "rank %d of 3: ok", r)) {
			t.Errorf("rank %d did not report ok:\n%s", r, out)
		}
	}
}

// TestMPIChild is one rank of TestMPI: every collective, checked against
// what it must give.
func TestMPIChild(t *testing.T) {
	if os.Getenv("DIST_TEST_CHILD") == "" {
		t.Skip("runs under TestMPI's mpirun")
	}
	l, ok, err := distributed.Detect(os.Getenv)
	if err != nil || !ok {
		t.Fatalf("Detect under mpirun: %+v %v %v", l, ok, err)
	}
	c, err := distributed.Init("")
	if err != nil {
		t.Fatal(err)
	}
	r, n := c.Rank(), c.Size()
	if r != l.Rank || n != l.Size || n != 3 {
		t.Fatalf("Init: rank %d of %d, environment says %d of %d", r, n, l.Rank, l.Size)
	}
	// Open MPI's fault handlers must not have replaced the Go runtime's: a
	// nil dereference is still a panic that recover catches.
	if !nilPanics() {
		t.Error("a nil dereference after Init did not panic")
	}
	f := []float32{float32(r), 1, float32(10 * r)}
	if err := c.AllreduceSum32(f); err != nil {
		t.Fatal(err)
	}
	if want := []float32{3, 3, 30}; fmt.Sprint(f) != fmt.Sprint(want) {
		t.Errorf("AllreduceSum32: %v, want %v", f, want)
	}
	d := []float64{0.5 * float64(r+1)}
	if err := c.AllreduceSum64(d); err != nil || d[0] != 3 {
		t.Errorf("AllreduceSum64: %v %v, want [3]", d, err)
	}
	b := []byte("....")
	if r == 1 {
		copy(b, "root")
	}
	if err := c.Bcast(b, 1); err != nil || string(b) != "root" {
		t.Errorf("Bcast: %q %v", b, err)
	}
	if err := c.Bcast(b, 3); err == nil {
		t.Error("Bcast from root 3 of 3: no error")
	}
	g, err := c.Gather([]byte(strings.Repeat("x", r)), 2)
	if err != nil {
		t.Fatal(err)
	}
	if r == 2 {
		if fmt.Sprint(g) != fmt.Sprint([][]byte{{}, []byte("x"), []byte("xx")}) {
			t.Errorf("Gather: %q", g)
		}
	} else if g != nil {
		t.Errorf("Gather on rank %d: %q, want nil", r, g)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err == nil {
		t.Error("Barrier after Close: no error")
	}
	if !t.Failed() {
		fmt.Printf("rank %d of %d: ok\n", r, n)
	}
}

func nilPanics() (panicked bool) {
	defer func() { panicked = recover() != nil }()
	var p *int
	_ = *p
	return false
}
