package planexec

import (
	"context"
	"encoding/json"
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

// IdempotencyStore keeps one claim per key, so no effect is done twice. A
// claim has a holder, a lease and an epoch (a fencing token): a holder that
// crashed blocks a reversible step only until its lease runs out, and a late
// write from a holder whose claim was taken over is refused.
type IdempotencyStore interface {
	// Claim takes the key, or reports who has it or what it returned.
	Claim(ctx context.Context, req store.ClaimRequest) (store.Claim, error)
	// Extend renews the holder's lease while its tool runs. store.ErrFenced if
	// the claim was taken over.
	Extend(ctx context.Context, key Key, epoch int64, lease time.Duration) error
	// Complete records the outcome; later claims get store.ClaimCompleted.
	// ErrFenced if the claim was taken over.
	Complete(ctx context.Context, key Key, epoch int64, outcome json.RawMessage) error
	// Release gives the key up after a failure: freed when the effect did
	// not happen, kept in doubt (inDoubt) when it may have.
	Release(ctx context.Context, key Key, epoch int64, inDoubt bool) error
	// Resolve settles a key in doubt, or one whose holder's lease ran out,
	// and moves its epoch on so the old holder's writes are fenced. It
	// returns ErrInFlight while a holder's lease is live (its outcome is
	// about to be known), ErrCompleted when the effect is already recorded
	// as done, and ErrNoRecord if the key was never claimed.
	Resolve(ctx context.Context, key Key, r Resolution) error
}

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
	claims IdempotencyStore
	key    Key
	epoch  int64
	lease  time.Duration
	step   string
	lost   context.CancelCauseFunc // cancels the step's tool when the claim was taken over
	active bool
	cancel context.CancelFunc // ends the renewal in flight, if any
}

// start renews the claim of step's key under epoch until stop.
func (r *renewer) start(ctx context.Context, claims IdempotencyStore, key Key, epoch int64, lease time.Duration, step string, lost context.CancelCauseFunc) {
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
