package dist_test

import (
	"fmt"
	"os"

	"github.com/roformer-go/roformer/dist"
)

// A program written against Comm runs alone (Local) or as one rank of an
// MPI job (Init, when Detect says mpirun started it): here, the mean of a
// gradient over the ranks.
func ExampleComm() {
	var c dist.Comm = dist.Local()
	if _, underMPI, _ := dist.Detect(os.Getenv); underMPI {
		var err error
		if c, err = dist.Init(""); err != nil {
			fmt.Println(err)
			return
		}
	}
	defer c.Close()
	grad := []float32{0.5, -1, 2}
	if err := c.AllreduceSum32(grad); err != nil {
		fmt.Println(err)
		return
	}
	for i := range grad {
		grad[i] /= float32(c.Size())
	}
	fmt.Println(c.Rank(), c.Size(), grad)
	// Output: 0 1 [0.5 -1 2]
}

// Detect reads Open MPI's environment: mpirun -np 4 sets these in the
// fourth process.
func ExampleDetect() {
	env := map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3"}
	l, ok, err := dist.Detect(func(k string) string { return env[k] })
	fmt.Println(l.Launcher, l.Rank, l.Size, ok, err)
	// Output: Open MPI 3 4 true <nil>
}
