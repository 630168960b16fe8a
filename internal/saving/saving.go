// Package saving keeps count of the saves in progress (a training
// checkpoint, a model published into its folder), so that the CLI, which
// exits on its own a grace period after SIGINT or SIGTERM whatever the
// verb is waiting for, lets a save that has begun end first: files are
// written atomically (internal/atomicfile), so an exit during a save would
// leave nothing half-written, but the save would be lost.
//
// A save marks itself with Begin and its end; the CLI calls Drain when it
// is about to exit and waits on its channel. After Drain no save begins.
package saving

import "sync"

var (
	mu       sync.Mutex
	inFlight int           // saves begun and not ended
	draining bool          // Drain was called: no save begins
	idle     chan struct{} // Drain's channel while saves are in flight
)

// Begin marks a save in progress until end is called (the first call
// counts; later ones do nothing). After Drain, Begin never returns: the
// process is exiting, and a save begun now would be cut short.
func Begin() (end func()) {
	mu.Lock()
	if draining {
		mu.Unlock()
		select {}
	}
	inFlight++
	mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			if inFlight == 0 && idle != nil {
				close(idle)
				idle = nil
			}
		})
	}
}

// Drain stops new saves from beginning and returns a channel that is
// closed when the saves in progress have ended (at once when there are
// none).
func Drain() <-chan struct{} {
	mu.Lock()
	defer mu.Unlock()
	draining = true
	if idle != nil {
		return idle
	}
	c := make(chan struct{})
	if inFlight == 0 {
		close(c)
	} else {
		idle = c
	}
	return c
}

// InProgress returns the number of saves begun and not ended.
func InProgress() int {
	mu.Lock()
	defer mu.Unlock()
	return inFlight
}
