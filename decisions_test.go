package planexec_test

// A person's decision is read again just before its step runs, is kept by
// the store so another executor finds it, and is recorded only when it is a
// decision at all.

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

func TestTheFirstDecisionStandsAgainstALaterChangeOfMind(t *testing.T) {
	ctx := context.Background()
	var run *planexec.Run
	var gate *approve
	var decideErr error
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			// Dana changes her mind while the search runs: too late.
			asked := gate.Asked()
			decideErr = run.Decide(ctx, asked[len(asked)-1].Deny("dana", "not that flight after all"))
		}
		return nil
	}}
	run, gate = newExecutor(t, r, nil)

	res, err := run.Execute(ctx, tripPlan())

	if !errors.Is(decideErr, planexec.ErrNotPending) {
		t.Fatalf("Decide after the approval: %v, want ErrNotPending: the first decision stands", decideErr)
	}
	if err != nil || !res.Complete || res.Steps["s2"].ApprovedBy != "dana" {
		t.Fatalf("Execute: %+v, %v; want complete, s2 approved by dana", res, err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v, want the search and the booking", got)
	}
}

func TestADecisionRecordedOnOneExecutorIsFoundByAnotherSharingTheStore(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	first, gate1 := newExecutor(t, r, withStore(st))
	gate1.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }

	_, err := first.Execute(ctx, tripPlan())
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) || !pending.Stored || len(pending.Requests) != 1 {
		t.Fatalf("err = %v, want one pending request, stored", err)
	}
	if err := first.Decide(ctx, pending.Requests[0].Approve("dana")); err != nil {
		t.Fatalf("Decide: %v", err)
	}

	// Another process picks the run up; it shares the store only.
	second, gate2 := newExecutor(t, r, withStore(st))
	res, err := second.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if asked := gate2.Asked(); len(asked) != 0 {
		t.Errorf("the second executor asked again: %+v", asked)
	}
	if !res.Complete || res.Steps["s2"].ApprovedBy != "dana" {
		t.Errorf("result = %+v, want complete with s2 approved by dana", res)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v", got)
	}
	es := second.Events()
	if i := findEvent(es, planexec.EventApprovalGranted, "s2"); i < 0 || !es[i].Replayed {
		t.Errorf("want a replayed APPROVAL_GRANTED for s2: %v", kinds(es))
	}
}

func TestADecisionThatIsNoDecisionIsRefusedAndNothingIsRecorded(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	run, gate := newExecutor(t, r, withStore(st))
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }
	_, err := run.Execute(ctx, tripPlan())
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) || len(pending.Requests) != 1 {
		t.Fatalf("err = %v, want one pending request", err)
	}
	req := pending.Requests[0]
	for name, d := range map[string]planexec.Decision{
		"no request":    {Status: planexec.Approved, Approver: "dana"},
		"still pending": req.Defer(),
		"no status":     {RequestID: req.ID, Approver: "dana"},
		"an odd status": {RequestID: req.ID, Status: "maybe", Approver: "dana"},
	} {
		if err := run.Decide(ctx, d); !errors.Is(err, planexec.ErrInvalidDecision) {
			t.Errorf("%s: Decide = %v, want ErrInvalidDecision", name, err)
		}
	}
	if _, err := st.Decision(ctx, "acme", req.ID); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("after the refused decisions: Decision = %v, want ErrNoRecord", err)
	}
	// Still pending: the resume asks again and nothing runs.
	if _, err := run.Resume(ctx); !errors.As(err, &pending) {
		t.Errorf("Resume: err = %v, want still pending", err)
	}
	if n := len(r.Calls()); n != 0 {
		t.Errorf("tools called %d times before anything was decided", n)
	}
}
