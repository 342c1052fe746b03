package planexec_test

// The record: what an executor writes down about a run, in what order, with
// which fields, and what an Observer sees while it happens.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
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

func eventsBusyRun(t *testing.T, r *recorder, edit func(*setup)) *planexec.Run {
	t.Helper()
	ladder := cLadder(t,
		planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits, Ceiling: cGBP100()},
		planexec.Grant{ID: "g-book", Tenant: "acme", Class: "bookings", Level: planexec.LevelAskAlways},
	)
	run, _ := newExecutor(t, r, clearanceUnder(ladder, edit))
	return run
}

func TestEveryEventCarriesItsTimeRunPlanAndRevision(t *testing.T) {
	run := eventsBusyRun(t, &recorder{}, nil)
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
	for _, tc := range []struct {
		name        string
		concurrency int
		// live: a step's tool runs only once the observer has seen its
		// STEP_STARTED. That holds when one step runs at a time; with steps
		// at once, a step's event may wait in line while the observer is
		// handed another step's, and its tool need not wait for that.
		live bool
	}{
		{"one step at a time", 1, true},
		{"steps at once", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var observed []planexec.Event
			startedBeforeCall := map[string]bool{}
			r := &recorder{}
			r.fail = func(tool string, args any) error {
				id := map[string]string{"book_flight": "s2", "refund": "s3"}[tool]
				if tool == "search_flights" {
					id = map[string]string{"LHR": "s1", "LGW": "s4"}[cOrigin(args)]
				}
				mu.Lock()
				defer mu.Unlock()
				startedBeforeCall[id] = findEvent(observed, planexec.EventStepStarted, id) >= 0
				return nil
			}
			run := eventsBusyRun(t, r, func(s *setup) {
				s.Concurrency = tc.concurrency
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
			if len(startedBeforeCall) != 4 {
				t.Errorf("tools ran for %v, want s1 to s4", startedBeforeCall)
			}
			for id, seen := range startedBeforeCall {
				if tc.live && !seen {
					t.Errorf("the observer had not seen STEP_STARTED for %s when its tool ran", id)
				}
			}
		})
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

// ---- observers ----

// eventsWithin runs f and fails the test if it has not returned within
// patience: a run that an observer deadlocked never returns.
func eventsWithin(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatalf("%s did not return within %v: an observer deadlocked the run", what, patience)
	}
}

func TestBothObserversSeeEveryEventInOrderWhileStepsRunAtOnce(t *testing.T) {
	const n = 12
	// Every refund reports its call, so the observer can tell that the
	// other steps went on while it was busy.
	called := make(chan struct{}, n)
	r := &recorder{fail: func(string, any) error {
		called <- struct{}{}
		return nil
	}}

	type seen struct {
		who string
		e   planexec.Event
	}
	var (
		mu       sync.Mutex
		log      []seen
		inside   int
		overlaps int
		held     bool
	)
	observer := func(who string) planexec.Observer {
		return func(e planexec.Event) {
			mu.Lock()
			inside++
			if inside > 1 {
				overlaps++
			}
			log = append(log, seen{who, e})
			hold := !held && e.Kind == planexec.EventStepStarted
			held = held || hold
			mu.Unlock()
			if hold {
				// Hold the first STEP_STARTED until every other step has
				// called its tool: they record their events meanwhile,
				// without waiting on this observer.
				for range n - 1 {
					select {
					case <-called:
					case <-time.After(patience):
						t.Errorf("the other steps did not run while an observer was busy")
						mu.Lock()
						inside--
						mu.Unlock()
						return
					}
				}
			}
			mu.Lock()
			inside--
			mu.Unlock()
		}
	}
	run, _ := newExecutor(t, r, func(s *setup) {
		s.Observer = observer("executor")
		s.Options = append(s.Options, planexec.WithObserver(observer("run")))
	})

	var err error
	eventsWithin(t, "Execute", func() { _, err = run.Execute(context.Background(), cWide(n)) })
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}

	es := run.Events()
	mu.Lock()
	defer mu.Unlock()
	if overlaps != 0 {
		t.Errorf("observers were called %d times while another call was under way", overlaps)
	}
	if len(log) != 2*len(es) {
		t.Fatalf("the observers were called %d times for %d events", len(log), len(es))
	}
	// Each event goes to the executor's observer, then the run's, before the
	// next event goes to either: Seq 1, 1, 2, 2, … with no gap.
	for i, s := range log {
		wantWho, wantSeq := []string{"executor", "run"}[i%2], int64(i/2+1)
		if s.who != wantWho || s.e.Seq != wantSeq {
			t.Fatalf("call %d went to the %s observer with event %d (%s), want the %s observer with event %d",
				i, s.who, s.e.Seq, s.e.Kind, wantWho, wantSeq)
		}
		if !reflect.DeepEqual(s.e, es[i/2]) {
			t.Errorf("the %s observer saw %+v, the record holds %+v", s.who, s.e, es[i/2])
		}
	}
	if got := count(es, planexec.EventStepExecuted); got != n {
		t.Errorf("%d steps executed, want %d", got, n)
	}
}

func TestAnObserverMayReadTheRunItWatches(t *testing.T) {
	for _, where := range []string{"Config.Observer", "WithObserver"} {
		t.Run(where, func(t *testing.T) {
			model := scripted.New(
				scripted.Reply{Content: vUnknownToolTrip, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}},
				scripted.Reply{Content: vValidTrip, Usage: llm.Usage{InputTokens: 200, OutputTokens: 20}},
				scripted.Reply{Content: doAnswerJSON, Usage: llm.Usage{InputTokens: 400, OutputTokens: 40}},
			)
			var run *planexec.Run
			var mu sync.Mutex
			var problems []string
			var usages = map[planexec.EventKind]llm.Usage{}
			observer := func(e planexec.Event) {
				// Called outside the run's locks: both calls would block
				// forever otherwise.
				es := run.Events()
				u := run.Usage()
				mu.Lock()
				defer mu.Unlock()
				// One step at a time: the event handed over is the last one
				// recorded.
				if len(es) == 0 || !reflect.DeepEqual(es[len(es)-1], e) {
					problems = append(problems, fmt.Sprintf("handed %d %s, but the record ends %v", e.Seq, e.Kind, kinds(es)))
				}
				if e.Usage != nil {
					usages[e.Kind] = u
				}
			}
			run, _ = newExecutor(t, &recorder{}, func(s *setup) {
				s.Concurrency = 1
				if where == "Config.Observer" {
					s.Observer = observer
				} else {
					s.Options = append(s.Options, planexec.WithObserver(observer))
				}
			})

			var err error
			eventsWithin(t, "Do", func() { _, err = run.Do(context.Background(), vAgentPlanner(t, model), "get them to New York") })
			if err != nil {
				t.Fatalf("Do: %v", err)
			}

			mu.Lock()
			defer mu.Unlock()
			for _, p := range problems {
				t.Error(p)
			}
			// Usage read from the observer already counts the call the
			// event reports.
			// (The last PLANNED is the answer's, the third call.)
			want := map[planexec.EventKind]llm.Usage{
				planexec.EventPlanRefused: {InputTokens: 100, OutputTokens: 10, Calls: 1},
				planexec.EventPlanned:     {InputTokens: 700, OutputTokens: 70, Calls: 3},
			}
			if !reflect.DeepEqual(usages, want) {
				t.Errorf("usage seen from the observer = %+v, want %+v", usages, want)
			}
			if es := run.Events(); len(es) == 0 || es[len(es)-1].Kind != planexec.EventAnswered {
				t.Errorf("events = %v, want the run to be answered", kinds(es))
			}
		})
	}
}

// ---- PLANNED ----

func TestAnExecutedPlanIsRecordedAsPlannedOnceBeforeItsFirstStep(t *testing.T) {
	ctx := context.Background()
	planner := func() planexec.Planner {
		return vAgentPlanner(t, scripted.New(scripted.Reply{Content: vValidTrip}))
	}
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, run *planexec.Run) (*planexec.Result, error)
		// planned is how many PLANNED events the record holds in all.
		planned int
	}{
		{"a plan built by hand", func(t *testing.T, run *planexec.Run) (*planexec.Result, error) {
			return run.Execute(ctx, tripPlan())
		}, 1},
		{"a plan Plan returned", func(t *testing.T, run *planexec.Run) (*planexec.Result, error) {
			plan, err := run.Plan(ctx, planner(), "get them to New York")
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			return run.Execute(ctx, plan)
		}, 1},
		{"a plan Plan returned, edited to a new revision", func(t *testing.T, run *planexec.Run) (*planexec.Result, error) {
			plan, err := run.Plan(ctx, planner(), "get them to New York")
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			plan.Revision++
			return run.Execute(ctx, plan)
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, _ := newExecutor(t, &recorder{}, nil)
			res, err := tc.do(t, run)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			es := run.Events()
			if n := count(es, planexec.EventPlanned); n != tc.planned {
				t.Fatalf("%d PLANNED events, want %d: %v", n, tc.planned, kinds(es))
			}
			// The last PLANNED is the plan that ran, recorded before anyone
			// was asked and before any step started.
			last := -1
			for i, e := range es {
				if e.Kind == planexec.EventPlanned {
					last = i
				}
			}
			p := es[last]
			if p.PlanID != res.PlanID || p.Revision != res.Revision || p.PlanID == "" {
				t.Errorf("PLANNED names plan %q revision %d, the run was plan %q revision %d", p.PlanID, p.Revision, res.PlanID, res.Revision)
			}
			for _, k := range []planexec.EventKind{planexec.EventApprovalRequired, planexec.EventStepStarted} {
				if i := findEvent(es, k, ""); i < last {
					t.Errorf("%s at %d comes before PLANNED at %d: %v", k, i, last, kinds(es))
				}
			}
			cLastKind(t, es, planexec.EventPlanCompleted)
		})
	}
}

func TestAPlanRefusedAtExecuteIsNotRecordedAsPlanned(t *testing.T) {
	for name, plan := range map[string]planexec.Plan{
		"an unknown tool": {Steps: []planexec.Step{cSearch("s1", "LHR"), step("s2", "charter_jet", `{}`, "s1")}},
		"a cycle":         {Steps: []planexec.Step{cSearch("s1", "LHR", "s2"), cSearch("s2", "LGW", "s1")}},
		"bad arguments":   {Steps: []planexec.Step{step("s1", "book_flight", `{"flight":"BA117","seats":"1"}`)}},
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{}
			run, gate := newExecutor(t, r, nil)
			res, err := run.Execute(context.Background(), plan)
			var pv *planexec.PlanValidationError
			if !errors.As(err, &pv) || res != nil {
				t.Fatalf("Execute = %+v, %v; want a refusal and no result", res, err)
			}
			es := run.Events()
			if got := kinds(es); !slices.Equal(got, []planexec.EventKind{planexec.EventPlanRefused}) {
				t.Errorf("events = %v, want PLAN_REFUSED only", got)
			}
			if len(es) == 1 && es[0].Reason != pv.Reason {
				t.Errorf("PLAN_REFUSED gives reason %q, the error %q", es[0].Reason, pv.Reason)
			}
			if len(r.Calls()) != 0 || len(gate.Asked()) != 0 {
				t.Errorf("a refused plan reached tools %v or the gate %v", toolNames(r.Calls()), gate.Asked())
			}
		})
	}
}
