package planexec_test

// An executor built with a store and no tools is enough to look after a run
// another executor acts in: an operator's console decides its approvals,
// resolves its doubts and forgets it, and the acting executor goes on from
// what was recorded.

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// toollessRun is run-1 of tenant acme on an executor with st and no tools.
func toollessRun(t *testing.T, st store.Store) *planexec.Run {
	t.Helper()
	ex, err := planexec.NewExecutor(planexec.Config{Store: st})
	if err != nil {
		t.Fatalf("NewExecutor with no tools: %v", err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "ops"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if cat := run.Catalog(); len(cat) != 0 {
		t.Errorf("a tool-less executor's catalog = %+v", cat)
	}
	return run
}

func TestAnExecutorWithNoToolsDecidesAPendingApprovalForAnother(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	acting, gate := newExecutor(t, r, withStore(st))
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }
	_, err := acting.Execute(ctx, tripPlan())
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) || !pending.Stored || len(pending.Requests) != 1 {
		t.Fatalf("err = %v, want one pending request, stored", err)
	}

	if err := toollessRun(t, st).Decide(ctx, pending.Requests[0].Approve("dana")); err != nil {
		t.Fatalf("Decide on the tool-less executor: %v", err)
	}

	resumed, gate2 := newExecutor(t, r, withStore(st))
	res, err := resumed.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if asked := gate2.Asked(); len(asked) != 0 {
		t.Errorf("the acting executor asked again: %+v", asked)
	}
	if !res.Complete || res.Steps["s2"].ApprovedBy != "dana" {
		t.Errorf("result = %+v, want complete with s2 approved by dana", res)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v, want the search and the booking once each", got)
	}
}

func TestAnExecutorWithNoToolsResolvesAStepInDoubtForAnother(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	failOnce(r, "book_flight", errors.New("gateway timeout"))
	acting, _ := newExecutor(t, r, withStore(st))
	_, err := acting.Execute(ctx, tripPlan())
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) || !ioe.InDoubt {
		t.Fatalf("err = %v, want s2 in doubt", err)
	}

	if err := toollessRun(t, st).Resolve(ctx, ioe.Key, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`"PNR-FOUND-BY-OPS"`)}); err != nil {
		t.Fatalf("Resolve on the tool-less executor: %v", err)
	}

	resumed, _ := newExecutor(t, r, withStore(st))
	res, err := resumed.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if s2 := res.Steps["s2"]; !s2.Replayed || string(s2.Outcome) != `"PNR-FOUND-BY-OPS"` || !res.Complete {
		t.Errorf("s2 = %+v, want the resolved booking replayed", s2)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("book_flight called %d times, want only the failed call", n)
	}
}

func TestAnExecutorWithNoToolsForgetsAnothersRun(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	acting, _ := newExecutor(t, r, withStore(st))
	if _, err := acting.Execute(ctx, tripPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}

	if err := toollessRun(t, st).Forget(ctx); err != nil {
		t.Fatalf("Forget on the tool-less executor: %v", err)
	}

	resumed, _ := newExecutor(t, r, withStore(st))
	if _, err := resumed.Resume(ctx); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("Resume after Forget: err = %v, want ErrNoRecord", err)
	}
}
