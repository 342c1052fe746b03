package planexec_test

// A decision is recorded only for a request a stored run awaits and nobody
// has decided yet; anything else is ErrNotPending, and nothing changes.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

func TestADecisionMustNameAPendingRequestOfTheRun(t *testing.T) {
	ctx := context.Background()
	run, _, _, pending := cExecutePending(t)
	req := pending.Requests[0]

	refused := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, planexec.ErrNotPending) {
			t.Errorf("%s: err = %v, want ErrNotPending", name, err)
		}
	}
	forged := req.Approve("dana")
	forged.RequestID = "sha256:made-up"
	refused("a request never made", run.Decide(ctx, forged))

	if err := run.Decide(ctx, req.Deny("dana", "not that flight")); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	refused("a request already decided", run.Decide(ctx, req.Approve("eve")))

	// The first decision stands.
	_, err := run.Resume(ctx)
	var denied *planexec.ApprovalDeniedError
	if !errors.As(err, &denied) || denied.Approver != "dana" {
		t.Fatalf("Resume: err = %v, want dana's denial", err)
	}
	// The run failed: nothing of it is pending any more.
	refused("a request of a run that failed", run.Decide(ctx, pending.Requests[1].Approve("dana")))
}

func TestADecisionForAnotherTenantsOrRunsRequestIsRefused(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	ex, gate := hExecutor(t, r, st, nil)
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }
	var pending *planexec.ApprovalPendingError
	if _, err := hRun(t, ex, "acme", "run-1").Execute(ctx, tripPlan()); !errors.As(err, &pending) {
		t.Fatalf("Execute: err = %v, want pending", err)
	}
	decision := pending.Requests[0].Approve("dana")
	for _, other := range []*planexec.Run{hRun(t, ex, "globex", "run-1"), hRun(t, ex, "acme", "run-2")} {
		if err := other.Decide(ctx, decision); !errors.Is(err, planexec.ErrNotPending) {
			t.Errorf("Decide on %s/%s: err = %v, want ErrNotPending", other.Delegation().Tenant, other.ID(), err)
		}
	}
	// Nothing was recorded: the run still asks.
	gate.answer = nil
	res, err := hRun(t, ex, "acme", "run-1").Resume(ctx)
	if err != nil || !res.Complete {
		t.Fatalf("Resume: %+v, %v", res, err)
	}
	if asked := gate.Asked(); len(asked) != 2 {
		t.Errorf("the gate was asked %d times, want twice: a refused decision cleared the step", len(asked))
	}
}

func TestOfPeopleDecidingOneRequestAtOnceTheFirstDecisionStands(t *testing.T) {
	ctx := context.Background()
	run, _, _, pending := cExecutePending(t)
	req := pending.Requests[0]
	var wg sync.WaitGroup
	var recorded atomic.Int64
	for i := range 8 {
		wg.Go(func() {
			d := req.Approve(fmt.Sprint("person-", i))
			if i%2 == 1 {
				d = req.Deny(fmt.Sprint("person-", i), "no")
			}
			switch err := run.Decide(ctx, d); {
			case err == nil:
				recorded.Add(1)
			case !errors.Is(err, planexec.ErrNotPending):
				t.Errorf("Decide: %v", err)
			}
		})
	}
	wg.Wait()
	// An approval can be withdrawn by a denial racing it; past that, every
	// decision after the first that settles the request is refused.
	if n := recorded.Load(); n < 1 || n > 2 {
		t.Errorf("%d decisions recorded, want the first (and at most a denial withdrawing it)", n)
	}
}

func TestExecutorsAskingAtOnceActOnTheDecisionRecordedFirst(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	var asked sync.WaitGroup
	asked.Add(2)
	var results [2]*planexec.Result
	var errs [2]error
	var wg sync.WaitGroup
	for i := range 2 {
		ex, gate := hExecutor(t, r, st, nil)
		gate.answer = func(req planexec.ApprovalRequest) planexec.Decision {
			// Both gates are asked before either answers: both answers
			// reach the store, and only the first is recorded.
			asked.Done()
			asked.Wait()
			return req.Approve(fmt.Sprint("person-", i))
		}
		run := hRun(t, ex, "acme", "run-1")
		plan := iOne(iBooking("b1"))
		plan.ID = "p1" // one plan of the run: one request to decide
		wg.Go(func() { results[i], errs[i] = run.Execute(ctx, plan) })
	}
	wg.Wait()
	var approvers []string
	for i, err := range errs {
		switch {
		case err == nil:
			approvers = append(approvers, results[i].Steps["b1"].ApprovedBy)
		case !errors.Is(err, planexec.ErrInFlight) && !errors.Is(err, planexec.ErrRunBusy):
			// The other execution had the run, or the booking in flight:
			// wait and resume. Anything else is a failure to act on the
			// record.
			t.Errorf("Execute %d: %v", i, err)
		}
	}
	if calls := callsOf(r, "book_flight"); calls != 1 {
		t.Errorf("the booking ran %d times, want once", calls)
	}
	if len(approvers) == 2 && approvers[0] != approvers[1] {
		t.Errorf("the executions acted on two approvals, %v: want the one recorded first", approvers)
	}
}
