package store

import (
	"context"
	"errors"
	"time"

	"github.com/shopspring/decimal"
)

// ErrCeiling reports a spend that would take a grant past its ceiling
// within its window. Nothing was recorded.
var ErrCeiling = errors.New("planexec: over the grant's ceiling within its window")

// Spend is an amount acted on under an autonomy grant whose ceiling is
// counted over a rolling window: what the grant let through within the
// window, whichever run or replica acted.
type Spend struct {
	Tenant string // the tenant of the run that acted
	Grant  string // the grant's id
	// Key is the step's idempotency key digest: a step spends once, however
	// often it is resumed.
	Key    string
	Amount decimal.Decimal
	At     time.Time
}

// CeilingStore is the capability of a store that counts what windowed
// grants let through, durably and shared by every executor over it, so
// that replicas acting at once never take a grant past its ceiling
// together.
type CeilingStore interface {
	// Spend records s unless what s.Grant spent within the window (every
	// spend recorded at a time after s.At-window, a later one too: a
	// replica whose clock runs ahead still counts), plus s.Amount, would
	// exceed ceiling: then it is ErrCeiling and nothing is recorded. The
	// check and the record are one atomic step against every other Spend.
	// A spend whose grant and key are already recorded (a step acting again
	// after a try that did not happen, or was interrupted) is moved to
	// s.At, with s.Amount: checked against the window at s.At as a new
	// spend, without its old record, and left as it was when that would
	// pass the ceiling (ErrCeiling). A step spends once, at the time it
	// last acted.
	Spend(ctx context.Context, s Spend, window time.Duration, ceiling decimal.Decimal) error
	// Spent sums what grant spent after at-window, but for the spends of
	// the keys in except (steps being cleared again, whose amounts the
	// executor counts itself).
	Spent(ctx context.Context, grant string, at time.Time, window time.Duration, except []string) (decimal.Decimal, error)
}

// Pruned counts what a Prune dropped.
type Pruned struct {
	Runs      int64 // plan records, with their steps and histories
	Histories int64 // histories of runs that have no plan record
	Claims    int64
	Decisions int64
	Spends    int64
}

// Pruner is the capability of a store that drops what is no longer needed,
// so that it does not grow without bound.
type Pruner interface {
	// Prune drops, for tenant, what was finished before `before`: runs
	// completed or failed and last updated before it, with their steps and
	// histories; histories of runs with no plan record whose last event was
	// stored before it; the claims of effects once per run whose run is
	// dropped (or never had a plan record) and that were last written
	// before it; decisions made before it; spends made before it. It never
	// drops a run that may go on (running, awaiting approval, in doubt,
	// interrupted), a claim in flight or in doubt, nor the claim of an
	// effect once per tenant (ClaimRequest.PerTenant): that effect must
	// never happen twice, however old.
	Prune(ctx context.Context, tenant string, before time.Time) (Pruned, error)
}

// RunRef names a run.
type RunRef struct {
	Tenant string
	RunID  string
}

// Recoverer is the capability of a store that finds the runs that stopped
// without finishing and hands each to one executor to resume.
type Recoverer interface {
	// Stalled lists up to limit runs, of every tenant, that stopped without
	// finishing: interrupted, or running under a holder whose lease on the
	// run (PlanRecord.LeaseExpires) ran out before now.
	Stalled(ctx context.Context, now time.Time, limit int) ([]RunRef, error)
	// TakeRun makes holder the run's holder until now+lease and its status
	// running, if the run is stalled (as Stalled says) at now; it reports
	// whether it did. Of executors taking one run at once, one does.
	TakeRun(ctx context.Context, run RunRef, holder string, now time.Time, lease time.Duration) (bool, error)
	// ExtendRun moves the lease of holder on the run to expires, while the
	// run is running or planning its next round; an expires not after now
	// lets the run go. A run that holder no longer holds, or that stopped,
	// is ErrFenced; one with no plan record ErrNoRecord.
	ExtendRun(ctx context.Context, run RunRef, holder string, expires time.Time) error
}
