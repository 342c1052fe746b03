package planexec_test

// Do is what a service calls on every request for a job: the first time it
// plans and runs it, in rounds, until the planner answers; once the store
// holds the job, it goes on from where it stands, so a retried request never
// plans or acts again.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store/memory"
)

// doTripJSON is the trip's plan as a model writes it, and doAnswerJSON its
// answer once the trip ran.
const (
	doTripJSON = `{"goal":"get them to New York","steps":[
	{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}},
	{"id":"s2","tool":"book_flight","arguments":{"flight":"BA117","seats":1},"depends_on":["s1"]}]}`
	doAnswerJSON = `{"goal":"","steps":[],"answer":"Booked BA117.","question":null}`
)

// doPlanner plans with a model that has two answers, the trip and then the
// answer: asked a third time, it fails.
func doPlanner(t *testing.T) (planexec.Planner, *scripted.Model) {
	t.Helper()
	model := scripted.New(scripted.Reply{Content: doTripJSON}, scripted.Reply{Content: doAnswerJSON})
	p, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "courier"})
	if err != nil {
		t.Fatalf("NewAgentPlanner: %v", err)
	}
	return p, model
}

func TestDoPlansRunsAndAnswersTheFirstTimeAndReturnsTheStoredAnswerAfter(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	planner, model := doPlanner(t)
	r := &recorder{}

	first, _ := newExecutor(t, r, withStore(st))
	res, err := first.Do(ctx, planner, "get them to New York")
	if err != nil {
		t.Fatalf("first Do: %v", err)
	}
	if !res.Complete || res.Answer != "Booked BA117." || res.Round != 2 || res.AtLimit {
		t.Fatalf("first Do: result %+v, want answered in round 2", res)
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want twice: the plan, then the answer", n)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v, want the search then the booking", got)
	}
	if s := res.Steps["s2"]; s.Status != planexec.StepDone {
		t.Errorf("the answered result's last round: %+v", res.Steps)
	}
	if es := first.Events(); count(es, planexec.EventRoundStarted) != 2 || count(es, planexec.EventRoundCompleted) != 1 || count(es, planexec.EventAnswered) != 1 {
		t.Errorf("first Do: events %v, want two rounds started, one completed, one answer", kinds(es))
	}

	// The same request again, for the same job, on a new Run.
	second, _ := newExecutor(t, r, withStore(st))
	again, err := second.Do(ctx, planner, "get them to New York")
	if err != nil {
		t.Fatalf("second Do: %v", err)
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times in all, want twice: the second Do planned again", n)
	}
	if n := len(r.Calls()); n != 2 {
		t.Errorf("tools called %d times in all, want 2: the second Do acted again", n)
	}
	if again.Answer != res.Answer || again.PlanID != res.PlanID || !again.Complete {
		t.Errorf("second Do: result %+v, want the stored answer of plan %s", again, res.PlanID)
	}
	if es := second.Events(); count(es, planexec.EventPlanned) != 0 || count(es, planexec.EventStepStarted) != 0 {
		t.Errorf("second Do: events %v, want nothing planned or started", kinds(es))
	}
}

func TestDoOfAJobStoppedHalfwayRunsOnlyWhatIsLeftThenPlansOn(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	planner, model := doPlanner(t)
	r := &recorder{}
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	r.fail = func(tool string, _ any) error {
		if tool == "book_flight" && stop.Err() == nil {
			cancel() // the service shuts down while the booking is being prepared
			return fmt.Errorf("not sent: %w: %w", context.Canceled, planexec.ErrNotApplied)
		}
		return nil
	}
	first, _ := newExecutor(t, r, withStore(st))
	if _, err := first.Do(stop, planner, "get them to New York"); !errors.Is(err, context.Canceled) {
		t.Fatalf("first Do: %v, want it cancelled", err)
	}
	second, _ := newExecutor(t, r, withStore(st))
	res, err := second.Do(ctx, planner, "get them to New York")
	if err != nil {
		t.Fatalf("second Do: %v", err)
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want twice: round 1 once, then the answer", n)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight", "book_flight"}) {
		t.Errorf("calls = %v, want the search once and the booking again", got)
	}
	if s1, s2 := res.Steps["s1"], res.Steps["s2"]; !s1.Replayed || s2.Replayed || res.Answer == "" {
		t.Errorf("s1 = %+v, s2 = %+v, answer %q; want s1 replayed, s2 run now, and an answer", s1, s2, res.Answer)
	}
}

func TestDoWithoutAStorePlansRunsAndAnswers(t *testing.T) {
	planner, model := doPlanner(t)
	r := &recorder{}
	run, _ := newExecutor(t, r, nil)
	res, err := run.Do(context.Background(), planner, "get them to New York")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if !res.Complete || res.Answer == "" {
		t.Errorf("result %+v, want answered", res)
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want twice", n)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v, want the search then the booking", got)
	}
	if n := count(run.Events(), planexec.EventPlanned); n != 2 {
		t.Errorf("%d PLANNED events, want 2: %v", n, kinds(run.Events()))
	}
}
