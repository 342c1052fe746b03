package planexec

import (
	"context"
	"encoding/json"
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

// renewer calls extend every period until stopped, on a timer rather than a
// goroutine of its own: most tools finish before the first renewal is due.
type renewer struct {
	mu      sync.Mutex
	stopped bool
	t       *time.Timer
	wg      sync.WaitGroup // one count per scheduled or running renewal
}

// renew starts renewing; extend returns false to stop.
func renew(period time.Duration, extend func() bool) *renewer {
	r := &renewer{}
	var fire func()
	fire = func() {
		defer r.wg.Done()
		more := extend()
		r.mu.Lock()
		defer r.mu.Unlock()
		if more && !r.stopped {
			r.wg.Add(1)
			r.t.Reset(period)
		}
	}
	r.mu.Lock()
	r.wg.Add(1)
	r.t = time.AfterFunc(period, fire)
	r.mu.Unlock()
	return r
}

// stop ends renewal and waits for one in progress, so nothing outlives the
// step.
func (r *renewer) stop() {
	r.mu.Lock()
	r.stopped = true
	if r.t.Stop() {
		r.wg.Done()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
