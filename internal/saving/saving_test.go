package saving

import (
	"testing"
	"time"
)

// reset undoes Drain between tests.
func reset() {
	mu.Lock()
	inFlight, draining, idle = 0, false, nil
	mu.Unlock()
}

// Drain's channel is closed once every save begun before it has ended, and
// at once when none is in progress; a second end of one save counts once.
func TestDrainWaitsForSaves(t *testing.T) {
	defer reset()
	end1, end2 := Begin(), Begin()
	end1()
	end1()
	c := Drain()
	select {
	case <-c:
		t.Fatal("Drain's channel closed with a save in progress")
	default:
	}
	end2()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("Drain's channel not closed after the last save ended")
	}
	select {
	case <-Drain():
	default:
		t.Fatal("a second Drain with no save in progress is not closed")
	}
}

// After Drain, Begin does not return: no save starts that the exit would
// cut short.
func TestBeginAfterDrain(t *testing.T) {
	defer reset()
	<-Drain()
	begun := make(chan struct{})
	go func() { Begin(); close(begun) }()
	select {
	case <-begun:
		t.Fatal("Begin returned after Drain")
	case <-time.After(100 * time.Millisecond):
	}
}
