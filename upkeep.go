package planexec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/planexec/planexec/internal/lease"
	"github.com/planexec/planexec/store"
)

// Pruned counts what Prune dropped.
type Pruned = store.Pruned

// DefaultRetention is how long Prune keeps what finished when it is given
// no retention: 30 days.
const DefaultRetention = 30 * 24 * time.Hour

// Prune drops what tenant's finished runs left in the store more than keep
// ago (DefaultRetention when keep is not above zero): runs completed or
// failed, with their steps and histories; histories of runs that never had
// a plan; the claims of those runs' effects; decisions; the spends of
// windowed grants. It never drops a run that may go on (running, awaiting
// a person, in doubt, interrupted), a claim in flight or in doubt, nor the
// claim of an effect once per tenant (OncePerTenant): such an effect never
// happens twice, however old its claim. Call it on a timer, from any
// replica.
//
// A keep shorter than the longest window of the ladder's ceilings would
// forget spends still inside their window, letting a grant act past its
// ceiling: it is a *ConfigurationError, and nothing is dropped. It needs a
// store that prunes (store.Pruner): every store of this module does.
func (ex *Executor) Prune(ctx context.Context, tenant string, keep time.Duration) (Pruned, error) {
	if ex.st.pruner == nil {
		return Pruned{}, &ConfigurationError{Why: "the store prunes nothing"}
	}
	if keep <= 0 {
		keep = DefaultRetention
	}
	if l := ex.cfg.Ladder; l != nil {
		if w := l.longestWindow(); keep < w {
			return Pruned{}, &ConfigurationError{Why: fmt.Sprintf("a retention of %v would forget spends inside a ceiling's window of %v", keep, w)}
		}
	}
	p, err := ex.st.pruner.Prune(ctx, tenant, ex.now().Add(-keep))
	if err != nil {
		return p, fmt.Errorf("planexec: pruning the runs of tenant %s: %w", quote(tenant), err)
	}
	return p, nil
}

// Recovered is what Recover did with one run.
type Recovered struct {
	Tenant string
	RunID  string
	// Result and Err are what resuming the run returned.
	Result *Result
	Err    error
}

// Recover finds up to limit runs (100 when limit is not above zero, at most
// 1000), of every tenant, that stopped without finishing — interrupted (the context
// they ran under was cancelled), or left running by an executor that died
// (its lease on the run ran out) — and resumes each on this executor, one
// after another, as Run.Resume does. Call it as a service starts and then
// on a timer, on every replica: each run is taken in the store before it is
// resumed, so two replicas never resume one run at once. The error is the
// store's, when it could not list or take runs; what each resume returned
// is in its Recovered.
//
// Recover has no planner: a run of rounds (Run.Do) is resumed to the end of
// the round it was in and left planning (RunPlanning), and the service's
// next Do for the job goes on with its rounds.
//
// It needs a store that recovers runs (store.Recoverer): every store of
// this module does.
func (ex *Executor) Recover(ctx context.Context, limit int) ([]Recovered, error) {
	rc := ex.st.recoverer
	if rc == nil {
		return nil, &ConfigurationError{Why: "the store recovers no runs"}
	}
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	refs, err := rc.Stalled(ctx, ex.now(), limit)
	if err != nil {
		return nil, fmt.Errorf("planexec: finding runs to recover: %w", err)
	}
	var out []Recovered
	for _, ref := range refs {
		holder := ex.holder()
		took, err := rc.TakeRun(ctx, ref, holder, ex.now(), ex.cfg.Lease)
		if err != nil {
			return out, fmt.Errorf("planexec: taking run %s to recover it: %w", quote(ref.RunID), err)
		}
		if !took {
			continue // another replica has it
		}
		res, err := ex.recover(ctx, ref, holder)
		out = append(out, Recovered{Tenant: ref.Tenant, RunID: ref.RunID, Result: res, Err: err})
	}
	return out, nil
}

// recover resumes a run taken under holder to recover it, under the
// delegation stored with it.
func (ex *Executor) recover(ctx context.Context, ref store.RunRef, holder string) (*Result, error) {
	run, err := ex.Run(Delegation{RunID: ref.RunID, Tenant: ref.Tenant})
	if err != nil {
		return nil, err
	}
	run.taken = holder
	return run.Resume(ctx)
}

// keepLease moves the lease of the gate's execution on its run, every
// third of a lease, until the returned stop: so Recover tells a live
// execution from a dead one. A run taken over by another execution, or
// gone, is not held any longer.
func (g *gate) keepLease() (stop func()) {
	rec, ttl := g.r.ex.st.recoverer, g.r.ex.cfg.Lease
	if rec == nil {
		return func() {}
	}
	ref := store.RunRef{Tenant: g.d.Tenant, RunID: g.d.RunID}
	var k lease.Keeper
	k.Keep(g.after, ttl/3, func(ctx context.Context) bool {
		err := rec.ExtendRun(ctx, ref, g.holder, g.now().Add(ttl))
		return !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNoRecord)
	})
	return k.Stop
}
