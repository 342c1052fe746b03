package planexec_test

// The record: what an executor writes down about a run, in what order, with
// which fields, and what an Observer sees while it happens.

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
)

// cStepKinds are the kinds of event that concern one step.
var cStepKinds = []planexec.EventKind{
	planexec.EventAutonomyCleared, planexec.EventAutonomyEscalated, planexec.EventAutonomyRefused,
	planexec.EventApprovalRequired, planexec.EventApprovalGranted, planexec.EventApprovalDenied, planexec.EventApprovalPending,
	planexec.EventStepStarted, planexec.EventStepExecuted, planexec.EventStepFailed,
}

// cBusyPlan touches the ladder (a refund acting under a grant, a booking
// escalated to the gate) and plain steps, with two branches running at once.
func cBusyPlan() planexec.Plan {
	return planexec.Plan{Goal: "rebook and refund", Steps: []planexec.Step{
		cSearch("s1", "LHR"),
		step("s2", "book_flight", `{"flight":"BA117","seats":1}`, "s1"),
		cRefund("s3", "o-1", "20", "GBP"),
		cSearch("s4", "LGW", "s3"),
	}}
}

func cBusyRun(t *testing.T, r *recorder, edit func(*setup)) *planexec.Run {
	t.Helper()
	ladder := cLadder(t,
		planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits, Ceiling: cGBP100()},
		planexec.Grant{ID: "g-book", Tenant: "acme", Class: "bookings", Level: planexec.LevelAskAlways},
	)
	run, _ := newExecutor(t, r, cUnder(ladder, edit))
	return run
}

func TestEveryEventCarriesItsTimeRunPlanAndRevision(t *testing.T) {
	run := cBusyRun(t, &recorder{}, nil)
	plan := cBusyPlan()
	res, err := run.Execute(context.Background(), plan)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	es := run.Events()
	if len(es) == 0 {
		t.Fatal("no events")
	}
	for _, want := range []planexec.EventKind{planexec.EventAutonomyCleared, planexec.EventAutonomyEscalated, planexec.EventApprovalGranted, planexec.EventStepExecuted, planexec.EventPlanCompleted} {
		if count(es, want) == 0 {
			t.Errorf("no %s event: %v", want, kinds(es))
		}
	}
	for _, e := range es {
		if e.Time.IsZero() || e.RunID != "run-1" || e.Tenant != "acme" || e.PlanID != res.PlanID || e.PlanID == "" || e.Revision != 1 {
			t.Errorf("event %d %s: time %v run %q tenant %q plan %q rev %d; want a time, run-1, acme, %q, 1",
				e.Seq, e.Kind, e.Time, e.RunID, e.Tenant, e.PlanID, e.Revision, res.PlanID)
		}
		if !slices.Contains(cStepKinds, e.Kind) {
			continue
		}
		s, ok := plan.Step(e.StepID)
		if !ok || e.Tool != s.Tool {
			t.Errorf("event %d %s names step %q tool %q, not a step of the plan", e.Seq, e.Kind, e.StepID, e.Tool)
		}
	}
	if i := findEvent(es, planexec.EventAutonomyCleared, "s3"); i < 0 || es[i].Grant != "g-refunds" || es[i].Level != planexec.LevelActWithinLimits {
		t.Errorf("AUTONOMY_CLEARED does not name its grant and level: %+v", es)
	}
	for _, k := range []planexec.EventKind{planexec.EventApprovalRequired, planexec.EventApprovalGranted} {
		if i := findEvent(es, k, "s2"); i < 0 || es[i].Request == "" {
			t.Errorf("%s for s2 names no record", k)
		}
	}
}

func TestEventsAreNumberedFromOneInTheOrderTheyHappened(t *testing.T) {
	run, _ := newExecutor(t, &recorder{}, nil)
	if _, err := run.Execute(context.Background(), cWide(6)); err != nil {
		t.Fatalf("first Execute: %v", err)
	}
	if _, err := run.Execute(context.Background(), tripPlan()); err != nil {
		t.Fatalf("second Execute: %v", err)
	}
	es := run.Events()
	// Each plan: PLANNED, its step events and PLAN_COMPLETED; the trip
	// adds the booking's approval.
	if want := (1 + 2*6 + 1) + (1 + 2 + 2*2 + 1); len(es) != want {
		t.Fatalf("%d events, want %d: %v", len(es), want, kinds(es))
	}
	for i, e := range es {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has Seq %d, want %d: numbering is not 1, 2, 3… in record order", i, e.Seq, i+1)
		}
		if i > 0 && e.Time.Before(es[i-1].Time) {
			t.Errorf("event %d (%s) is stamped before event %d", e.Seq, e.Kind, es[i-1].Seq)
		}
	}
	// Each step's events keep their own order.
	for _, id := range []string{"s0", "s3", "s5"} {
		started, executed := findEvent(es, planexec.EventStepStarted, id), findEvent(es, planexec.EventStepExecuted, id)
		if started < 0 || executed < started {
			t.Errorf("%s: STEP_STARTED at %d, STEP_EXECUTED at %d", id, started, executed)
		}
	}
}

func TestTheObserverSeesTheSameEventsLiveAndInTheSameOrder(t *testing.T) {
	var mu sync.Mutex
	var observed []planexec.Event
	startedBeforeCall := map[string]bool{}
	r := &recorder{}
	r.fail = func(tool string, args any) error {
		// While a tool runs, its STEP_STARTED has already been seen.
		id := map[string]string{"book_flight": "s2", "refund": "s3", "LGW": "s4"}[tool]
		if tool == "search_flights" {
			id = map[string]string{"LHR": "s1", "LGW": "s4"}[cOrigin(args)]
		}
		mu.Lock()
		defer mu.Unlock()
		startedBeforeCall[id] = findEvent(observed, planexec.EventStepStarted, id) >= 0
		return nil
	}
	run := cBusyRun(t, r, func(s *setup) {
		s.Observer = func(e planexec.Event) {
			mu.Lock()
			observed = append(observed, e)
			mu.Unlock()
		}
	})
	if _, err := run.Execute(context.Background(), cBusyPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	es := run.Events()
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(observed, es) {
		t.Errorf("the observer saw\n%v\nthe record holds\n%v", kinds(observed), kinds(es))
	}
	for _, id := range []string{"s1", "s2", "s3", "s4"} {
		if !startedBeforeCall[id] {
			t.Errorf("the observer had not seen STEP_STARTED for %s when its tool ran", id)
		}
	}
}

func TestASuccessfulRunRecordsEachStepAndEndsWithPlanCompleted(t *testing.T) {
	run, _ := newExecutor(t, &recorder{}, nil)
	if _, err := run.Execute(context.Background(), tripPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	es := run.Events()
	type kv struct {
		kind planexec.EventKind
		step string
	}
	var got []kv
	for _, e := range es {
		got = append(got, kv{e.Kind, e.StepID})
	}
	want := []kv{
		{planexec.EventPlanned, ""},
		{planexec.EventApprovalRequired, "s2"},
		{planexec.EventApprovalGranted, "s2"},
		{planexec.EventStepStarted, "s1"},
		{planexec.EventStepExecuted, "s1"},
		{planexec.EventStepStarted, "s2"},
		{planexec.EventStepExecuted, "s2"},
		{planexec.EventPlanCompleted, ""},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if e := es[6]; e.Approver != "dana" || e.Replayed {
		t.Errorf("STEP_EXECUTED for s2 = %+v, want approved by dana, not replayed", e)
	}
	if es[2].Approver != "dana" {
		t.Errorf("APPROVAL_GRANTED names approver %q", es[2].Approver)
	}
}

func TestAFailedStepIsRecordedWithDetailAndTheRunEndsWithPlanFailed(t *testing.T) {
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			return errors.New("no flights")
		}
		return nil
	}}
	run, _ := newExecutor(t, r, nil)
	if _, err := run.Execute(context.Background(), tripPlan()); err == nil {
		t.Fatal("Execute succeeded with a failing search")
	}
	es := run.Events()
	want := []planexec.EventKind{
		planexec.EventPlanned, planexec.EventApprovalRequired, planexec.EventApprovalGranted,
		planexec.EventStepStarted, planexec.EventStepFailed, planexec.EventPlanFailed,
	}
	if got := kinds(es); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	failed := es[4]
	if failed.StepID != "s1" || failed.Tool != "search_flights" || failed.Detail == "" {
		t.Errorf("STEP_FAILED = %+v, want s1 search_flights with a detail", failed)
	}
	if es[5].Detail == "" {
		t.Error("PLAN_FAILED carries no detail")
	}
}

func TestEventsAreStampedByTheConfiguredClock(t *testing.T) {
	clock := planexec.NewFakeClock()
	t0 := clock.Now()
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			clock.Advance(3 * time.Second)
		}
		return nil
	}}
	run, _ := newExecutor(t, r, func(s *setup) { s.Now = clock.Now })
	if _, err := run.Execute(context.Background(), tripPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	es := run.Events()
	started, executed := findEvent(es, planexec.EventStepStarted, "s1"), findEvent(es, planexec.EventStepExecuted, "s1")
	if started < 0 || executed < 0 {
		t.Fatalf("events = %v", kinds(es))
	}
	if !es[started].Time.Equal(t0) || !es[executed].Time.Equal(t0.Add(3*time.Second)) {
		t.Errorf("s1 started at %v and finished at %v, want %v and 3s later", es[started].Time, es[executed].Time, t0)
	}
	if es[executed].Duration != 3*time.Second {
		t.Errorf("s1 Duration = %v, want 3s", es[executed].Duration)
	}
	for _, e := range es {
		if e.Time.Before(t0) || e.Time.After(t0.Add(3*time.Second)) {
			t.Errorf("event %d %s stamped %v, outside the configured clock's range", e.Seq, e.Kind, e.Time)
		}
	}
}

func TestARefusedPlanIsOnTheRecordWithItsReason(t *testing.T) {
	r := &recorder{}
	run, gate := newExecutor(t, r, nil)
	_, err := run.Execute(context.Background(), planexec.Plan{ID: "plan-9", Steps: []planexec.Step{
		cSearch("s1", "LHR"),
		step("s2", "charter_jet", `{}`, "s1"),
	}})
	if !errors.Is(err, planexec.ReasonUnknownTool) {
		t.Fatalf("err = %v, want an unknown_tool refusal", err)
	}
	es := run.Events()
	if len(es) != 1 {
		t.Fatalf("events = %v, want the refusal only", kinds(es))
	}
	e := es[0]
	if e.Kind != planexec.EventPlanRefused || e.Reason != planexec.ReasonUnknownTool || e.StepID != "s2" || e.Tool != "charter_jet" ||
		e.RunID != "run-1" || e.PlanID != "plan-9" || e.Revision != 1 || e.Time.IsZero() || e.Seq != 1 {
		t.Errorf("refusal event = %+v", e)
	}
	if len(r.Calls()) != 0 || len(gate.Asked()) != 0 {
		t.Errorf("a refused plan reached tools %v or the gate %v", toolNames(r.Calls()), gate.Asked())
	}
}
