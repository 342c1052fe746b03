package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// Key identifies one effect: the digest of the canonical JSON of the tenant,
// run, tool and validated arguments (or only the contract's key arguments).
type Key struct {
	Tenant string
	Digest string
}

func (k Key) String() string { return k.Digest }

// ClaimState is what a claim found.
type ClaimState int

// Claim states.
const (
	// ClaimAcquired: the caller holds the key under Epoch and may run the step.
	ClaimAcquired ClaimState = iota + 1
	// ClaimCompleted: the effect is recorded; Outcome is what it returned.
	ClaimCompleted
	// ClaimHeld: another holder has the key in flight until LeaseExpires.
	ClaimHeld
	// ClaimInDoubt: a holder failed (or vanished) in a way that may have left
	// the effect applied; nobody may run it until it is resolved.
	ClaimInDoubt
)

// ClaimRequest asks for a key.
type ClaimRequest struct {
	Key    Key
	RunID  string
	StepID string
	Tool   string
	// Holder names the process or executor claiming (for diagnostics).
	Holder string
	// Lease is how long the claim holds without being extended.
	Lease time.Duration
	// TakeOver allows taking a key whose holder's lease expired. The
	// executor sets it for reversible steps only: for an irreversible step an
	// expired lease is in doubt (ClaimInDoubt).
	TakeOver bool
}

// Claim is a store's answer to a ClaimRequest.
type Claim struct {
	State ClaimState
	// Epoch fences the holder's later writes: each acquisition of a key gets
	// a higher epoch, and writes under an older one fail with ErrFenced.
	Epoch        int64
	Outcome      json.RawMessage
	Holder       string
	LeaseExpires time.Time
}

// Resolution settles a key in doubt, once someone knows what happened.
type Resolution struct {
	// Applied says the effect happened; Outcome is then recorded as its
	// result and the step replays it. When false the key is freed and the
	// step may run again.
	Applied bool
	Outcome json.RawMessage
}

// IdempotencyStore keeps one claim per key, so no effect is done twice. A
// claim has a holder, a lease and an epoch (a fencing token): a holder that
// crashed blocks a reversible step only until its lease runs out, and a late
// write from a holder whose claim was taken over is refused.
type IdempotencyStore interface {
	// Claim takes the key, or reports who has it or what it returned.
	Claim(ctx context.Context, req ClaimRequest) (Claim, error)
	// Extend renews the holder's lease while its tool runs. ErrFenced if
	// the claim was taken over.
	Extend(ctx context.Context, key Key, epoch int64, lease time.Duration) error
	// Complete records the outcome; later claims get ClaimCompleted.
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
// before the first renewal is due.
type renewer struct {
	ctx   context.Context // renewals run under it, each bounded by a third of a lease
	store IdempotencyStore
	key   Key
	epoch int64
	lease time.Duration
	lost  func(error) // told that the claim was taken over; renewal stops

	mu      sync.Mutex
	stopped bool
	t       *time.Timer
	cancel  context.CancelFunc // ends the renewal in flight, if any
	wg      sync.WaitGroup     // one count per scheduled or running renewal
}

// renew starts renewing the claim of key under epoch.
func renew(ctx context.Context, store IdempotencyStore, key Key, epoch int64, lease time.Duration, lost func(error)) *renewer {
	r := &renewer{ctx: ctx, store: store, key: key, epoch: epoch, lease: lease, lost: lost}
	r.mu.Lock()
	r.wg.Add(1)
	r.t = time.AfterFunc(lease/3, r.extend)
	r.mu.Unlock()
	return r
}

// extend renews the lease once, and schedules the next renewal unless the
// claim was lost or renewal stopped. A hung store cannot hold it: each
// renewal is bounded, and stop cuts the one in flight short.
func (r *renewer) extend() {
	defer r.wg.Done()
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.lease/3)
	r.cancel = cancel
	r.mu.Unlock()
	err := r.store.Extend(ctx, r.key, r.epoch, r.lease)
	cancel()
	if errors.Is(err, ErrFenced) {
		r.lost(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancel = nil
	if !errors.Is(err, ErrFenced) && !r.stopped {
		r.wg.Add(1)
		r.t.Reset(r.lease / 3)
	}
}

// stop ends renewal and waits for one in progress, so nothing outlives the
// step.
func (r *renewer) stop() {
	r.mu.Lock()
	r.stopped = true
	if r.t.Stop() {
		r.wg.Done()
	}
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
