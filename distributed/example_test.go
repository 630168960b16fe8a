package distributed_test

import (
	"fmt"
	"os"

	"github.com/roformer-go/roformer/distributed"
)

// A program written against Comm runs alone (Local) or as one rank of an
// MPI job (Init, when Detect says mpirun started it): here, the mean of a
// gradient over the ranks.
func ExampleComm() {
	var c distributed.Comm = distributed.Local()
	if _, underMPI, _ := distributed.Detect(os.Getenv); underMPI {
		var err error
		if c, err = distributed.Init(""); err != nil {
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
	l, ok, err := distributed.Detect(func(k string) string { return env[k] })
	fmt.Println(l.Launcher, l.Rank, l.Size, ok, err)
	// Output: Open MPI 3 4 true <nil>
}

// A Reducer averages a model's gradients over the ranks in few calls; here
// over an in-process group of two ranks (Loopback), each in its own
// goroutine, as tests do without MPI.
func ExampleReducer() {
	group := distributed.Loopback(2)
	grads := [][][]float32{ // per rank: two parameters' gradients
		{{1, 2}, {3}},
		{{3, 4}, {5}},
	}
	done := make(chan error, 2)
	for r, c := range group {
		go func() { done <- distributed.NewReducer(c, 0).AllreduceMean32(grads[r]) }()
	}
	for range group {
		if err := <-done; err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println(grads[0], grads[1])
	// Output: [[2 3] [4]] [[2 3] [4]]
}
