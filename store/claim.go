package store

import (
	"encoding/json"
	"time"
)

// Key identifies one effect: the digest of the canonical JSON of the tenant,
// run, tool and validated arguments (or only the contract's key arguments).
// planexec.Key is this type.
type Key struct {
	Tenant string
	Digest string
}

func (k Key) String() string { return k.Digest }

// Resolution settles a key in doubt, once someone knows what happened.
// planexec.Resolution is this type.
type Resolution struct {
	// Applied says the effect happened; Outcome is then recorded as its
	// result and the step replays it. When false the key is freed and the
	// step may run again.
	Applied bool
	Outcome json.RawMessage
}

// ClaimState is what a claim found, or where a key's row stands.
type ClaimState int

// Claim states.
const (
	// ClaimFree: the key was given up (its effect did not happen) and
	// anyone may take it. The row keeps its epoch, so that fencing still
	// holds. As an answer, only to a request that peeks (ClaimRequest.Peek).
	// It is the zero ClaimState.
	ClaimFree ClaimState = iota
	// ClaimAcquired: the caller holds the key under Epoch and may run the step.
	ClaimAcquired
	// ClaimCompleted: the effect is recorded; Outcome is what it returned.
	ClaimCompleted
	// ClaimHeld is an answer only, never a row's state: another holder has
	// the key in flight until LeaseExpires.
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
	// PerTenant says the key names an effect once per tenant, not once per
	// run: Pruner.Prune never drops its claim.
	PerTenant bool
	// Peek asks what the key holds without taking it: the store writes
	// nothing, and a key the request would take (unclaimed, free, or whose
	// holder's lease ran out where TakeOver allows taking it) answers
	// ClaimFree.
	Peek bool
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

// ClaimRow is a key's claim as a store keeps it between calls, and the one
// state machine of claims: its methods say what a request gets and what the
// row becomes, and every store follows them.
//
// A key nobody claimed has no row. State is ClaimFree, ClaimAcquired,
// ClaimCompleted or ClaimInDoubt; Outcome is set when completed; Holder and
// LeaseExpires are the last holder's. A store that keeps rows as JSON
// documents may encode it as it is: an empty outcome is left out and read
// back as none.
type ClaimRow struct {
	State        ClaimState      `json:"state"`
	Epoch        int64           `json:"epoch"`
	Holder       string          `json:"holder"`
	LeaseExpires time.Time       `json:"lease_expires"`
	Outcome      json.RawMessage `json:"outcome,omitempty"`
	// Run is the run whose step took the key last: only it may resolve it.
	Run string `json:"run,omitempty"`
}

// Answer tells what req gets from the key at now. When the key is the
// caller's to take (it is free, or its holder's lease ran out and
// req.TakeOver allows taking it over) take is true, and the store takes it
// with Take; otherwise answer is what Claim returns: the outcome of a
// completed key, the holder of a key in flight (ClaimHeld) or in doubt. A
// lease that ran out on a caller who may not take it over is in doubt: its
// holder may have done the effect. A request that only peeks (req.Peek) is
// never told to take: a key it would take answers ClaimFree.
func (r ClaimRow) Answer(req ClaimRequest, now time.Time) (answer Claim, take bool) {
	answer, take = r.answer(req, now)
	if take && req.Peek {
		return Claim{State: ClaimFree, Epoch: r.Epoch}, false
	}
	return answer, take
}

func (r ClaimRow) answer(req ClaimRequest, now time.Time) (answer Claim, take bool) {
	switch r.State {
	case ClaimCompleted:
		return Claim{State: ClaimCompleted, Epoch: r.Epoch, Outcome: r.Outcome}, false
	case ClaimInDoubt:
		return Claim{State: ClaimInDoubt, Epoch: r.Epoch, Holder: r.Holder}, false
	case ClaimAcquired:
		if now.Before(r.LeaseExpires) {
			return Claim{State: ClaimHeld, Epoch: r.Epoch, Holder: r.Holder, LeaseExpires: r.LeaseExpires}, false
		}
		if !req.TakeOver {
			return Claim{State: ClaimInDoubt, Epoch: r.Epoch, Holder: r.Holder, LeaseExpires: r.LeaseExpires}, false
		}
	}
	return Claim{}, true
}

// Take makes req the key's holder at now, under the next epoch, and returns
// what Claim returns to it. A key nobody claimed is taken from the zero
// ClaimRow, under epoch 1. Call it only when Answer says take.
func (r *ClaimRow) Take(req ClaimRequest, now time.Time) Claim {
	r.State, r.Holder, r.LeaseExpires, r.Outcome, r.Run = ClaimAcquired, req.Holder, now.Add(req.Lease), nil, req.RunID
	r.Epoch++
	return Claim{State: ClaimAcquired, Epoch: r.Epoch, Holder: r.Holder, LeaseExpires: r.LeaseExpires}
}

// Holds reports whether epoch still holds the key: only its holder may
// extend, complete or release it. A write under an epoch that does not
// hold is ErrFenced (epochs only go up, so it never will again).
func (r ClaimRow) Holds(epoch int64) bool {
	return r.State == ClaimAcquired && r.Epoch == epoch
}

// Release gives the key up after a failure: free when the effect did not
// happen, in doubt when it may have.
func (r *ClaimRow) Release(inDoubt bool) {
	r.State = ClaimFree
	if inDoubt {
		r.State = ClaimInDoubt
	}
}

// Resolve settles the key at now for run as res says, and moves its epoch
// on so that the old holder's writes are fenced. A key another run took is
// ErrNoRecord, one a live holder has in flight ErrInFlight, one recorded as
// done ErrCompleted; the row is then left as it was.
func (r *ClaimRow) Resolve(run string, res Resolution, now time.Time) error {
	switch {
	case r.Run != run:
		return ErrNoRecord
	case r.State == ClaimAcquired && now.Before(r.LeaseExpires):
		return ErrInFlight
	case r.State == ClaimCompleted:
		return ErrCompleted
	}
	r.Epoch++
	r.State, r.Outcome = ClaimFree, nil
	if res.Applied {
		r.State, r.Outcome = ClaimCompleted, res.Outcome
	}
	return nil
}
