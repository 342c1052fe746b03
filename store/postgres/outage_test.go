package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
)

// ledger is the far side of the plans' tools: a remote API that counts
// every call and applies each idempotency key's effect once, as a payment
// provider given an Idempotency-Key does. It lives in memory so that the
// outage reaches the store only.
type ledger struct {
	mu      sync.Mutex
	calls   map[string]int // by run/step
	applied map[string]int // by run/step, counted once per key
	keys    map[string]bool
}

func (l *ledger) call(ctx context.Context, step string) error {
	info, _ := planexec.CurrentStep(ctx)
	key, _ := planexec.IdempotencyKey(ctx)
	id := info.RunID + "/" + step
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[id]++
	if !l.keys[key] {
		l.keys[key] = true
		l.applied[id]++
	}
	return nil
}

func (l *ledger) get(id string) (calls, applied int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[id], l.applied[id]
}

// outageLease is short, so that a claim an attempt left behind in the
// outage holds its step up only briefly.
const outageLease = 2 * time.Second

// outageRun is one plan's life through the outage.
type outageRun struct {
	run, tenant string
	plan        planexec.Plan
	ex          *planexec.Run
	// unrecorded counts the steps whose tool ran but whose outcome the
	// store did not take: the only steps that may run again.
	unrecorded map[string]int
	storeErrs  int
	resolved   int
	unexpected []error
}

func TestAnOutageLosesNothingAndDoublesNothing(t *testing.T) {
	testDSN(t) // the PostgreSQL tests are on
	if testing.Short() {
		t.Skip("the outage test takes tens of seconds; it does not run with -short")
	}
	t.Parallel()
	c := startCluster(t)
	cfg, err := pgxpool.ParseConfig(c.dsn())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 24
	ctx := t.Context()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db, err := postgres.New(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}

	const plans = 200
	led := &ledger{calls: map[string]int{}, applied: map[string]int{}, keys: map[string]bool{}}
	runs := make([]*outageRun, plans)
	for i := range runs {
		r := &outageRun{run: fmt.Sprintf("run-%03d", i), tenant: fmt.Sprintf("tenant-%d", i%7), plan: lanes(fmt.Sprintf("plan-%03d", i), 2, 3), unrecorded: map[string]int{}}
		slow := func(ctx context.Context, step string) error {
			// Long enough that steps are in flight when the server dies.
			select {
			case <-time.After(time.Duration(20+rand.IntN(180)) * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			return led.call(ctx, step)
		}
		r.ex = errandExecutor(t, r.tenant, r.run, "holder-"+r.run, db, outageLease, slow)
		runs[i] = r
	}

	// The outages: the server killed several times while the plans run,
	// down for up to two seconds each time.
	type outcome struct {
		down time.Duration
		err  error
	}
	outages := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() { outages <- o }()
		for range 5 {
			time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
			d := time.Duration(rand.IntN(2000)) * time.Millisecond
			if o.err = c.crash(); o.err != nil {
				return
			}
			time.Sleep(d)
			if o.err = c.start(); o.err != nil {
				return
			}
			o.down += d
		}
	}()

	deadline := time.Now().Add(45 * time.Second)
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Millisecond) // plans start throughout
			r.finish(ctx, deadline, led)
		})
	}
	wg.Wait()
	o := <-outages
	if o.err != nil {
		t.Fatal(o.err)
	}
	down := o.down

	// Everything is checked against a store opened afresh, on the pool whose
	// idle connections the last crash killed: what never reached the server
	// is sent again on another.
	check, err := postgres.New(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	var storeErrs, reruns, resolved, failures int
	for _, r := range runs {
		storeErrs += r.storeErrs
		resolved += r.resolved
		for _, err := range r.unexpected {
			if failures++; failures <= 10 {
				t.Errorf("run %s: an error that is not a *store.Error: %v", r.run, err)
			}
		}
		rec, err := check.LoadPlan(ctx, r.tenant, r.run)
		if err != nil {
			t.Errorf("run %s: %v", r.run, err)
			continue
		}
		if rec.Status != store.RunCompleted {
			t.Errorf("run %s ends %s", r.run, rec.Status)
		}
		for _, s := range r.plan.Steps {
			id := r.run + "/" + s.ID
			calls, applied := led.get(id)
			if st := rec.Steps[s.ID]; st.Status != planexec.StepDone {
				t.Errorf("step %s is recorded %q", id, st.Status)
			}
			switch {
			case applied != 1:
				t.Errorf("step %s: its effect applied %d times, want once", id, applied)
			case s.Tool == once && calls != 1:
				t.Errorf("irreversible step %s was called %d times", id, calls)
			case calls > 1+r.unrecorded[s.ID]:
				t.Errorf("reversible step %s was called %d times, but its outcome went unrecorded only %d times", id, calls, r.unrecorded[s.ID])
			}
			reruns += calls - 1
		}
	}
	if storeErrs == 0 {
		t.Errorf("no run met a *store.Error: the outages (%v down in all) came at no time that mattered", down)
	}
	t.Logf("%d plans through 5 outages (%v down in all): %d store errors, %d steps in doubt resolved from the ledger, %d reversible steps run again after their outcome went unrecorded",
		plans, down.Round(time.Millisecond), storeErrs, resolved, reruns)
}

// finish runs the plan, then resumes it until it completes: each error must
// be the store's, or a step in flight or in doubt; a step in doubt is
// settled from the ledger, as its operator would.
func (r *outageRun) finish(ctx context.Context, deadline time.Time, led *ledger) {
	stored := false
	for attempt := 0; ; attempt++ {
		var res *planexec.Result
		var err error
		if stored {
			res, err = r.ex.Resume(ctx)
			if errors.Is(err, store.ErrNoRecord) {
				stored = false // the first attempt never stored the plan
				continue
			}
		} else {
			res, err = r.ex.Execute(ctx, r.plan)
		}
		if res != nil {
			stored = true
			for id, st := range res.Steps {
				if st.Status == planexec.StepFailed && !st.Replayed {
					r.unrecorded[id]++
				}
			}
		}
		if err == nil && res.Complete {
			return
		}
		if time.Now().After(deadline) {
			r.unexpected = append(r.unexpected, fmt.Errorf("not complete by the deadline; the last error: %w", err))
			return
		}
		wait := 50 * time.Millisecond
		for _, e := range leaves(err) {
			var se *store.Error
			var ind *planexec.IndeterminateOutcomeError
			switch {
			case errors.As(e, &ind) && ind.InDoubt:
				// In doubt: the ledger says whether the effect landed.
				calls, _ := led.get(r.run + "/" + ind.Step)
				res := planexec.Resolution{Applied: calls > 0}
				if res.Applied {
					res.Outcome, _ = json.Marshal("done " + ind.Step)
				}
				switch err := r.ex.Resolve(ctx, ind.Key, res); {
				case err == nil:
					r.resolved++
				case errors.Is(err, store.ErrInFlight):
					wait = max(wait, 200*time.Millisecond)
				case errors.Is(err, store.ErrCompleted) && res.Applied:
					// The completion landed although its writer saw the
					// outage: the claim says done, as the ledger does,
					// and Resolve settled the step's record from it.
					r.resolved++
				case errors.As(err, &se):
					r.storeErrs++
				default:
					r.unexpected = append(r.unexpected, err)
				}
			case errors.As(e, &ind):
				// In flight under a claim an earlier attempt left.
				wait = max(wait, min(time.Until(ind.LeaseExpires), outageLease))
			case errors.As(e, &se):
				r.storeErrs++
			case errors.Is(e, planexec.ErrRunBusy):
				// The run is held by an earlier attempt the outage cut
				// off before it let the run go: wait its lease out.
				wait = max(wait, outageLease/4)
			case errors.Is(e, store.ErrFenced):
				// A write that reached the server after the lease ran out,
				// or the save of a run an earlier attempt holds.
			default:
				r.unexpected = append(r.unexpected, e)
			}
		}
		time.Sleep(wait)
	}
}

// leaves flattens joined errors.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}
