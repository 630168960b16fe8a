package distributed_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/roformer-go/roformer/distributed"
)

var (
	benchOnce sync.Once
	benchComm distributed.Comm
	benchErr  error
)

// TestMain closes the MPI group that BenchmarkAllreduceMPI opened, so that
// mpirun sees every rank finalize.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchComm != nil {
		benchComm.Close()
	}
	os.Exit(code)
}

// BenchmarkAllreduceMPI times the gradient average (Reducer, 4 MiB buckets)
// of n float32 values across the ranks of an MPI job, the ranks lined up
// by a barrier before each call; 5282368 is the tiny preset's parameter
// count. It runs only under mpirun, with a fixed count so that every rank
// makes the same calls:
//
//	go test -c -o distributed.test ./distributed
//	mpirun -np 2 ./distributed.test -test.run '^$' -test.bench AllreduceMPI -test.benchtime 20x
func BenchmarkAllreduceMPI(b *testing.B) {
	if _, ok, _ := distributed.Detect(os.Getenv); !ok {
		b.Skip("runs under mpirun (see the comment)")
	}
	benchOnce.Do(func() { benchComm, benchErr = distributed.Init("") })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	c := benchComm
	for _, n := range []int{1 << 16, 1 << 20, 5282368} {
		b.Run(fmt.Sprintf("n%d", n), func(b *testing.B) {
			buf := [][]float32{make([]float32, n)}
			red := distributed.NewReducer(c, 0)
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				b.StopTimer()
				if err := c.Barrier(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := red.AllreduceMean32(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
