package planexec_test

// Do is what a service calls on every request for a job: the first time it
// plans and executes; once the store holds the job, it resumes, so a retried
// request never plans or acts again.

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store/memory"
)

// doTripJSON is the trip's plan as a model writes it.
const doTripJSON = `{"goal":"get them to New York","steps":[
	{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}},
	{"id":"s2","tool":"book_flight","arguments":{"flight":"BA117","seats":1},"depends_on":["s1"]}]}`

// doPlanner plans with a model that has one answer, the trip: asked twice,
// it fails.
func doPlanner(t *testing.T) (planexec.Planner, *scripted.Model) {
	t.Helper()
	model := scripted.New(scripted.Reply{Content: doTripJSON})
	p, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "courier"})
	if err != nil {
		t.Fatalf("NewAgentPlanner: %v", err)
	}
	return p, model
}

func TestDoPlansAndExecutesTheFirstTimeAndResumesFromTheStoreAfter(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	planner, model := doPlanner(t)
	r := &recorder{}

	first, _ := newExecutor(t, r, withStore(st))
	res, err := first.Do(ctx, planner, "get them to New York")
	if err != nil {
		t.Fatalf("first Do: %v", err)
	}
	if !res.Complete {
		t.Fatalf("first Do: result %+v, want complete", res)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v, want the search then the booking", got)
	}
	if es := first.Events(); count(es, planexec.EventPlanned) != 1 || count(es, planexec.EventPlanResumed) != 0 {
		t.Errorf("first Do: events %v, want planned once and not resumed", kinds(es))
	}

	// The same request again, for the same job, on a new Run.
	second, _ := newExecutor(t, r, withStore(st))
	again, err := second.Do(ctx, planner, "get them to New York")
	if err != nil {
		t.Fatalf("second Do: %v", err)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times in all, want once: the second Do planned again", n)
	}
	if n := len(r.Calls()); n != 2 {
		t.Errorf("tools called %d times in all, want 2: the second Do acted again", n)
	}
	if !again.Complete || again.PlanID != res.PlanID {
		t.Errorf("second Do: result %+v, want the first plan %s, complete", again, res.PlanID)
	}
	for _, id := range []string{"s1", "s2"} {
		if s := again.Steps[id]; !s.Replayed || string(s.Outcome) != string(res.Steps[id].Outcome) {
			t.Errorf("step %s = %+v, want replayed with %s", id, s, res.Steps[id].Outcome)
		}
	}
	es := second.Events()
	if count(es, planexec.EventPlanResumed) != 1 || count(es, planexec.EventPlanned) != 0 || count(es, planexec.EventStepStarted) != 0 {
		t.Errorf("second Do: events %v, want resumed, not planned, nothing started", kinds(es))
	}
}

func TestDoOfAJobThatStoppedHalfwayRunsOnlyWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	planner, model := doPlanner(t)
	r := &recorder{}
	failOnce(r, "book_flight", fmt.Errorf("fare service down: %w", planexec.ErrNotApplied))

	first, _ := newExecutor(t, r, withStore(st))
	if _, err := first.Do(ctx, planner, "get them to New York"); err == nil {
		t.Fatal("first Do succeeded with a failing booking")
	}
	second, _ := newExecutor(t, r, withStore(st))
	res, err := second.Do(ctx, planner, "get them to New York")
	if err != nil {
		t.Fatalf("second Do: %v", err)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight", "book_flight"}) {
		t.Errorf("calls = %v, want the search once and the booking again", got)
	}
	if s1, s2 := res.Steps["s1"], res.Steps["s2"]; !s1.Replayed || s2.Replayed || !res.Complete {
		t.Errorf("s1 = %+v, s2 = %+v; want s1 replayed and s2 run now", s1, s2)
	}
}

func TestDoWithoutAStorePlansAndExecutes(t *testing.T) {
	planner, model := doPlanner(t)
	r := &recorder{}
	run, _ := newExecutor(t, r, nil)
	res, err := run.Do(context.Background(), planner, "get them to New York")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if !res.Complete {
		t.Errorf("result %+v, want complete", res)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v, want the search then the booking", got)
	}
	if n := count(run.Events(), planexec.EventPlanned); n != 1 {
		t.Errorf("%d PLANNED events, want 1: %v", n, kinds(run.Events()))
	}
}
