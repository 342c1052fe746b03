package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
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

// Two writes whose preconditions both held when they were read, before
// either acted (two proposals applied at once), cannot both land: each tool
// checks again as it writes, so the second is refused with a tool error and
// the tracker never holds a cycle or two items of one title.
func TestTwoWritesCheckedTogetherCannotBothLand(t *testing.T) {
	ctx := context.Background()
	ana := planexec.Delegation{Tenant: tenant, User: "ana", Scope: scope("ana")}
	for _, tc := range []struct {
		name  string
		check func(*tracker) error // the precondition, read first
		write func(*tracker) error // the tool, run after both checks
		why   string
		holds func(*tracker) string // what must hold after both writes, or why not
	}{
		{
			name: "dependencies that together close a cycle",
			check: func(items *tracker) error {
				if err := items.canDepend(ctx, ana, Dependency{Item: "T-1", DependsOn: "T-2"}); err != nil {
					return err
				}
				return items.canDepend(ctx, ana, Dependency{Item: "T-2", DependsOn: "T-1"})
			},
			write: func(items *tracker) error {
				if _, err := items.depend(ctx, Dependency{Item: "T-1", DependsOn: "T-2"}); err != nil {
					return err
				}
				_, err := items.depend(ctx, Dependency{Item: "T-2", DependsOn: "T-1"})
				return err
			},
			why: "would close a cycle",
			holds: func(items *tracker) string {
				items.mu.Lock()
				defer items.mu.Unlock()
				for id, it := range items.items {
					for _, on := range it.DependsOn {
						if items.waitsFor(on, id) {
							return "the tracker holds a cycle through " + id
						}
					}
				}
				return ""
			},
		},
		{
			name: "two items of one title",
			check: func(items *tracker) error {
				if err := items.canCreate(ctx, ana, NewItem{Title: "Design review"}); err != nil {
					return err
				}
				return items.canCreate(ctx, ana, NewItem{Title: "design review"})
			},
			write: func(items *tracker) error {
				if _, err := items.create(ctx, NewItem{Title: "Design review"}); err != nil {
					return err
				}
				_, err := items.create(ctx, NewItem{Title: "design review"})
				return err
			},
			why: "an item with that title exists already",
			holds: func(items *tracker) string {
				all, _ := items.list(ctx, ListItems{})
				n := 0
				for _, it := range all {
					if strings.EqualFold(it.Title, "Design review") {
						n++
					}
				}
				if n != 1 {
					return fmt.Sprintf("the tracker holds %d items titled so", n)
				}
				return ""
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items := newTracker() // T-1 and T-2, neither waiting
			if err := tc.check(items); err != nil {
				t.Fatalf("the preconditions, read before either write: %v", err)
			}
			err := tc.write(items)
			var terr *chat.ToolError
			if !errors.As(err, &terr) || !strings.Contains(strings.ToLower(terr.Message), tc.why) {
				t.Errorf("the second write: %v; want a tool error saying %q", err, tc.why)
			}
			if terr != nil && (strings.Contains(terr.Message, "T-") || strings.Contains(strings.ToLower(terr.Message), "design review")) {
				t.Errorf("the tool error %q names a value the plan wrote", terr.Message)
			}
			if why := tc.holds(items); why != "" {
				t.Error(why)
			}
		})
	}
}

// Each write refuses, as it acts, what its precondition refuses: an item it
// names that does not exist, an item waiting for itself, a title taken.
func TestEachWriteRefusesWhatItsPreconditionRefuses(t *testing.T) {
	ctx := context.Background()
	items := newTracker()
	for _, tc := range []struct {
		name  string
		write func() error
		code  string
	}{
		{"a dependency on an item that does not exist", func() error {
			_, err := items.depend(ctx, Dependency{Item: "T-1", DependsOn: "T-9"})
			return err
		}, "not_found"},
		{"a dependency of an item that does not exist", func() error {
			_, err := items.depend(ctx, Dependency{Item: "T-9", DependsOn: "T-1"})
			return err
		}, "not_found"},
		{"an item waiting for itself", func() error {
			_, err := items.depend(ctx, Dependency{Item: "T-1", DependsOn: "T-1"})
			return err
		}, "invalid_arguments"},
		{"a title taken", func() error {
			_, err := items.create(ctx, NewItem{Title: "Write the release notes"})
			return err
		}, "conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var terr *chat.ToolError
			if err := tc.write(); !errors.As(err, &terr) || terr.Code != tc.code {
				t.Errorf("%v; want a tool error %q", err, tc.code)
			}
		})
	}
	if all, _ := items.list(ctx, ListItems{}); len(all) != 2 || len(all[0].DependsOn)+len(all[1].DependsOn) != 0 {
		t.Errorf("refused writes changed the tracker: %v", all)
	}
}
