package planexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planexec/planexec"
)

// ---- what is written, and when ----

func TestThePlanIsStoredAsRunningBeforeTheFirstStepRuns(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	var inside *planexec.PlanRecord
	var loadErr error
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			inside, loadErr = plans.LoadPlan(ctx, "acme", "run-1")
		}
		return nil
	}}
	ex, _ := newExecutor(t, r, withPlans(plans))
	res, err := ex.Execute(ctx, tripPlan())
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if loadErr != nil {
		t.Fatalf("inside the first tool, LoadPlan: %v", loadErr)
	}
	if inside.Status != planexec.PlanRunning {
		t.Errorf("status inside the first tool = %q, want running", inside.Status)
	}
	if len(inside.Steps) != 0 {
		t.Errorf("steps on record before any finished: %v", inside.Steps)
	}
	if inside.Plan.ID != res.PlanID || len(inside.Plan.Steps) != 2 || inside.Plan.Goal != "get them to New York" {
		t.Errorf("stored plan = %+v, want the executed plan %s", inside.Plan, res.PlanID)
	}
	if inside.Tenant != "acme" || inside.RunID != "run-1" || inside.Version != planexec.PlanRecordVersion {
		t.Errorf("record = tenant %q run %q version %d", inside.Tenant, inside.RunID, inside.Version)
	}

	after, err := plans.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan after the run: %v", err)
	}
	if after.Status != planexec.PlanCompleted || len(after.Steps) != 2 {
		t.Errorf("after the run: status %q, %d steps; want completed with 2", after.Status, len(after.Steps))
	}
}

func TestEachStepIsStoredBeforeTheStepsThatWaitOnItRun(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	var inside *planexec.PlanRecord
	var loadErr error
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "book_flight" {
			inside, loadErr = plans.LoadPlan(ctx, "acme", "run-1")
		}
		return nil
	}}
	ex, _ := newExecutor(t, r, withPlans(plans))
	if _, err := ex.Execute(ctx, tripPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if loadErr != nil {
		t.Fatalf("inside step 2's tool, LoadPlan: %v", loadErr)
	}
	s1, ok := inside.Steps["s1"]
	if !ok {
		t.Fatalf("inside step 2's tool, step 1 is not on record: %v", inside.Steps)
	}
	if s1.Status != planexec.StepDone || s1.Tool != "search_flights" || s1.StepID != "s1" {
		t.Errorf("s1 record = %+v, want done by search_flights", s1)
	}
	var flights []string
	if err := json.Unmarshal(s1.Outcome, &flights); err != nil || len(flights) != 2 || flights[0] != "BA117" {
		t.Errorf("s1 outcome on record = %s (%v), want the search result", s1.Outcome, err)
	}
	if _, early := inside.Steps["s2"]; early {
		t.Errorf("s2 is on record while it is still running")
	}
	if inside.Status != planexec.PlanRunning {
		t.Errorf("status while step 2 runs = %q, want running", inside.Status)
	}
}

func TestWhatFinishedIsOnRecordWhenALaterStepFails(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "book_flight" {
			return fmt.Errorf("no seats left: %w", planexec.ErrNotApplied)
		}
		return nil
	}}
	ex, _ := newExecutor(t, r, withPlans(plans))
	if _, err := ex.Execute(ctx, tripPlan()); err == nil {
		t.Fatalf("Execute succeeded with a failing booking")
	}
	rec, err := plans.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	if rec.Status != planexec.PlanFailed {
		t.Errorf("plan status %q, want failed", rec.Status)
	}
	if s1 := rec.Steps["s1"]; s1.Status != planexec.StepDone || len(s1.Outcome) == 0 {
		t.Errorf("s1 record = %+v, want done with its outcome", s1)
	}
	s2, ok := rec.Steps["s2"]
	if !ok || s2.Status != planexec.StepFailed {
		t.Errorf("s2 record = %+v (present %v), want failed", s2, ok)
	}
	if !strings.Contains(s2.Error, "no seats left") {
		t.Errorf("s2 error on record = %q, want the tool's error", s2.Error)
	}
}

func TestTheStoreRecordsAFailedIrreversibleStepAsInDoubtAndAReversibleOneAsFailed(t *testing.T) {
	for _, tc := range []struct {
		tool, args string
		want       planexec.StepStatus
	}{
		{"book_flight", `{"flight":"BA117","seats":1}`, planexec.StepInDoubt},
		{"search_flights", `{"origin":"LHR","destination":"JFK"}`, planexec.StepFailed},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			ctx := context.Background()
			plans := &planexec.MemoryPlanStore{}
			r := &recorder{fail: func(string, any) error { return errors.New("timed out") }}
			ex, _ := newExecutor(t, r, edits(withPlans(plans), withIdempotency(&planexec.MemoryIdempotencyStore{})))
			if _, err := ex.Execute(ctx, iOne(step("x1", tc.tool, tc.args))); err == nil {
				t.Fatalf("Execute succeeded with a failing tool")
			}
			rec, err := plans.LoadPlan(ctx, "acme", "run-1")
			if err != nil {
				t.Fatalf("LoadPlan: %v", err)
			}
			if got := rec.Steps["x1"].Status; got != tc.want {
				t.Errorf("stored status %q, want %q", got, tc.want)
			}
			if rec.Status != planexec.PlanFailed {
				t.Errorf("plan status %q, want failed", rec.Status)
			}
		})
	}
}

// ---- resuming ----

func TestResumeReplaysFinishedStepsAndRunsTheRest(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	idem := &planexec.MemoryIdempotencyStore{}
	r := &recorder{}
	failOnce(r, "book_flight", fmt.Errorf("fare service down: %w", planexec.ErrNotApplied))

	first, _ := newExecutor(t, r, edits(withPlans(plans), withIdempotency(idem)))
	firstRes, err := first.Execute(ctx, tripPlan())
	if err == nil {
		t.Fatalf("the first run succeeded; step 2 should have failed")
	}

	second, _ := newExecutor(t, r, edits(withPlans(plans), withIdempotency(idem)))
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
	rec, err := plans.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	if rec.Status != planexec.PlanCompleted || rec.Steps["s2"].Status != planexec.StepDone {
		t.Errorf("stored after resume: status %q, s2 %q; want completed and done", rec.Status, rec.Steps["s2"].Status)
	}
}

func TestResumeRunsEachRemainingStepOnce(t *testing.T) {
	// Only a plan store: nothing but the executor itself keeps s2 from
	// running twice.
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	r := &recorder{}
	failOnce(r, "book_flight", fmt.Errorf("fare service down: %w", planexec.ErrNotApplied))
	first, _ := newExecutor(t, r, withPlans(plans))
	if _, err := first.Execute(ctx, tripPlan()); err == nil {
		t.Fatalf("the first run succeeded; step 2 should have failed")
	}

	second, _ := newExecutor(t, r, withPlans(plans))
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
type iQuoteV1 struct {
	Route string `json:"route"`
}

type iQuoteV2 struct {
	Route    string `json:"route"`
	Currency string `json:"currency"`
}

func TestResumeRefusesAPlanThatNoLongerFitsTheContractsAsTheyAreNow(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	agent := planexec.Agent{Name: "courier", Tools: []string{"i_quote"}}
	run := planexec.Delegation{RunID: "run-q", Tenant: "acme"}

	v1Calls := 0
	v1, err := planexec.NewExecutor(planexec.Config{
		Tools: []planexec.Tool{planexec.NewTool("i_quote", "Quote a route.", func(ctx context.Context, q iQuoteV1) (string, error) {
			v1Calls++
			return "", errors.New("quote service down")
		})},
		Contracts:  []*planexec.Contract{planexec.MustContract[iQuoteV1]("i_quote")},
		Agent:      agent,
		Delegation: run,
		Plans:      plans,
	})
	if err != nil {
		t.Fatalf("NewExecutor v1: %v", err)
	}
	if _, err := v1.Execute(ctx, iOne(step("q1", "i_quote", `{"route":"LHR-JFK"}`))); err == nil {
		t.Fatalf("the v1 run succeeded; it should have failed and been left to resume")
	}
	if v1Calls != 1 {
		t.Fatalf("v1 tool called %d times", v1Calls)
	}

	v2Calls := 0
	v2, err := planexec.NewExecutor(planexec.Config{
		Tools: []planexec.Tool{planexec.NewTool("i_quote", "Quote a route.", func(ctx context.Context, q iQuoteV2) (string, error) {
			v2Calls++
			return "quoted", nil
		})},
		Contracts:  []*planexec.Contract{planexec.MustContract[iQuoteV2]("i_quote")},
		Agent:      agent,
		Delegation: run,
		Plans:      plans,
	})
	if err != nil {
		t.Fatalf("NewExecutor v2: %v", err)
	}
	res, err := v2.Resume(ctx)
	if !errors.Is(err, planexec.ReasonArguments) {
		t.Fatalf("Resume: want a ReasonArguments refusal, got %v", err)
	}
	var pv *planexec.PlanValidationError
	if !errors.As(err, &pv) || pv.Step != "q1" || pv.Tool != "i_quote" {
		t.Errorf("refusal = %+v, want step q1 of i_quote", pv)
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
	es := v2.Events()
	if count(es, planexec.EventPlanRefused) != 1 || count(es, planexec.EventStepStarted) != 0 || count(es, planexec.EventPlanResumed) != 0 {
		t.Errorf("events = %v, want one PLAN_REFUSED and nothing run", kinds(es))
	}
}

func TestResumeWithoutAPlanStoreIsAConfigurationError(t *testing.T) {
	r := &recorder{}
	ex, _ := newExecutor(t, r, nil)
	res, err := ex.Resume(context.Background())
	var ce *planexec.ConfigurationError
	if !errors.As(err, &ce) {
		t.Fatalf("want *ConfigurationError, got %v", err)
	}
	if !strings.Contains(err.Error(), "no plan store") {
		t.Errorf("message %q does not say there is no plan store", err)
	}
	if res != nil || len(r.Calls()) != 0 {
		t.Errorf("result %+v, calls %v; want nothing", res, r.Calls())
	}
}

func TestResumeWithNothingStoredSaysNothingToResume(t *testing.T) {
	r := &recorder{}
	ex, _ := newExecutor(t, r, withPlans(&planexec.MemoryPlanStore{}))
	res, err := ex.Resume(context.Background())
	if !errors.Is(err, planexec.ErrNoRecord) {
		t.Fatalf("want ErrNoRecord, got %v", err)
	}
	if !strings.Contains(err.Error(), "nothing to resume") {
		t.Errorf("message %q does not say nothing to resume", err)
	}
	if res != nil || len(r.Calls()) != 0 {
		t.Errorf("result %+v, calls %v; want nothing", res, r.Calls())
	}
}

func TestForgetRemovesTheRun(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	r := &recorder{}
	ex, _ := newExecutor(t, r, withPlans(plans))
	if _, err := ex.Execute(ctx, tripPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if _, err := plans.LoadPlan(ctx, "acme", "run-1"); err != nil {
		t.Fatalf("the run is not on record before Forget: %v", err)
	}
	if err := ex.Forget(ctx); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := plans.LoadPlan(ctx, "acme", "run-1"); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("LoadPlan after Forget: want ErrNoRecord, got %v", err)
	}
	again, _ := newExecutor(t, r, withPlans(plans))
	if _, err := again.Resume(ctx); !errors.Is(err, planexec.ErrNoRecord) || !strings.Contains(err.Error(), "nothing to resume") {
		t.Errorf("Resume after Forget: want nothing to resume, got %v", err)
	}
	if err := ex.Forget(ctx); err != nil {
		t.Errorf("forgetting a forgotten run: %v", err)
	}
	if n := len(r.Calls()); n != 2 {
		t.Errorf("tools called %d times, want only the first run's 2", n)
	}
}

func TestOneTenantCannotSeeOrResumeAnothersRun(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "book_flight" {
			return fmt.Errorf("later: %w", planexec.ErrNotApplied)
		}
		return nil
	}}
	acme, _ := newExecutor(t, r, edits(withPlans(plans), iRun("acme", "run-1")))
	if _, err := acme.Execute(ctx, tripPlan()); err == nil {
		t.Fatalf("acme's run succeeded; it should be left to resume")
	}
	calls := len(r.Calls())

	globex, _ := newExecutor(t, r, edits(withPlans(plans), iRun("globex", "run-1")))
	res, err := globex.Resume(ctx)
	if !errors.Is(err, planexec.ErrNoRecord) || !strings.Contains(err.Error(), "nothing to resume") {
		t.Fatalf("globex resuming acme's run id: want nothing to resume, got %v (%+v)", err, res)
	}
	if n := len(r.Calls()); n != calls {
		t.Errorf("globex's resume called tools: %v", toolNames(r.Calls()[calls:]))
	}
	if _, err := plans.LoadPlan(ctx, "globex", "run-1"); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("LoadPlan with the wrong tenant: want ErrNoRecord, got %v", err)
	}
	if err := globex.Forget(ctx); err != nil {
		t.Fatalf("globex Forget: %v", err)
	}
	if rec, err := plans.LoadPlan(ctx, "acme", "run-1"); err != nil || rec.Tenant != "acme" {
		t.Errorf("acme's run after globex forgot its own: %+v, %v", rec, err)
	}
	if err := plans.SaveStep(ctx, "globex", "run-1", planexec.StepRecord{StepID: "s2", Tool: "book_flight", Status: planexec.StepDone}); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("SaveStep into another tenant's run: want ErrNoRecord, got %v", err)
	}
	if rec, err := plans.LoadPlan(ctx, "acme", "run-1"); err != nil || rec.Steps["s2"].Status == planexec.StepDone {
		t.Errorf("acme's run after globex's SaveStep: %v; globex's step must not land in it", err)
	}
}

// ---- the memory store's own contract ----

func iStoredRun(t *testing.T) (*planexec.MemoryPlanStore, planexec.StepRecord) {
	t.Helper()
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	rec := &planexec.PlanRecord{
		Version: planexec.PlanRecordVersion, Tenant: "acme", RunID: "run-1", Status: planexec.PlanRunning,
		Plan:    planexec.Plan{ID: "p1", Revision: 1, Goal: "get them to New York", Steps: tripPlan().Steps},
		Created: time.Unix(1700000000, 0), Updated: time.Unix(1700000000, 0),
	}
	if err := plans.SavePlan(ctx, rec); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	s1 := planexec.StepRecord{StepID: "s1", Tool: "search_flights", Status: planexec.StepDone,
		Outcome: json.RawMessage(`["BA117","VS3"]`), Finished: time.Unix(1700000060, 0)}
	if err := plans.SaveStep(ctx, "acme", "run-1", s1); err != nil {
		t.Fatalf("SaveStep: %v", err)
	}
	return plans, s1
}

func TestALoadedPlanRecordIsACopy(t *testing.T) {
	ctx := context.Background()
	plans, _ := iStoredRun(t)
	got, err := plans.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	got.Status = planexec.PlanCompleted
	got.Plan.Goal = "somewhere else"
	got.Plan.Steps[0].Tool = "refund"
	got.Plan.Steps[1].Arguments[2] = 'X'
	got.Plan.Steps[1].DependsOn[0] = "s9"
	got.Steps["s2"] = planexec.StepRecord{StepID: "s2", Status: planexec.StepDone}
	delete(got.Steps, "s1")

	again, err := plans.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan again: %v", err)
	}
	want := tripPlan()
	if again.Status != planexec.PlanRunning || again.Plan.Goal != want.Goal {
		t.Errorf("status %q goal %q changed through a loaded copy", again.Status, again.Plan.Goal)
	}
	if again.Plan.Steps[0].Tool != "search_flights" || string(again.Plan.Steps[1].Arguments) != string(want.Steps[1].Arguments) || again.Plan.Steps[1].DependsOn[0] != "s1" {
		t.Errorf("stored plan steps changed through a loaded copy: %+v", again.Plan.Steps)
	}
	if _, ok := again.Steps["s1"]; !ok {
		t.Errorf("deleting from a loaded copy removed s1 from the store")
	}
	if _, ok := again.Steps["s2"]; ok {
		t.Errorf("adding to a loaded copy added s2 to the store")
	}
}

func TestALoadedStepOutcomeIsACopy(t *testing.T) {
	ctx := context.Background()
	plans, _ := iStoredRun(t)
	got, err := plans.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	copy(got.Steps["s1"].Outcome, `["XX`)
	again, _ := plans.LoadPlan(ctx, "acme", "run-1")
	if want := `["BA117","VS3"]`; string(again.Steps["s1"].Outcome) != want {
		t.Errorf("stored outcome became %s through a loaded copy, want %s", again.Steps["s1"].Outcome, want)
	}
}

func TestAStoredStepDoesNotChangeWhenTheCallersBytesDo(t *testing.T) {
	ctx := context.Background()
	plans, _ := iStoredRun(t)
	outcome := json.RawMessage(`"PNR-BA117"`)
	if err := plans.SaveStep(ctx, "acme", "run-1", planexec.StepRecord{StepID: "s2", Tool: "book_flight", Status: planexec.StepDone, Outcome: outcome}); err != nil {
		t.Fatalf("SaveStep: %v", err)
	}
	copy(outcome, `"XXX`)
	got, _ := plans.LoadPlan(ctx, "acme", "run-1")
	if string(got.Steps["s2"].Outcome) != `"PNR-BA117"` {
		t.Errorf("stored outcome became %s after the caller reused its buffer", got.Steps["s2"].Outcome)
	}
}

func TestAStoredPlanDoesNotChangeWhenTheCallersPlanDoes(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	plan := tripPlan()
	plan.ID = "p1"
	if err := plans.SavePlan(ctx, &planexec.PlanRecord{Tenant: "acme", RunID: "run-1", Plan: plan, Status: planexec.PlanRunning}); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	plan.Steps[0].Tool = "refund"
	copy(plan.Steps[1].Arguments, `{"XX`)
	got, _ := plans.LoadPlan(ctx, "acme", "run-1")
	want := tripPlan()
	if got.Plan.Steps[0].Tool != "search_flights" || string(got.Plan.Steps[1].Arguments) != string(want.Steps[1].Arguments) {
		t.Errorf("stored plan changed with the caller's: %+v", got.Plan.Steps)
	}
}

func TestSavingTheSamePlanAgainKeepsItsStepsAndANewPlanDropsThem(t *testing.T) {
	ctx := context.Background()
	plans, _ := iStoredRun(t)
	same := &planexec.PlanRecord{Tenant: "acme", RunID: "run-1", Status: planexec.PlanFailed,
		Plan: planexec.Plan{ID: "p1", Revision: 1, Steps: tripPlan().Steps}}
	if err := plans.SavePlan(ctx, same); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	got, _ := plans.LoadPlan(ctx, "acme", "run-1")
	if got.Status != planexec.PlanFailed || got.Steps["s1"].Status != planexec.StepDone {
		t.Errorf("re-saving plan p1: status %q, s1 %+v; want failed with s1 kept", got.Status, got.Steps["s1"])
	}
	other := &planexec.PlanRecord{Tenant: "acme", RunID: "run-1", Status: planexec.PlanRunning,
		Plan: planexec.Plan{ID: "p2", Revision: 1, Steps: tripPlan().Steps}}
	if err := plans.SavePlan(ctx, other); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	got, _ = plans.LoadPlan(ctx, "acme", "run-1")
	if got.Plan.ID != "p2" || len(got.Steps) != 0 {
		t.Errorf("after saving plan p2: plan %q with steps %v; want p2 with none of p1's steps", got.Plan.ID, got.Steps)
	}
}
