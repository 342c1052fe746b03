package store

import (
	"context"
	"encoding/json"
	"time"
)

// Store is what an executor needs of a store: plans and their steps,
// idempotency claims, people's decisions, and a step's claim, record and
// events written in one transaction. An executor will not be built on less:
// without claims, or with a claim and its step written apart, an effect
// could be done twice. What a store can do beyond it (keep histories,
// count ceilings, list, prune and recover runs, keep conversations) it says
// by implementing the interfaces of this package that name those
// capabilities.
type Store interface {
	PlanStore
	IdempotencyStore
	ApprovalStore
	StepStore
}

// PlanStore keeps runs: each run's plan, where it stands and its steps'
// records. Every method is scoped by tenant: one tenant never sees
// another's runs.
type PlanStore interface {
	// SavePlan writes rec's plan and status, creating the run's record or
	// replacing it; with rec.Update it only replaces one, and a run with no
	// record is ErrNoRecord: a run read from the store and since dropped
	// (Pruner, Forget) is never written back; with rec.Update, a record
	// whose revision is no longer rec.Rev (saved since by someone else) is
	// ErrFenced: a save based on a stale read is never written. A record
	// held by another execution (its holder is not rec.Holder, and its
	// lease runs past rec.Updated: the saver's clock, as TakeRun and
	// Stalled take the caller's) is ErrFenced too: one execution of a run
	// at a time, on every replica. Nothing is written then. rec.Steps is
	// ignored: steps are written by SaveStep and StepStore. When rec.PlanID
	// differs from the stored plan's, the run's step records are dropped.
	SavePlan(ctx context.Context, rec *PlanRecord) error
	// SaveStep records one step's result; a run with no record is
	// ErrNoRecord.
	SaveStep(ctx context.Context, tenant, runID string, step StepRecord) error
	// LoadPlan returns the run's record with its steps, or ErrNoRecord.
	LoadPlan(ctx context.Context, tenant, runID string) (*PlanRecord, error)
	// Forget removes the run's record, its steps and its history.
	// Forgetting a run that has no record is not an error.
	Forget(ctx context.Context, tenant, runID string) error
}

// IdempotencyStore keeps one claim per key, so that no effect is done
// twice. A claim has a holder, a lease and an epoch (a fencing token): a
// holder that crashed blocks a reversible step only until its lease runs
// out, and a late write from a holder whose claim was taken over is
// refused. What a request gets and what a row becomes is ClaimRow's.
type IdempotencyStore interface {
	// Claim takes the key, or reports who has it or what it returned.
	Claim(ctx context.Context, req ClaimRequest) (Claim, error)
	// Extend renews the holder's lease while its tool runs; ErrFenced if
	// the claim was taken over.
	Extend(ctx context.Context, key Key, epoch int64, lease time.Duration) error
	// Complete records the outcome; later claims get ClaimCompleted.
	// ErrFenced if the claim was taken over.
	Complete(ctx context.Context, key Key, epoch int64, outcome json.RawMessage) error
	// Release gives the key up after a failure: freed when the effect did
	// not happen, kept in doubt (inDoubt) when it may have.
	Release(ctx context.Context, key Key, epoch int64, inDoubt bool) error
	// Resolve settles a key that run holds in doubt, or whose holder's
	// lease ran out, as ClaimRow.Resolve says, and moves its epoch on so
	// the old holder's writes are fenced: ErrInFlight while a holder's
	// lease is live, ErrCompleted when the effect is recorded as done,
	// ErrNoRecord when the key was never claimed or another run holds it.
	Resolve(ctx context.Context, key Key, run string, r Resolution) error
}
