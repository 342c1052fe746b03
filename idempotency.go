package planexec

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/planexec/planexec/store"
)

// Key identifies one effect: the digest of the canonical JSON of the tenant,
// run, tool and validated arguments (or only the contract's key arguments).
// An *IndeterminateOutcomeError names the key of a step in doubt, to resolve
// it by.
type Key = store.Key

// Resolution settles a key in doubt, once someone knows what happened: see
// Run.Resolve.
type Resolution = store.Resolution

// renewer extends a claim's lease every third of a lease while its tool
// runs, on a timer rather than a goroutine of its own: most tools finish
// before the first renewal is due. A worker keeps one for all the steps it
// runs, so its timer is made once.
type renewer struct {
	mu sync.Mutex
	t  *time.Timer
	wg sync.WaitGroup // one count per scheduled or running renewal

	// The claim being renewed, set by start.
	ctx    context.Context // renewals run under it, each bounded by a third of a lease
	claims store.IdempotencyStore
	key    Key
	epoch  int64
	lease  time.Duration
	step   string
	lost   context.CancelCauseFunc // cancels the step's tool when the claim was taken over
	active bool
	cancel context.CancelFunc // ends the renewal in flight, if any
}

// start renews the claim of step's key under epoch until stop.
func (r *renewer) start(ctx context.Context, claims store.IdempotencyStore, key Key, epoch int64, lease time.Duration, step string, lost context.CancelCauseFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx, r.claims, r.key, r.epoch, r.lease, r.step, r.lost, r.active = ctx, claims, key, epoch, lease, step, lost, true
	r.wg.Add(1)
	if r.t == nil {
		r.t = time.AfterFunc(lease/3, r.extend)
	} else {
		r.t.Reset(lease / 3)
	}
}

// extend renews the lease once, and schedules the next renewal unless the
// claim was lost or renewal stopped. A hung store cannot hold the step: each
// renewal is bounded, and stop cuts the one in flight short.
func (r *renewer) extend() {
	defer r.wg.Done()
	r.mu.Lock()
	if !r.active {
		r.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.lease/3)
	r.cancel = cancel
	claims, key, epoch, lease, step, lost := r.claims, r.key, r.epoch, r.lease, r.step, r.lost
	r.mu.Unlock()
	err := claims.Extend(ctx, key, epoch, lease)
	cancel()
	if errors.Is(err, store.ErrFenced) {
		lost(fmt.Errorf("planexec: step %s lost its claim to another holder: %w", quote(step), err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancel = nil
	if r.active && !errors.Is(err, store.ErrFenced) {
		r.wg.Add(1)
		r.t.Reset(lease / 3)
	}
}

// stop ends renewal and waits for one in progress, so nothing outlives the
// step; the renewer may then start again for another claim.
func (r *renewer) stop() {
	r.mu.Lock()
	r.active = false
	if r.t.Stop() {
		r.wg.Done()
	}
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx, r.claims, r.lost = nil, nil, nil
}
