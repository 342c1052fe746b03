package planexec_test

// A cancelled run stops cleanly: the cancellation is reported once, only the
// steps that started are in the result, and a step whose tool was never
// called leaves no claim behind, so a later run of the same job runs it.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// ---- helpers (prefixed cancel) ----

// cancelOutcome is what an Execute or Resume returned.
type cancelOutcome struct {
	res *planexec.Result
	err error
}

// cancelWithin runs fn and returns what it returned, failing the test if it
// has not returned within patience.
func cancelWithin(t *testing.T, what string, fn func() (*planexec.Result, error)) cancelOutcome {
	t.Helper()
	done := make(chan cancelOutcome, 1)
	go func() {
		res, err := fn()
		done <- cancelOutcome{res, err}
	}()
	select {
	case out := <-done:
		return out
	case <-time.After(patience):
		t.Fatalf("%s did not return within %v", what, patience)
		return cancelOutcome{}
	}
}

// cancelWait waits for ch to close, failing the test after patience.
func cancelWait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("%s: gave up after %v", what, patience)
	}
}

// cancelLines counts the lines of err's message that are exactly the
// cancellation.
func cancelLines(err error) int {
	n := 0
	for _, line := range strings.Split(err.Error(), "\n") {
		if line == context.Canceled.Error() {
			n++
		}
	}
	return n
}

// cancelWide is n independent searches, s0 … s(n-1).
func cancelWide(n int) planexec.Plan {
	var p planexec.Plan
	for i := range n {
		p.Steps = append(p.Steps, iSearch(fmt.Sprintf("s%d", i), fmt.Sprintf("A%02d", i)))
	}
	return p
}

// ---- the cancellation is reported once ----

func TestACancelledRunReportsTheCancellationOnceAndOnlyTheStepsThatStarted(t *testing.T) {
	t.Run("while a step runs", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		started := make(chan struct{})
		var once sync.Once
		r := &recorder{delay: time.Hour} // runs until its context is cancelled
		run, _ := newExecutor(t, r, edits(resolveConcurrency(1), func(s *setup) {
			s.Observer = func(e planexec.Event) {
				if e.Kind == planexec.EventStepStarted {
					once.Do(func() { close(started) })
				}
			}
		}))
		done := make(chan cancelOutcome, 1)
		go func() {
			res, err := run.Execute(ctx, cancelWide(5))
			done <- cancelOutcome{res, err}
		}()
		cancelWait(t, started, "no step started")
		cancel()
		var out cancelOutcome
		select {
		case out = <-done:
		case <-time.After(patience):
			t.Fatal("Execute did not return after its context was cancelled")
		}
		if !errors.Is(out.err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", out.err)
		}
		if n := cancelLines(out.err); n != 1 {
			t.Errorf("the cancellation is reported %d times, want once:\n%v", n, out.err)
		}
		if n := len(r.Calls()); n != 1 {
			t.Errorf("%d tools were called, want the one running when the run was cancelled", n)
		}
		if out.res == nil || len(out.res.Steps) != 1 {
			t.Fatalf("result = %+v, want only the step that started", out.res)
		}
		for id := range out.res.Steps {
			if findEvent(run.Events(), planexec.EventStepStarted, id) < 0 {
				t.Errorf("step %s, which never started, is in the result", id)
			}
		}
	})
	t.Run("before any step starts", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &recorder{}
		run, gate := newExecutor(t, r, edits(resolveConcurrency(1),
			withContracts(r, map[string][]planexec.ContractOption{"search_flights": {planexec.RequireApproval()}})))
		// The person approves, and the caller gives up meanwhile.
		gate.answer = func(req planexec.ApprovalRequest) planexec.Decision {
			cancel()
			return req.Approve("dana")
		}
		out := cancelWithin(t, "Execute", func() (*planexec.Result, error) { return run.Execute(ctx, cancelWide(5)) })
		if !errors.Is(out.err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", out.err)
		}
		if n := cancelLines(out.err); n != 1 {
			t.Errorf("the cancellation is reported %d times, want once:\n%v", n, out.err)
		}
		if cs := r.Calls(); len(cs) != 0 {
			t.Errorf("tools were called: %v", toolNames(cs))
		}
		if out.res != nil && len(out.res.Steps) != 0 {
			t.Errorf("result steps = %+v, want none: none started", out.res.Steps)
		}
	})
}

// ---- a claim taken as the run is cancelled ----

// cancelClaimStore is a memory store on a clock the test moves, whose first
// Claim runs around; the claims after it are the store's own.
type cancelClaimStore struct {
	*memory.Store
	once  sync.Once
	first func(ctx context.Context, req store.ClaimRequest) (store.Claim, error)
}

func (s *cancelClaimStore) Claim(ctx context.Context, req store.ClaimRequest) (store.Claim, error) {
	if req.Peek {
		return s.Store.Claim(ctx, req) // a look before clearance, not the step's claim
	}
	var first func(context.Context, store.ClaimRequest) (store.Claim, error)
	s.once.Do(func() { first = s.first })
	if first != nil {
		return first(ctx, req)
	}
	return s.Store.Claim(ctx, req)
}

func TestACancellationAsAStepIsClaimedLeavesNoClaimTaken(t *testing.T) {
	for _, tc := range []struct {
		name string
		// claim is the first claim's write; cancel cancels the run; write
		// is the store's own Claim.
		claim func(cancel func(), entered chan<- struct{}, release <-chan struct{}, write func() (store.Claim, error)) (store.Claim, error)
		// cancelFromTest: the test cancels once the claim is entered.
		cancelFromTest bool
	}{
		{
			name: "cancelled as the claim is written",
			claim: func(cancel func(), _ chan<- struct{}, _ <-chan struct{}, write func() (store.Claim, error)) (store.Claim, error) {
				cancel()
				return write()
			},
		},
		{
			name: "cancelled while the claim's write waits",
			claim: func(_ func(), entered chan<- struct{}, release <-chan struct{}, write func() (store.Claim, error)) (store.Claim, error) {
				close(entered)
				<-release
				return write()
			},
			cancelFromTest: true,
		},
		{
			name: "cancelled right after the claim was acquired",
			claim: func(cancel func(), _ chan<- struct{}, _ <-chan struct{}, write func() (store.Claim, error)) (store.Claim, error) {
				c, err := write()
				cancel()
				return c, err
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const lease = time.Minute
			clk := planexec.NewFakeClock()
			db := &cancelClaimStore{Store: memory.New(memory.WithClock(clk.Now))}
			entered, release := make(chan struct{}), make(chan struct{})
			db.first = func(wctx context.Context, req store.ClaimRequest) (store.Claim, error) {
				return tc.claim(cancel, entered, release, func() (store.Claim, error) { return db.Store.Claim(wctx, req) })
			}
			r := &recorder{}
			plan := iOne(iBooking("b1")) // irreversible: a claim left behind would be in doubt
			first, _ := newExecutor(t, r, edits(withStore(db), leaseOf(lease)))
			done := make(chan cancelOutcome, 1)
			go func() {
				res, err := first.Execute(ctx, plan)
				done <- cancelOutcome{res, err}
			}()
			if tc.cancelFromTest {
				cancelWait(t, entered, "the claim was never written")
				cancel()
				close(release)
			}
			var out cancelOutcome
			select {
			case out = <-done:
			case <-time.After(patience):
				t.Fatal("Execute did not return after its context was cancelled")
			}

			// That the run says it was cancelled is
			// TestARunCancelledBeforeItsOnlyStepRanIsReportedCancelled's
			// concern: here, what matters is the claim.
			if out.err != nil && !errors.Is(out.err, context.Canceled) {
				t.Errorf("err = %v, want only the cancellation", out.err)
			}
			if out.res != nil && len(out.res.Steps) != 0 {
				t.Errorf("result steps = %+v, want none: none ran", out.res.Steps)
			}
			if n := len(r.Calls()); n != 0 {
				t.Fatalf("the tool was called %d times after the run was cancelled", n)
			}
			if n := count(first.Events(), planexec.EventStepStarted); n != 0 {
				t.Errorf("%d steps started: %v", n, kinds(first.Events()))
			}

			// Long after the lease, the same job on another run: a claim left
			// behind would be in doubt now.
			clk.Advance(2 * lease)
			again, _ := newExecutor(t, r, edits(withStore(db), leaseOf(lease)))
			res, err := again.Execute(context.Background(), plan)
			var ioe *planexec.IndeterminateOutcomeError
			if errors.As(err, &ioe) {
				t.Fatalf("a later run: the claim of the cancelled run was left behind: %v", err)
			}
			if err != nil || !res.Complete {
				t.Fatalf("a later run: %+v, %v", res, err)
			}
			if b1 := res.Steps["b1"]; b1.Replayed || string(b1.Outcome) != `"PNR-BA117"` {
				t.Errorf("b1 = %+v, want booked now", b1)
			}
			if n := callsOf(r, "book_flight"); n != 1 {
				t.Errorf("book_flight called %d times, want once", n)
			}
		})
	}
}

func TestAClaimThatLandedThoughTheStoreReportedAnErrorIsGivenBack(t *testing.T) {
	ctx := context.Background()
	const lease = time.Minute
	clk := planexec.NewFakeClock()
	db := &cancelClaimStore{Store: memory.New(memory.WithClock(clk.Now))}
	lost := errors.New("connection reset after the commit")
	db.first = func(wctx context.Context, req store.ClaimRequest) (store.Claim, error) {
		if c, err := db.Store.Claim(wctx, req); err != nil || c.State != store.ClaimAcquired {
			return c, fmt.Errorf("the test store's claim: %+v, %v", c, err)
		}
		return store.Claim{}, lost
	}
	r := &recorder{}
	plan := iOne(iBooking("b1"))
	first, _ := newExecutor(t, r, edits(withStore(db), leaseOf(lease)))
	res, err := first.Execute(ctx, plan)
	if !errors.Is(err, lost) {
		t.Fatalf("err = %v, want the store's error", err)
	}
	if res != nil && res.Complete {
		t.Errorf("result = %+v, want incomplete", res)
	}
	if n := len(r.Calls()); n != 0 {
		t.Fatalf("the tool was called %d times without a claim", n)
	}

	clk.Advance(2 * lease)
	again, _ := newExecutor(t, r, edits(withStore(db), leaseOf(lease)))
	res, err = again.Execute(ctx, plan)
	if err != nil {
		t.Fatalf("a later run: %v (the claim that landed was not given back)", err)
	}
	if b1 := res.Steps["b1"]; b1.Replayed || string(b1.Outcome) != `"PNR-BA117"` {
		t.Errorf("b1 = %+v, want booked now", b1)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("book_flight called %d times, want once", n)
	}
}

func TestARunCancelledBeforeItsOnlyStepRanIsReportedCancelled(t *testing.T) {
	// Whether the run sees the step's result or the cancellation first is
	// up to the scheduler: try many times, so that a run that takes the
	// result first is among them.
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		db := &cancelClaimStore{Store: memory.New()}
		db.first = func(wctx context.Context, req store.ClaimRequest) (store.Claim, error) {
			c, err := db.Store.Claim(wctx, req)
			cancel()
			return c, err
		}
		r := &recorder{}
		run, _ := newExecutor(t, r, withStore(db))
		res, err := run.Execute(ctx, iOne(iBooking("b1")))
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("attempt %d: err = %v, want context.Canceled", i, err)
		}
		if res != nil && res.Complete {
			t.Fatalf("attempt %d: result = %+v: a run whose only step never ran is complete", i, res)
		}
		if es := run.Events(); count(es, planexec.EventPlanCompleted) != 0 || findEvent(es, planexec.EventPlanFailed, "") < 0 {
			t.Fatalf("attempt %d: events %v, want the plan failed, not completed", i, kinds(es))
		}
		rec, lerr := db.LoadPlan(context.Background(), "acme", "run-1")
		if lerr != nil || rec.Status != store.RunInterrupted {
			t.Fatalf("attempt %d: stored run %+v, %v; want it interrupted", i, rec, lerr)
		}
	}
}
