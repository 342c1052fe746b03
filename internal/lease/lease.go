// Package lease keeps a lease alive while its holder works: a claim on an
// effect, a run, a conversation's turn. The holder's store gives the lease
// for a time; a Keeper extends it every so often, so a holder that stopped
// is told apart from one that is slow. One protocol, whatever it guards.
package lease

import (
	"context"
	"sync"
	"time"
)

// Keeper extends one lease at a time, on a timer: it has no goroutine of
// its own while no extension is due, and most work ends before the first
// is. The zero Keeper is ready to use; once stopped it may keep another
// lease, reusing its timer.
type Keeper struct {
	mu     sync.Mutex
	t      *time.Timer
	wg     sync.WaitGroup // one count per extension scheduled or running
	active bool

	ctx    context.Context
	every  time.Duration
	extend func(ctx context.Context) bool
	cancel context.CancelFunc // ends the extension in flight, if any
}

// Keep calls extend every interval until Stop, or until extend returns
// false (the lease is lost, or no longer needed). Each call is made under
// ctx's values, bounded by interval, so a hung store cannot hold the
// holder: Stop cuts the call in flight short.
func (k *Keeper) Keep(ctx context.Context, interval time.Duration, extend func(ctx context.Context) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ctx, k.every, k.extend, k.active = ctx, interval, extend, true
	k.wg.Add(1)
	if k.t == nil {
		k.t = time.AfterFunc(interval, k.tick)
	} else {
		k.t.Reset(interval)
	}
}

// tick makes one extension and schedules the next, unless the lease was
// lost or keeping stopped.
func (k *Keeper) tick() {
	defer k.wg.Done()
	k.mu.Lock()
	if !k.active {
		k.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(k.ctx, k.every)
	k.cancel = cancel
	extend := k.extend
	k.mu.Unlock()
	keep := extend(ctx)
	cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cancel = nil
	if k.active && keep {
		k.wg.Add(1)
		k.t.Reset(k.every)
	}
}

// Stop ends keeping the lease and waits for an extension in flight, so
// nothing outlives the holder's work.
func (k *Keeper) Stop() {
	k.mu.Lock()
	if !k.active && k.t == nil {
		k.mu.Unlock()
		return
	}
	k.active = false
	if k.t != nil && k.t.Stop() {
		k.wg.Done()
	}
	if k.cancel != nil {
		k.cancel()
	}
	k.mu.Unlock()
	k.wg.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ctx, k.extend = nil, nil
}
