package planexec_test

// A tool may declare a Precondition: a read-only check of a step's
// arguments against the world as it stands, under the step's delegation.
// Run.CheckPreconditions refuses a plan the world cannot take (before
// anyone applies it), and the gate checks again just before the step acts:
// a world that changed in between fails the step, which does nothing, with
// its own reason.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store/memory"
)

// board is a world of items and edges between them; tools add to it.
type board struct {
	mu      sync.Mutex
	items   map[string]bool
	edges   map[string][]string
	did     []string // the effects done, in order
	checked []string // who each check ran for, "user:tool"
	broken  error    // what every check fails with, when set
}

type itemArgs struct {
	ID string `json:"id"`
}

type edgeArgs struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// reaches reports whether to is reachable from from.
func (b *board) reaches(from, to string) bool {
	seen := map[string]bool{}
	next := []string{from}
	for len(next) > 0 {
		n := next[len(next)-1]
		next = next[:len(next)-1]
		if n == to {
			return true
		}
		if !seen[n] {
			seen[n] = true
			next = append(next, b.edges[n]...)
		}
	}
	return false
}

func (b *board) tools(t *testing.T) []*planexec.Tool {
	t.Helper()
	create, err := planexec.NewTool("create_item", "Create an item.",
		func(_ context.Context, a itemArgs) (string, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.items[a.ID] = true
			b.did = append(b.did, "create "+a.ID)
			return a.ID, nil
		},
		planexec.Irreversible(),
		planexec.Precondition(func(_ context.Context, d planexec.Delegation, a itemArgs) error {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.checked = append(b.checked, d.User+":create_item")
			if b.broken != nil {
				return b.broken
			}
			if b.items[a.ID] {
				return planexec.Unmet("the item exists already")
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	link, err := planexec.NewTool("link", "Make one item wait on another.",
		func(_ context.Context, a edgeArgs) (string, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.edges[a.From] = append(b.edges[a.From], a.To)
			b.did = append(b.did, "link "+a.From+"->"+a.To)
			return "linked", nil
		},
		planexec.Irreversible(),
		planexec.Precondition(func(_ context.Context, d planexec.Delegation, a edgeArgs) error {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.checked = append(b.checked, d.User+":link")
			switch {
			case !b.items[a.From] || !b.items[a.To]:
				return planexec.Unmet("an item it names does not exist")
			case b.reaches(a.To, a.From):
				return planexec.Unmet("the edge would close a cycle")
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return []*planexec.Tool{create, link}
}

func newBoard() *board {
	return &board{items: map[string]bool{"a": true, "b": true}, edges: map[string][]string{"b": {"a"}}}
}

func boardRun(t *testing.T, b *board) *planexec.Run {
	t.Helper()
	return boardRuns(t, b, "run-1")[0]
}

// boardRuns builds one executor over b's tools and a run of it for each id.
func boardRuns(t *testing.T, b *board, ids ...string) []*planexec.Run {
	t.Helper()
	ex, err := planexec.NewExecutor(planexec.Config{Tools: b.tools(t), Store: memory.New(), Gate: &approve{}})
	if err != nil {
		t.Fatal(err)
	}
	var runs []*planexec.Run
	for _, id := range ids {
		run, err := ex.Run(planexec.Delegation{RunID: id, Tenant: "acme", User: "ana", Agent: "planner"})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	return runs
}

func TestCheckPreconditionsRefusesAPlanTheWorldRefusesWithTheToolsOwnReason(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		step      planexec.Step
	}{
		{"a missing item", "an item it names does not exist", step("s1", "link", edgeArgs{From: "a", To: "ghost"})},
		{"a cycle with the world's edges", "the edge would close a cycle", step("s1", "link", edgeArgs{From: "a", To: "b"})},
		{"an item that exists", "the item exists already", step("s1", "create_item", itemArgs{ID: "a"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBoard()
			run := boardRun(t, b)
			plan := planexec.Plan{Goal: "g", Steps: []planexec.Step{step("s0", "create_item", itemArgs{ID: "c"}), tc.step}}
			err := run.CheckPreconditions(context.Background(), plan)
			var perr *planexec.PlanValidationError
			if !errors.As(err, &perr) || perr.Reason != planexec.ReasonPrecondition || perr.Step != "s1" || perr.Tool != tc.step.Tool {
				t.Fatalf("CheckPreconditions: %v; want ReasonPrecondition naming step s1 and its tool", err)
			}
			if len(perr.Violations) != 1 || perr.Violations[0].Why != tc.why || perr.Violations[0].Path != "/steps/1" {
				t.Errorf("violations = %v, want %q at /steps/1", perr.Violations, tc.why)
			}
			if !errors.Is(err, planexec.ReasonPrecondition) {
				t.Errorf("errors.Is(err, ReasonPrecondition) is false")
			}
			if len(b.did) != 0 {
				t.Errorf("CheckPreconditions did %v", b.did)
			}
			if !slices.Contains(b.checked, "ana:"+tc.step.Tool) {
				t.Errorf("checks ran for %v, want the person's delegation (ana)", b.checked)
			}
		})
	}
}

func TestAPreconditionUnmetJustBeforeTheStepFailsItAndDoesNothing(t *testing.T) {
	ctx := context.Background()
	b := newBoard()
	runs := boardRuns(t, b, "run-1", "run-2")
	run, other := runs[0], runs[1]
	plan := planexec.Plan{Goal: "g", Steps: []planexec.Step{step("s1", "create_item", itemArgs{ID: "c"})}}
	if err := run.CheckPreconditions(ctx, plan); err != nil {
		t.Fatalf("CheckPreconditions while c does not exist: %v", err)
	}
	// Someone else makes c before the plan runs.
	b.mu.Lock()
	b.items["c"] = true
	b.mu.Unlock()
	res, err := run.Execute(ctx, plan)
	var serr *planexec.StepError
	var perr *planexec.PlanValidationError
	if !errors.As(err, &serr) || serr.Step != "s1" || !errors.As(err, &perr) || perr.Reason != planexec.ReasonPrecondition {
		t.Fatalf("Execute: %v; want step s1 failed by its precondition", err)
	}
	if len(b.did) != 0 {
		t.Errorf("the step acted: %v", b.did)
	}
	if sr := res.Steps["s1"]; sr.Status != planexec.StepFailed {
		t.Errorf("s1 = %+v, want failed", sr)
	}
	if i := findEvent(run.Events(), planexec.EventStepFailed, "s1"); i < 0 || run.Events()[i].Reason != planexec.ReasonPrecondition {
		t.Errorf("no step_failed event with reason precondition for s1: %v", kinds(run.Events()))
	}
	// Its key was released: nothing happened, so the effect may be done by
	// another run once the world allows it.
	b.mu.Lock()
	delete(b.items, "c")
	b.mu.Unlock()
	if res, err := other.Execute(ctx, plan); err != nil || !res.Complete {
		t.Fatalf("another run once c is gone: %+v, %v", res, err)
	}
	if !slices.Equal(b.did, []string{"create c"}) {
		t.Errorf("effects = %v, want c created once", b.did)
	}
}

func TestAStepWithReferencesIsCheckedWithItsResolvedArguments(t *testing.T) {
	ctx := context.Background()
	b := newBoard()
	run := boardRun(t, b)
	// s2 links the item s1 creates to a: unknown until s1 ran, so only the
	// check just before s2 sees it, and by then it exists.
	plan := planexec.Plan{Goal: "g", Steps: []planexec.Step{
		step("s1", "create_item", itemArgs{ID: "c"}),
		step("s2", "link", `{"from":{"$from":"s1","path":""},"to":"a"}`, "s1"),
	}}
	if err := run.CheckPreconditions(ctx, plan); err != nil {
		t.Fatalf("CheckPreconditions: %v", err)
	}
	res, err := run.Execute(ctx, plan)
	if err != nil || !res.Complete {
		t.Fatalf("Execute: %+v, %v", res, err)
	}
	if !slices.Equal(b.did, []string{"create c", "link c->a"}) {
		t.Errorf("effects = %v", b.did)
	}
	if n := strings.Count(strings.Join(b.checked, ","), "ana:link"); n != 1 {
		t.Errorf("link was checked %d times (%v), want once: just before it ran", n, b.checked)
	}
}

func TestAPreconditionThatCannotBeCheckedFailsTheStepWithoutShowingWhy(t *testing.T) {
	ctx := context.Background()
	b := newBoard()
	b.broken = errors.New("board database: connection refused to 10.0.0.7")
	tools := b.tools(t)
	model := scripted.New(
		scripted.Reply{Content: `{"goal":"make c","steps":[{"id":"s1","tool":"create_item","arguments":{"id":"c"}}]}`},
		scripted.Reply{Content: `{"goal":"","steps":[],"answer":"Could not.","question":null}`},
	)
	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: tools, Store: memory.New(), Gate: &approve{}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "ana", Agent: "planner"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Do(ctx, planner, "make c")
	if err != nil || res.Answer != "Could not." {
		t.Fatalf("Do: %+v, %v", res, err)
	}
	if len(b.did) != 0 {
		t.Errorf("the step acted: %v", b.did)
	}
	reqs := model.Requests()
	second := fmt.Sprint(reqs[len(reqs)-1].Messages)
	if strings.Contains(second, "10.0.0.7") || !strings.Contains(second, "the tool failed") {
		t.Errorf("the planner was told %q; want the fixed words, never the check's error", second)
	}
}

func TestAPreconditionUnmetInARoundIsToldToThePlannerInTheToolsWords(t *testing.T) {
	ctx := context.Background()
	b := newBoard()
	model := scripted.New(
		scripted.Reply{Content: `{"goal":"link","steps":[{"id":"s1","tool":"link","arguments":{"from":"a","to":"b"}}]}`},
		scripted.Reply{Content: `{"goal":"","steps":[],"answer":"That would make a loop.","question":null}`},
	)
	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
	if err != nil {
		t.Fatal(err)
	}
	run := boardRun(t, b)
	res, err := run.Do(ctx, planner, "link a to b")
	if err != nil || !res.Complete {
		t.Fatalf("Do: %+v, %v", res, err)
	}
	reqs := model.Requests()
	raw, _ := json.Marshal(reqs[len(reqs)-1].Messages)
	if !strings.Contains(string(raw), "its precondition is unmet: the edge would close a cycle") {
		t.Errorf("the planner was not told the precondition's words: %s", raw)
	}
	if len(b.did) != 0 {
		t.Errorf("effects = %v, want none", b.did)
	}
}

func TestAPreconditionOfAnotherTypeThanTheArgumentsIsAConfigurationError(t *testing.T) {
	_, err := planexec.NewTool("create_item", "Create an item.",
		func(context.Context, itemArgs) (string, error) { return "", nil },
		planexec.Precondition(func(context.Context, planexec.Delegation, edgeArgs) error { return nil }))
	var cerr *planexec.ConfigurationError
	if !errors.As(err, &cerr) || cerr.Tool != "create_item" {
		t.Fatalf("NewTool: %v, want a *ConfigurationError naming the tool", err)
	}
}

func TestCheckPreconditionsLeavesAStepThatActedToItsClaim(t *testing.T) {
	ctx := context.Background()
	b := newBoard()
	runs := boardRuns(t, b, "run-1", "run-2")
	plan := planexec.Plan{Goal: "g", Steps: []planexec.Step{step("s1", "create_item", itemArgs{ID: "c"})}}
	if res, err := runs[0].Execute(ctx, plan); err != nil || !res.Complete {
		t.Fatalf("Execute: %+v, %v", res, err)
	}
	// c exists now because s1 made it: the run that made it is not refused
	// for it (applying more of a plan authorizes the whole plan again) ...
	if err := runs[0].CheckPreconditions(ctx, plan); err != nil {
		t.Errorf("CheckPreconditions by the run whose step made c: %v", err)
	}
	// ... another run is.
	if err := runs[1].CheckPreconditions(ctx, plan); !errors.Is(err, planexec.ReasonPrecondition) {
		t.Errorf("CheckPreconditions by another run: %v, want ReasonPrecondition", err)
	}
	if res, err := runs[0].Resume(ctx); err != nil || !res.Steps["s1"].Replayed {
		t.Errorf("Resume: %+v, %v; want s1 replayed", res, err)
	}
	if !slices.Equal(b.did, []string{"create c"}) {
		t.Errorf("effects = %v", b.did)
	}
}

func TestCheckPreconditionsLeavesAStepAfterOneYetToActToTheGate(t *testing.T) {
	ctx := context.Background()
	b := newBoard()
	run := boardRun(t, b)
	// s1 links the item s0 makes: refused by the world as it is now, taken
	// by the world s0 leaves.
	plan := planexec.Plan{Goal: "g", Steps: []planexec.Step{
		step("s0", "create_item", itemArgs{ID: "c"}),
		step("s1", "link", edgeArgs{From: "c", To: "a"}, "s0"),
	}}
	if err := run.CheckPreconditions(ctx, plan); err != nil {
		t.Fatalf("CheckPreconditions: %v; want s1 left to the gate", err)
	}
	if res, err := run.Execute(ctx, plan); err != nil || !res.Complete {
		t.Fatalf("Execute: %+v, %v", res, err)
	}
	if !slices.Equal(b.did, []string{"create c", "link c->a"}) {
		t.Errorf("effects = %v", b.did)
	}
	// Without the dependency the link is judged now, and refused.
	plan.Steps[1].DependsOn = nil
	plan.Steps[0].Arguments = []byte(`{"id":"d"}`)
	plan.Steps[1].Arguments = []byte(`{"from":"e","to":"a"}`)
	if err := boardRuns(t, newBoard(), "run-2")[0].CheckPreconditions(ctx, plan); !errors.Is(err, planexec.ReasonPrecondition) {
		t.Errorf("a link on no item, after nothing: %v, want ReasonPrecondition", err)
	}
}
