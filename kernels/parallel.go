package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

var threads atomic.Int32

func init() { threads.Store(int32(runtime.NumCPU())) }

// SetThreads sets how many goroutines the kernels use (at least 1). BLAS
// itself stays single-threaded, so this is the only thread knob.
func SetThreads(n int) {
	if n < 1 {
		n = 1
	}
	threads.Store(int32(n))
}

// Threads returns the number of worker goroutines the kernels use.
func Threads() int { return int(threads.Load()) }

// ParallelFor is parallelFor for the packages above kernels: the one helper
// for a parallel loop in the module (rope and optim use it rather than
// starting goroutines of their own). It calls fn on disjoint contiguous
// ranges [lo, hi) that cover [0, n), on the pool's persistent workers, and
// returns when all are done: at most w = min(Threads(), n/minChunk) ranges
// of ⌈n/w⌉ elements (the last may be shorter), so a problem of fewer than
// 2·minChunk elements runs serially on the caller (minChunk < 1 counts as
// 1). fn must write only data owned by its range; a loop whose result does
// not depend on where the ranges split is bit-identical for every thread
// count. Calls may nest and run concurrently.
func ParallelFor(n, minChunk int, fn func(lo, hi int)) { parallelFor(n, minChunk, fn) }

// parallelFor calls fn on disjoint ranges [lo, hi) that cover [0, n), on at
// most Threads() goroutines. Ranges are contiguous and at least minChunk long
// (so tiny problems stay serial); fn must only write data owned by its range.
//
// The ranges go to the persistent workers of the pool, so a warm call starts
// no goroutine and allocates nothing beyond fn's own closure. The caller
// waits rather than running a range itself: parked, it frees its processor
// for the worker it just woke (measured: running a range in the caller made a
// small training step ~3% slower, as the woken worker waited to be stolen by
// the other processor). A range for which no worker is idle, as in a
// parallelFor nested inside another, runs on a new goroutine instead, so
// nesting cannot deadlock.
func parallelFor(n, minChunk int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	w := Threads()
	if minChunk < 1 {
		minChunk = 1
	}
	if maxW := n / minChunk; w > maxW {
		w = maxW
	}
	if w <= 1 {
		fn(0, n)
		return
	}
	workers.grow(w)
	wg := waitGroups.Get().(*sync.WaitGroup)
	chunk := (n + w - 1) / w
	for lo := 0; lo < n; lo += chunk {
		t := task{fn, lo, min(lo+chunk, n), wg}
		wg.Add(1)
		if workers.claim() {
			workers.work <- t
		} else {
			go t.run()
		}
	}
	wg.Wait()
	waitGroups.Put(wg)
}

// task is one range of a parallelFor call.
type task struct {
	fn     func(lo, hi int)
	lo, hi int
	done   *sync.WaitGroup
}

// run is a range on a goroutine of its own, when no worker was idle.
func (t task) run() {
	fallbacks.Add(1)
	defer t.done.Done()
	t.fn(t.lo, t.hi)
}

// fallbacks counts ranges that found no idle worker (tests read it).
var fallbacks atomic.Int64

var waitGroups = sync.Pool{New: func() any { return new(sync.WaitGroup) }}

// workers is the pool behind parallelFor: goroutines that live for the rest
// of the process, parked on an unbuffered channel between tasks. A worker
// counts itself idle before it waits for a task; a sender first claims one
// idle count, so every send has a receiver on its way and never blocks for
// long, and no task waits in a queue behind a busy worker.
var workers = &pool{work: make(chan task)}

type pool struct {
	mu      sync.Mutex
	started atomic.Int32
	idle    atomic.Int32
	work    chan task
}

// grow starts workers until there are at least n.
func (p *pool) grow(n int) {
	if int(p.started.Load()) >= n {
		return
	}
	p.mu.Lock()
	for int(p.started.Load()) < n {
		go p.serve()
		p.started.Add(1)
	}
	p.mu.Unlock()
}

// serve runs tasks forever. It counts itself idle again before it reports a
// task done, so a caller that starts its next parallelFor as soon as the last
// one returns finds the worker available.
func (p *pool) serve() {
	p.idle.Add(1)
	for t := range p.work {
		if !p.runTask(t) {
			return
		}
	}
}

// runTask runs one range and reports whether fn returned. When it does not
// (runtime.Goexit, as t.FailNow in a test helper) the range is still marked
// done, so the caller does not wait forever, and the worker leaves the pool
// without counting itself idle; grow starts a replacement on the next call.
// A panic in fn still ends the process, as on any goroutine.
func (p *pool) runTask(t task) (returned bool) {
	defer func() {
		if !returned {
			p.started.Add(-1)
			t.done.Done()
		}
	}()
	t.fn(t.lo, t.hi)
	p.idle.Add(1)
	t.done.Done()
	return true
}

// claim reserves one idle worker for the next send on p.work; false when
// every worker is busy.
func (p *pool) claim() bool {
	for {
		n := p.idle.Load()
		if n <= 0 {
			return false
		}
		if p.idle.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
