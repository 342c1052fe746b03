package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm/scripted"
)

// The tracker's writes declare what the tracker as it stands must allow: a
// plan on an item that does not exist, or one whose dependency would close
// a cycle with the tracker's own, is refused with that reason when it is
// authorized, before anyone applies it.
func TestAPlanTheTrackerCannotTakeIsRefusedBeforeItIsApplied(t *testing.T) {
	items := newTracker() // T-1 and T-2
	if _, err := items.depend(context.Background(), Dependency{Item: "T-2", DependsOn: "T-1"}); err != nil {
		t.Fatal(err)
	}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: items.writes()})
	if err != nil {
		t.Fatal(err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "r", Tenant: tenant, User: "ana", Scope: scope("ana")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, tool, args, why string
	}{
		{"an item that does not exist", "update_item", `{"id":"T-9","status":"done"}`, "the item does not exist"},
		{"a dependency on an item that does not exist", "add_dependency", `{"item":"T-1","depends_on":"T-9"}`, "an item it names does not exist"},
		{"a dependency that closes a cycle", "add_dependency", `{"item":"T-1","depends_on":"T-2"}`,
			"the item it would wait for already waits for it: the dependency would close a cycle"},
		{"an item made twice", "create_item", `{"title":"Write the release notes"}`, "an item with that title exists already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planexec.Plan{Goal: "g", Steps: []planexec.Step{{ID: "s1", Tool: tc.tool, Arguments: []byte(tc.args)}}}
			err := run.CheckPreconditions(context.Background(), plan)
			var perr *planexec.PlanValidationError
			if !errors.As(err, &perr) || perr.Reason != planexec.ReasonPrecondition || perr.Violations[0].Why != tc.why {
				t.Fatalf("CheckPreconditions: %v; want refused: %s", err, tc.why)
			}
		})
	}
	ok := planexec.Plan{Goal: "g", Steps: []planexec.Step{{ID: "s1", Tool: "add_dependency", Arguments: []byte(`{"item":"T-2","depends_on":"T-1"}`)}}}
	if err := run.CheckPreconditions(context.Background(), ok); err != nil {
		t.Errorf("a dependency the tracker takes: %v", err)
	}
}

// A proposal the tracker took when it was made, but no longer takes when a
// person applies it (an item of its title was made meanwhile), is refused
// whole over HTTP, with the precondition's reason, and nothing runs.
func TestAProposalTheWorldNoLongerTakesIsRefusedWhenApplied(t *testing.T) {
	items := newTracker()
	svc := startService(t, items)
	ana := svc.as(t, "ana")
	ana.must(http.StatusCreated, "POST", "/api/sessions", `{"id": "s1"}`, nil)
	ana.must(http.StatusAccepted, "POST", "/api/sessions/s1/messages", `{"text": "plan items for design review and launch checklist"}`, nil)
	proposal := svc.proposalOf(t, "s1")
	items.mu.Lock()
	items.add(NewItem{Title: "Launch checklist"})
	before := len(items.items)
	items.mu.Unlock()

	resp, body := ana.do("POST", "/api/sessions/s1/proposals/"+proposal+"/apply", `{}`, nil)
	refused(t, resp, body, http.StatusUnprocessableEntity, "apply_refused")
	if want := "an item with that title exists already"; !contains(body, want) {
		t.Errorf("the refusal %s does not say %q", body, want)
	}
	items.mu.Lock()
	after := len(items.items)
	items.mu.Unlock()
	if after != before {
		t.Errorf("the refused apply made %d items", after-before)
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

// A plan the tracker cannot take is refused when the planner proposes it:
// the planner is told why, in the precondition's words, and nothing is
// proposed to the person.
func TestAProposalTheTrackerCannotTakeGoesBackToThePlanner(t *testing.T) {
	items := newTracker()
	// A planner that proposes an item the tracker has, whatever it reads.
	model := scripted.New(
		scripted.Reply{Content: `{"text":"Proposing it.","calls":[{"tool":"propose_plan","arguments":{"goal":"track it","steps":[{"id":"s1","tool":"create_item","arguments":{"title":"Write the release notes"}}]}}]}`},
		scripted.Reply{Content: `{"text":"It is there already.","calls":[]}`},
	)
	svc := startServiceWith(t, model, items)
	ana := svc.as(t, "ana")
	ana.must(http.StatusCreated, "POST", "/api/sessions", `{"id": "s1"}`, nil)
	ana.must(http.StatusAccepted, "POST", "/api/sessions/s1/messages", `{"text": "track the release notes"}`, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	refused := false
	for o, err := range svc.chat.Watch(ctx, tenant, "s1", 0) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Proposal != nil {
			t.Errorf("a proposal the tracker cannot take was made: %+v", o.Proposal)
		}
		if r := o.Result; r != nil && r.Tool == "propose_plan" && r.Error != nil &&
			r.Error.Code == "invalid_plan" && strings.Contains(r.Error.Message, "an item with that title exists already") {
			refused = true
		}
		if o.Done != nil {
			break
		}
	}
	if !refused {
		t.Error("the planner was not told the precondition refused its plan")
	}
}
