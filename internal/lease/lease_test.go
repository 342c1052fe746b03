package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestALeaseIsExtendedUntilStopped(t *testing.T) {
	var k Keeper
	var n atomic.Int32
	k.Keep(context.Background(), time.Millisecond, func(context.Context) bool { n.Add(1); return true })
	for n.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	k.Stop()
	after := n.Load()
	time.Sleep(5 * time.Millisecond)
	if n.Load() != after {
		t.Errorf("extended %d times after Stop", n.Load()-after)
	}
}

func TestALostLeaseIsNotExtendedAgain(t *testing.T) {
	var k Keeper
	var n atomic.Int32
	k.Keep(context.Background(), time.Millisecond, func(context.Context) bool { return n.Add(1) < 2 })
	for n.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond)
	if got := n.Load(); got != 2 {
		t.Errorf("extended %d times, want 2: the second said the lease was lost", got)
	}
	k.Stop()
}

func TestStopCutsAnExtensionInFlightShortAndTheKeeperKeepsAnother(t *testing.T) {
	var k Keeper
	started := make(chan struct{})
	k.Keep(context.Background(), time.Millisecond, func(ctx context.Context) bool {
		close(started)
		<-ctx.Done() // a store that hangs
		return true
	})
	<-started
	done := make(chan struct{})
	go func() { k.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop waited on a hung extension")
	}
	var n atomic.Int32
	k.Keep(context.Background(), time.Millisecond, func(context.Context) bool { n.Add(1); return true })
	for n.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	k.Stop()
}

func TestStoppingAKeeperThatKeepsNothingIsHarmless(t *testing.T) {
	var k Keeper
	k.Stop()
	k.Stop()
}
