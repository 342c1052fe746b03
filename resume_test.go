package planexec_test

// Resume picks a run up from its store: it replays what finished, runs the
// rest once, and refuses a stored plan the tools no longer accept.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

func TestResumeReplaysFinishedStepsAndRunsTheRest(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	failOnce(r, "book_flight", fmt.Errorf("fare service down: %w", planexec.ErrNotApplied))

	first, _ := newExecutor(t, r, withStore(st))
	firstRes, err := first.Execute(ctx, tripPlan())
	if err == nil {
		t.Fatalf("the first run succeeded; step 2 should have failed")
	}

	second, _ := newExecutor(t, r, withStore(st))
	res, err := second.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if !res.Complete {
		t.Errorf("the resumed run is not complete: %+v", res.Steps)
	}
	if res.PlanID != firstRes.PlanID {
		t.Errorf("resumed plan %q, want the stored %q", res.PlanID, firstRes.PlanID)
	}
	if s1 := res.Steps["s1"]; !s1.Replayed || s1.Status != planexec.StepDone || string(s1.Outcome) != string(firstRes.Steps["s1"].Outcome) {
		t.Errorf("s1 = %+v, want replayed with the recorded outcome %s", s1, firstRes.Steps["s1"].Outcome)
	}
	if s2 := res.Steps["s2"]; s2.Replayed || s2.Status != planexec.StepDone || string(s2.Outcome) != `"PNR-BA117"` {
		t.Errorf("s2 = %+v, want run now", s2)
	}
	if n := callsOf(r, "search_flights"); n != 1 {
		t.Errorf("search_flights called %d times, want once (replayed on resume)", n)
	}
	if n := callsOf(r, "book_flight"); n != 2 {
		t.Errorf("book_flight called %d times, want 2 (failed, then resumed)", n)
	}
	es := second.Events()
	if count(es, planexec.EventPlanResumed) != 1 {
		t.Errorf("no PLAN_RESUMED event: %v", kinds(es))
	}
	if n := iReplayedExecutions(es); n != 1 {
		t.Errorf("want one replayed STEP_EXECUTED (s1), got %d: %v", n, kinds(es))
	}
	if count(es, planexec.EventPlanCompleted) != 1 {
		t.Errorf("no PLAN_COMPLETED event: %v", kinds(es))
	}
	rec, err := st.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	if rec.Status != store.RunCompleted || rec.Steps["s2"].Status != planexec.StepDone {
		t.Errorf("stored after resume: status %q, s2 %q; want completed and done", rec.Status, rec.Steps["s2"].Status)
	}
}

func TestResumeRunsEachRemainingStepOnce(t *testing.T) {
	// A store of plans only: nothing but the executor itself keeps s2 from
	// running twice.
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	failOnce(r, "book_flight", fmt.Errorf("fare service down: %w", planexec.ErrNotApplied))
	first, _ := newExecutor(t, r, withStore(st))
	if _, err := first.Execute(ctx, tripPlan()); err == nil {
		t.Fatalf("the first run succeeded; step 2 should have failed")
	}

	second, _ := newExecutor(t, r, withStore(st))
	res, err := second.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if !res.Complete {
		t.Errorf("the resumed run is not complete")
	}
	if n := callsOf(r, "book_flight"); n != 2 {
		t.Errorf("book_flight called %d times, want 2 (once failed, once on resume)", n)
	}
	if n := count(second.Events(), planexec.EventStepStarted); n != 1 {
		t.Errorf("the resume started %d steps, want 1: %v", n, kinds(second.Events()))
	}
}

// Two versions of one tool's arguments: v2 added a required field.
type resumeQuoteV1 struct {
	Route string `json:"route"`
}

type resumeQuoteV2 struct {
	Route    string `json:"route"`
	Currency string `json:"currency"`
}

func TestResumeRefusesAPlanThatNoLongerFitsTheContractsAsTheyAreNow(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	job := planexec.Delegation{RunID: "run-q", Tenant: "acme"}

	v1Calls := 0
	v1, err := planexec.NewExecutor(planexec.Config{
		Tools: []*planexec.Tool{planexec.MustTool("i_quote", "Quote a route.", func(ctx context.Context, q resumeQuoteV1) (string, error) {
			v1Calls++
			return "", errors.New("quote service down")
		})},
		Store: st,
	})
	if err != nil {
		t.Fatalf("NewExecutor v1: %v", err)
	}
	run1, err := v1.Run(job)
	if err != nil {
		t.Fatalf("Run v1: %v", err)
	}
	if _, err := run1.Execute(ctx, iOne(step("q1", "i_quote", `{"route":"LHR-JFK"}`))); err == nil {
		t.Fatalf("the v1 run succeeded; it should have failed and been left to resume")
	}
	if v1Calls != 1 {
		t.Fatalf("v1 tool called %d times", v1Calls)
	}

	v2Calls := 0
	v2, err := planexec.NewExecutor(planexec.Config{
		Tools: []*planexec.Tool{planexec.MustTool("i_quote", "Quote a route.", func(ctx context.Context, q resumeQuoteV2) (string, error) {
			v2Calls++
			return "quoted", nil
		})},
		Store: st,
	})
	if err != nil {
		t.Fatalf("NewExecutor v2: %v", err)
	}
	run2, err := v2.Run(job)
	if err != nil {
		t.Fatalf("Run v2: %v", err)
	}
	res, err := run2.Resume(ctx)
	if !errors.Is(err, planexec.ReasonArguments) {
		t.Fatalf("Resume: want a ReasonArguments refusal, got %v", err)
	}
	var pv *planexec.PlanValidationError
	if !errors.As(err, &pv) || pv.Step != "q1" || pv.Tool != "i_quote" {
		t.Fatalf("refusal = %+v, want step q1 of i_quote", pv)
	}
	found := false
	for _, v := range pv.Violations {
		if v.Path == "/currency" {
			found = true
		}
	}
	if !found {
		t.Errorf("violations %v do not name /currency", pv.Violations)
	}
	if res != nil {
		t.Errorf("a refused resume returned a result: %+v", res)
	}
	if v2Calls != 0 {
		t.Errorf("the v2 tool ran %d times on a plan written for v1", v2Calls)
	}
	es := run2.Events()
	if count(es, planexec.EventPlanRefused) != 1 || count(es, planexec.EventStepStarted) != 0 || count(es, planexec.EventPlanResumed) != 0 {
		t.Errorf("events = %v, want one PLAN_REFUSED and nothing run", kinds(es))
	}
}

func TestResumeWithNothingStoredSaysNothingToResume(t *testing.T) {
	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(memory.New()))
	res, err := run.Resume(context.Background())
	if !errors.Is(err, planexec.ErrNoRecord) {
		t.Fatalf("want ErrNoRecord, got %v", err)
	}
	if !strings.Contains(err.Error(), "not on record") {
		t.Errorf("message %q does not say the run is not on record", err)
	}
	if res != nil || len(r.Calls()) != 0 {
		t.Errorf("result %+v, calls %v; want nothing", res, r.Calls())
	}
}

func TestResumeDoesNotReplayAStepRecordOfAnotherPlan(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	planB := planexec.Plan{ID: "plan-B", Revision: 1, Goal: "search twice", Steps: []planexec.Step{
		iSearch("s1", "LHR"),
		iSearch("s2", "LGW", "s1"),
	}}
	if err := st.SavePlan(ctx, storedPlan(t, "acme", "run-1", planB, store.RunRunning)); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	// A late write from plan A of the same run, for a step of the same id
	// and tool.
	if err := st.SaveStep(ctx, "acme", "run-1", store.StepRecord{
		StepID: "s1", PlanID: "plan-A", Tool: "search_flights", Status: planexec.StepDone,
		Outcome: json.RawMessage(`["FROM-PLAN-A"]`), Finished: time.Now(),
	}); err != nil {
		t.Fatalf("SaveStep: %v", err)
	}

	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(st))
	res, err := run.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	s1 := res.Steps["s1"]
	if s1.Replayed || string(s1.Outcome) != `["BA117","VS3"]` {
		t.Errorf("s1 = %+v, want plan B's own search, not plan A's record", s1)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "search_flights"}) {
		t.Errorf("calls = %v, want both of plan B's searches", got)
	}
	if findEvent(run.Events(), planexec.EventStepStarted, "s1") < 0 {
		t.Errorf("s1 never started: %v", kinds(run.Events()))
	}
}
