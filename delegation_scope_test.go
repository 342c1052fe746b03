package planexec_test

// A run acts under its delegation: the scope narrows the executor's tools
// (a scope that leaves none can plan and run nothing), and a child
// delegation is a run of its own, with keys of its own.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store/memory"
)

func TestARunWhoseScopeLeavesNoToolCanPlanAndRunNothing(t *testing.T) {
	for name, scope := range map[string][]string{
		"an empty scope":                      {},
		"a scope of tools the executor lacks": {"cancel_order"},
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{}
			// Set as it is: an empty scope is not a nil one (nil allows all).
			run, _ := newExecutor(t, r, func(s *setup) { s.Delegation.Scope = scope })
			if cat := run.Catalog(); len(cat) != 0 {
				t.Errorf("catalog = %+v, want none", cat)
			}
			model := scripted.New()
			planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "courier"})
			if err != nil {
				t.Fatalf("NewAgentPlanner: %v", err)
			}
			_, err = run.Plan(context.Background(), planner, "get them to New York")
			var de *planexec.DelegationError
			if !errors.As(err, &de) || de.RunID != "run-1" {
				t.Errorf("Plan: err = %v, want a *DelegationError for run-1", err)
			}
			if n := len(model.Requests()); n != 0 {
				t.Errorf("the model was asked %d times for a plan nothing could run", n)
			}
			_, err = run.Execute(context.Background(), iOne(iSearch("s1", "LHR")))
			if !errors.Is(err, planexec.ReasonNotAllowed) {
				t.Errorf("Execute: err = %v, want a not_allowed refusal", err)
			}
			if n := len(r.Calls()); n != 0 {
				t.Errorf("tools called %d times", n)
			}
		})
	}
}

func TestAScopeNarrowsTheCatalogToTheToolsItNames(t *testing.T) {
	r := &recorder{}
	run, _ := newExecutor(t, r, withScope("search_flights", "cancel_order"))
	if cat := run.Catalog(); len(cat) != 1 || cat[0].Name != "search_flights" {
		t.Errorf("catalog = %+v, want search_flights only", cat)
	}
	if err := run.Validate(iOne(iSearch("s1", "LHR"))); err != nil {
		t.Errorf("a search within the scope was refused: %v", err)
	}
	if err := run.Validate(iOne(iBooking("b1"))); !errors.Is(err, planexec.ReasonNotAllowed) {
		t.Errorf("a booking outside the scope: err = %v, want not_allowed", err)
	}
}

func TestAChildDelegationIsARunOfItsOwn(t *testing.T) {
	ctx := context.Background()
	parent := planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "dana", Agent: "courier"}
	child, err := parent.Delegate("scout", []string{"search_flights"}, time.Time{})
	if err != nil {
		t.Fatalf("Delegate: %v", err)
	}
	sibling, err := parent.Delegate("scout", []string{"search_flights"}, time.Time{})
	if err != nil {
		t.Fatalf("Delegate: %v", err)
	}
	if child.RunID == "" || child.RunID == parent.RunID || child.Parent != parent.RunID {
		t.Errorf("child run %q parent %q, want a new run whose parent is %q", child.RunID, child.Parent, parent.RunID)
	}
	if sibling.RunID == child.RunID {
		t.Errorf("two children share the run %q", child.RunID)
	}
	grandchild, err := child.Delegate("clerk", []string{"search_flights"}, time.Time{})
	if err != nil {
		t.Fatalf("Delegate: %v", err)
	}
	if grandchild.Parent != child.RunID || grandchild.RunID == child.RunID || grandchild.RunID == parent.RunID {
		t.Errorf("grandchild run %q parent %q, want a new run whose parent is %q", grandchild.RunID, grandchild.Parent, child.RunID)
	}

	// The same search in the child is an effect of its own, not a replay of
	// the parent's.
	db := memory.New()
	r := &recorder{}
	plan := iOne(iSearch("s1", "LHR"))
	prun, _ := newExecutor(t, r, edits(withStore(db), func(s *setup) { s.Delegation = parent }))
	crun, _ := newExecutor(t, r, edits(withStore(db), func(s *setup) { s.Delegation = child }))
	if crun.ID() != child.RunID {
		t.Errorf("the child's run acts for run %q, want %q", crun.ID(), child.RunID)
	}
	if _, err := prun.Execute(ctx, plan); err != nil {
		t.Fatalf("parent: %v", err)
	}
	res, err := crun.Execute(ctx, plan)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if res.Steps["s1"].Replayed {
		t.Errorf("the child's search replayed the parent's outcome")
	}
	calls := r.Calls()
	if len(calls) != 2 || calls[0].Key == calls[1].Key {
		t.Errorf("calls = %+v, want two searches under two keys", calls)
	}
}
