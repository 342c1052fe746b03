package planexec_test

// Clearance: everything that decides, before the first step runs and again
// just before each step runs, whether a step may touch the world — the
// approval gate, recorded and pending decisions, the autonomy ladder and the
// delegation.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// cNothingStarted fails the test if any step started or any tool was called.
func cNothingStarted(t *testing.T, r *recorder, es []planexec.Event) {
	t.Helper()
	if cs := r.Calls(); len(cs) != 0 {
		t.Errorf("tools were called: %v", toolNames(cs))
	}
	if n := count(es, planexec.EventStepStarted); n != 0 {
		t.Errorf("%d STEP_STARTED events, want none: %v", n, kinds(es))
	}
}

// cLastKind fails the test unless the last event is of kind.
func cLastKind(t *testing.T, es []planexec.Event, kind planexec.EventKind) {
	t.Helper()
	if len(es) == 0 || es[len(es)-1].Kind != kind {
		t.Errorf("last event is not %s: %v", kind, kinds(es))
	}
}

// cLadder builds a ladder with a refunds class (amount and currency) and a
// bookings class (no amount), holding grants.
func cLadder(t *testing.T, grants ...planexec.Grant) *planexec.AutonomyLadder {
	t.Helper()
	l, err := planexec.NewAutonomyLadder(
		planexec.ActionClass{Name: "refunds", Tools: []string{"refund"}, Amount: "amount", Currency: "currency"},
		planexec.ActionClass{Name: "bookings", Tools: []string{"book_flight"}},
	)
	if err != nil {
		t.Fatalf("NewAutonomyLadder: %v", err)
	}
	for _, g := range grants {
		if err := l.Grant(g); err != nil {
			t.Fatalf("Grant(%s): %v", g.ID, err)
		}
	}
	return l
}

// cRefund is a refund step.
func cRefund(id, order, amount, currency string, deps ...string) planexec.Step {
	return step(id, "refund", fmt.Sprintf(`{"order":%q,"amount":%s,"currency":%q}`, order, amount, currency), deps...)
}

// cGBP100 is a ceiling of 100 GBP, per plan.
func cGBP100() *planexec.Ceiling {
	return &planexec.Ceiling{Amount: decimal.RequireFromString("100"), Currency: "GBP"}
}

// ---- the approval gate ----

func TestAnIrreversibleStepIsClearedByAPersonBeforeAnyStepRuns(t *testing.T) {
	r := &recorder{}
	run, gate := newExecutor(t, r, nil)
	plan := planexec.Plan{Goal: "get them to New York", Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		{ID: "s2", Tool: "book_flight", Arguments: json.RawMessage(`{ "seats": 1, "flight": "BA117" }`), DependsOn: []string{"s1"}, Intent: "hold the seat"},
	}}

	res, err := run.Execute(context.Background(), plan)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}

	asked := gate.Asked()
	if len(asked) != 1 {
		t.Fatalf("the gate was asked %d times, want once (for the booking): %+v", len(asked), asked)
	}
	req := asked[0]
	if req.StepID != "s2" || req.Tool != "book_flight" || !req.Irreversible {
		t.Errorf("request is for step %q tool %q irreversible %v, want s2 book_flight true", req.StepID, req.Tool, req.Irreversible)
	}
	if req.ID == "" || req.ArgumentsDigest == "" {
		t.Errorf("request is not bound to a record: ID %q ArgumentsDigest %q", req.ID, req.ArgumentsDigest)
	}
	if got, want := string(req.Arguments), `{"flight":"BA117","seats":1}`; got != want {
		t.Errorf("request shows arguments %s, want the canonical %s", got, want)
	}
	if req.Why == "" {
		t.Error("request does not say why a person is asked")
	}
	if req.RunID != "run-1" || req.Tenant != "acme" || req.User != "dana" || req.Agent != "courier" {
		t.Errorf("request is for run %q tenant %q user %q agent %q", req.RunID, req.Tenant, req.User, req.Agent)
	}
	if req.PlanID != res.PlanID || req.Revision != res.Revision || req.Intent != "hold the seat" {
		t.Errorf("request names plan %q rev %d intent %q; the run was plan %q rev %d", req.PlanID, req.Revision, req.Intent, res.PlanID, res.Revision)
	}

	if got := res.Steps["s2"].ApprovedBy; got != "dana" {
		t.Errorf("s2 ApprovedBy = %q, want dana", got)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v", got)
	}

	es := run.Events()
	required := findEvent(es, planexec.EventApprovalRequired, "s2")
	granted := findEvent(es, planexec.EventApprovalGranted, "s2")
	started := findEvent(es, planexec.EventStepStarted, "")
	if required < 0 || granted < 0 || started < 0 || required >= granted || granted >= started {
		t.Errorf("want APPROVAL_REQUIRED, then APPROVAL_GRANTED, then the first STEP_STARTED: %v", kinds(es))
	}
	if granted >= 0 && (es[granted].Request != req.ID || es[granted].Approver != "dana" || es[granted].Replayed) {
		t.Errorf("APPROVAL_GRANTED = %+v, want record %s by dana, not replayed", es[granted], req.ID)
	}
}

func TestTheApprovalRecordBindsTheArgumentsNotTheirSpelling(t *testing.T) {
	ask := func(args string) planexec.ApprovalRequest {
		t.Helper()
		r := &recorder{}
		run, gate := newExecutor(t, r, nil)
		_, err := run.Execute(context.Background(), planexec.Plan{ID: "p1", Steps: []planexec.Step{step("s1", "book_flight", args)}})
		if err != nil {
			t.Fatalf("Execute(%s): %v", args, err)
		}
		asked := gate.Asked()
		if len(asked) != 1 {
			t.Fatalf("asked %d times, want 1", len(asked))
		}
		return asked[0]
	}
	a := ask(`{"flight":"BA117","seats":1}`)
	b := ask(`{ "seats" : 1, "flight" : "BA117" }`)
	c := ask(`{"flight":"BA117","seats":2}`)
	if a.ID != b.ID || a.ArgumentsDigest != b.ArgumentsDigest {
		t.Errorf("the same arguments spelled differently give different records: %s/%s vs %s/%s", a.ID, a.ArgumentsDigest, b.ID, b.ArgumentsDigest)
	}
	if a.ID == c.ID || a.ArgumentsDigest == c.ArgumentsDigest {
		t.Errorf("one seat and two seats share a record (%s) or digest (%s)", a.ID, a.ArgumentsDigest)
	}
}

func TestADenialOnTheLastStepLeavesNothingExecuted(t *testing.T) {
	r := &recorder{}
	run, gate := newExecutor(t, r, nil)
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision {
		if req.StepID == "s3" {
			return req.Deny("dana", "too dear")
		}
		return req.Approve("dana")
	}
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s2", "book_flight", `{"flight":"BA117","seats":1}`, "s1"),
		step("s3", "book_flight", `{"flight":"VS3","seats":1}`, "s2"),
	}}

	res, err := run.Execute(context.Background(), plan)

	var denied *planexec.ApprovalDeniedError
	if !errors.As(err, &denied) {
		t.Fatalf("err = %v, want *ApprovalDeniedError", err)
	}
	if denied.Step != "s3" || denied.Tool != "book_flight" || denied.Approver != "dana" {
		t.Errorf("denial = %+v, want step s3 book_flight by dana", denied)
	}
	if res != nil && len(res.Steps) != 0 {
		t.Errorf("result holds steps: %v", res.Steps)
	}
	asked := gate.Asked()
	if len(asked) != 2 || asked[1].StepID != "s3" || denied.Request != asked[1].ID {
		t.Errorf("asked %+v; the denial should name the record of s3", asked)
	}
	es := run.Events()
	cNothingStarted(t, r, es)
	if findEvent(es, planexec.EventApprovalDenied, "s3") < 0 {
		t.Errorf("no APPROVAL_DENIED for s3: %v", kinds(es))
	}
	cLastKind(t, es, planexec.EventPlanFailed)
}

func TestAPendingDecisionSaysThePlanIsStored(t *testing.T) {
	run, gate := newExecutor(t, &recorder{}, nil)
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }
	res, err := run.Execute(context.Background(), tripPlan())
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) {
		t.Fatalf("err = %v, want *ApprovalPendingError", err)
	}
	if res != nil {
		t.Errorf("a pending run returned a result: %+v", res)
	}
	if !pending.Stored || pending.Ran != 0 {
		t.Errorf("Stored = %v, Ran = %d; want stored with nothing run", pending.Stored, pending.Ran)
	}
	for _, want := range []string{"nothing ran", "resume it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
}

func TestADecisionNamingAnotherRecordClearsNothing(t *testing.T) {
	// A decision taken for two seats, offered for a plan that books one.
	other, otherGate := newExecutor(t, &recorder{}, nil)
	otherGate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }
	_, err := other.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{step("s1", "book_flight", `{"flight":"BA117","seats":2}`)}})
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) || len(otherGate.Asked()) != 1 {
		t.Fatalf("could not obtain the record for two seats: %v", err)
	}
	twoSeats := otherGate.Asked()[0].Approve("dana")

	r := &recorder{}
	run, gate := newExecutor(t, r, nil)
	gate.answer = func(planexec.ApprovalRequest) planexec.Decision { return twoSeats }
	_, err = run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{step("s1", "book_flight", `{"flight":"BA117","seats":1}`)}})

	asked := gate.Asked()
	if len(asked) != 1 || asked[0].ID == twoSeats.RequestID {
		t.Fatalf("asked %+v; the one-seat record must differ from the two-seat one", asked)
	}
	var denied *planexec.ApprovalDeniedError
	if !errors.As(err, &denied) {
		t.Fatalf("err = %v, want *ApprovalDeniedError", err)
	}
	if denied.Step != "s1" || denied.Request != asked[0].ID {
		t.Errorf("denial = %+v, want step s1 and the record asked about", denied)
	}
	es := run.Events()
	cNothingStarted(t, r, es)
	if findEvent(es, planexec.EventApprovalGranted, "") >= 0 {
		t.Errorf("a decision for another record was taken as a grant: %v", kinds(es))
	}
}

func TestAReversibleToolThatRequiresApprovalGoesToThePerson(t *testing.T) {
	r := &recorder{}
	run, gate := newExecutor(t, r, withContracts(r, map[string][]planexec.ContractOption{
		"refund": {planexec.KeyArguments("order"), planexec.RequireApproval()},
	}))
	_, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		cRefund("s2", "o-1", "12.50", "GBP"),
	}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	asked := gate.Asked()
	if len(asked) != 1 || asked[0].StepID != "s2" || asked[0].Tool != "refund" || asked[0].Irreversible {
		t.Fatalf("asked %+v, want once for the reversible refund s2 only", asked)
	}
	if got := toolNames(r.Calls()); len(got) != 2 {
		t.Errorf("calls = %v, want both steps", got)
	}
}

func TestAnUnlistedReversibleToolIsNotSentToThePerson(t *testing.T) {
	r := &recorder{}
	run, gate := newExecutor(t, r, nil)
	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		cRefund("s2", "o-1", "12.50", "GBP"),
	}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if asked := gate.Asked(); len(asked) != 0 {
		t.Errorf("the gate was asked about reversible steps: %+v", asked)
	}
	if got := toolNames(r.Calls()); len(got) != 2 {
		t.Errorf("calls = %v, want both steps", got)
	}
	if res.Steps["s2"].ApprovedBy != "" {
		t.Errorf("s2 claims approval by %q", res.Steps["s2"].ApprovedBy)
	}
	if n := count(run.Events(), planexec.EventApprovalRequired); n != 0 {
		t.Errorf("%d APPROVAL_REQUIRED events", n)
	}
}

// ---- recorded decisions ----

func TestAGrantedDecisionIsNotAskedForAgainOnResume(t *testing.T) {
	shared := withStore(memory.New())

	down := errors.New("search is down")
	r1 := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			return down
		}
		return nil
	}}
	run1, gate1 := newExecutor(t, r1, shared)
	_, err := run1.Execute(context.Background(), tripPlan())
	if !errors.Is(err, down) {
		t.Fatalf("first run: err = %v, want the search failure", err)
	}
	if len(gate1.Asked()) != 1 {
		t.Fatalf("first run asked %d times, want 1", len(gate1.Asked()))
	}
	record := gate1.Asked()[0].ID

	r2 := &recorder{}
	run2, gate2 := newExecutor(t, r2, shared)
	res, err := run2.Resume(context.Background())
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if asked := gate2.Asked(); len(asked) != 0 {
		t.Errorf("the resume asked again: %+v", asked)
	}
	if got := toolNames(r2.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("resume calls = %v", got)
	}
	es := run2.Events()
	i := findEvent(es, planexec.EventApprovalGranted, "s2")
	if i < 0 || !es[i].Replayed || es[i].Request != record || es[i].Approver != "dana" {
		t.Errorf("want a replayed APPROVAL_GRANTED for s2 by dana: %+v", es)
	}
	if findEvent(es, planexec.EventApprovalRequired, "") >= 0 {
		t.Errorf("APPROVAL_REQUIRED on resume: %v", kinds(es))
	}
	if res.Steps["s2"].ApprovedBy != "dana" {
		t.Errorf("s2 ApprovedBy = %q", res.Steps["s2"].ApprovedBy)
	}
}

func TestAGrantedDecisionCoversTheSamePlanOnlyWhenTheRunIsExecutedAgain(t *testing.T) {
	shared := withStore(memory.New())
	trip := tripPlan()
	trip.ID = "p1"
	// The booking fails without acting, so each execution books afresh.
	r := &recorder{}
	notBooked := func() { failOnce(r, "book_flight", fmt.Errorf("no fare: %w", planexec.ErrNotApplied)) }

	notBooked()
	run1, gate1 := newExecutor(t, r, shared)
	if _, err := run1.Execute(context.Background(), trip); !errors.Is(err, planexec.ErrNotApplied) {
		t.Fatalf("first run: %v, want the booking not applied", err)
	}
	first := gate1.Asked()
	if len(first) != 1 {
		t.Fatalf("first run asked %d times", len(first))
	}

	// The same plan for the same run: the recorded decision clears it.
	notBooked()
	run2, gate2 := newExecutor(t, r, shared)
	if _, err := run2.Execute(context.Background(), trip); !errors.Is(err, planexec.ErrNotApplied) {
		t.Fatalf("second run: %v", err)
	}
	if asked := gate2.Asked(); len(asked) != 0 {
		t.Errorf("the same record was asked for again: %+v", asked)
	}
	es := run2.Events()
	if i := findEvent(es, planexec.EventApprovalGranted, "s2"); i < 0 || !es[i].Replayed {
		t.Errorf("want a replayed APPROVAL_GRANTED: %v", kinds(es))
	}

	// Two seats instead of one: another record, so the person is asked.
	run3, gate3 := newExecutor(t, r, shared)
	plan := trip
	plan.Steps = slices.Clone(trip.Steps)
	plan.Steps[1].Arguments = json.RawMessage(`{"flight":"BA117","seats":2}`)
	if _, err := run3.Execute(context.Background(), plan); err != nil {
		t.Fatalf("third run: %v", err)
	}
	asked := gate3.Asked()
	if len(asked) != 1 || asked[0].ID == first[0].ID {
		t.Errorf("two seats: asked %+v, want once under a new record (not %s)", asked, first[0].ID)
	}

	// The same steps in another plan of the run: another effect to clear,
	// so the person is asked again, and it books.
	run4, gate4 := newExecutor(t, r, shared)
	again := tripPlan()
	again.ID = "p2"
	if _, err := run4.Execute(context.Background(), again); err != nil {
		t.Fatalf("fourth run: %v", err)
	}
	if asked := gate4.Asked(); len(asked) != 1 || asked[0].ID == first[0].ID {
		t.Errorf("another plan: asked %+v, want once under a new record (not %s)", asked, first[0].ID)
	}

	// Once booked, the booking asked for again replays: nobody is asked to
	// approve what has happened.
	run5, gate5 := newExecutor(t, r, shared)
	third := tripPlan()
	third.ID = "p3"
	if res, err := run5.Execute(context.Background(), third); err != nil || !res.Steps["s2"].Replayed {
		t.Fatalf("fifth run: %+v, %v; want the booking replayed", res, err)
	}
	if asked := gate5.Asked(); len(asked) != 0 {
		t.Errorf("a booking on record was put to a person: %+v", asked)
	}
}

// ---- expiring decisions ----

func TestADecisionThatHadAlreadyExpiredClearsNothing(t *testing.T) {
	r := &recorder{}
	run, gate := newExecutor(t, r, nil)
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision {
		d := req.Approve("dana")
		d.Expires = time.Now().Add(-time.Minute)
		return d
	}
	_, err := run.Execute(context.Background(), tripPlan())
	var denied *planexec.ApprovalDeniedError
	if !errors.As(err, &denied) || denied.Step != "s2" {
		t.Fatalf("err = %v, want *ApprovalDeniedError for s2", err)
	}
	es := run.Events()
	cNothingStarted(t, r, es)
	if findEvent(es, planexec.EventApprovalDenied, "s2") < 0 {
		t.Errorf("no APPROVAL_DENIED: %v", kinds(es))
	}
}

func TestADecisionThatExpiresBeforeItsStepRunsStopsThatStep(t *testing.T) {
	clock := planexec.NewFakeClock()
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			clock.Advance(2 * time.Minute) // the search takes longer than the approval lasts
		}
		return nil
	}}
	run, gate := newExecutor(t, r, func(s *setup) { s.Now = clock.Now })
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision {
		d := req.Approve("dana")
		d.Expires = clock.Now().Add(time.Minute)
		return d
	}

	res, err := run.Execute(context.Background(), tripPlan())

	var denied *planexec.ApprovalDeniedError
	if !errors.As(err, &denied) {
		t.Fatalf("err = %v, want *ApprovalDeniedError", err)
	}
	if denied.Step != "s2" || denied.Tool != "book_flight" {
		t.Errorf("denial for step %q tool %q, want s2 book_flight", denied.Step, denied.Tool)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want the search only", got)
	}
	if res == nil || res.Complete {
		t.Errorf("result = %+v, want an incomplete result", res)
	}
	es := run.Events()
	if findEvent(es, planexec.EventStepStarted, "s2") >= 0 {
		t.Errorf("s2 started: %v", kinds(es))
	}
	// The record says why s2 did not run, as it does for a revoked grant.
	if i := findEvent(es, planexec.EventApprovalDenied, "s2"); i < 0 || es[i].Request != denied.Request {
		t.Errorf("no APPROVAL_DENIED for s2 on the record: %v", kinds(es))
	}
	cLastKind(t, es, planexec.EventPlanFailed)
}

// ---- pending decisions ----

func cPendingPlan() planexec.Plan {
	return planexec.Plan{Goal: "two seats, two flights", Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s2", "book_flight", `{"flight":"BA117","seats":1}`, "s1"),
		step("s3", "book_flight", `{"flight":"VS3","seats":1}`, "s1"),
	}}
}

// cExecutePending runs cPendingPlan against a gate that always answers
// pending, and checks that nothing ran and the plan awaits approval.
func cExecutePending(t *testing.T) (*planexec.Run, *approve, *recorder, *planexec.ApprovalPendingError) {
	t.Helper()
	r := &recorder{}
	plans := memory.New()
	run, gate := newExecutor(t, r, withStore(plans))
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }

	_, err := run.Execute(context.Background(), cPendingPlan())

	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) {
		t.Fatalf("err = %v, want *ApprovalPendingError", err)
	}
	var steps []string
	for _, req := range pending.Requests {
		steps = append(steps, req.StepID)
	}
	if !slices.Equal(steps, []string{"s2", "s3"}) || pending.RunID != "run-1" || pending.Tenant != "acme" {
		t.Errorf("pending = run %q tenant %q steps %v, want run-1 acme [s2 s3]", pending.RunID, pending.Tenant, steps)
	}
	es := run.Events()
	cNothingStarted(t, r, es)
	if n := count(es, planexec.EventApprovalPending); n != 2 {
		t.Errorf("%d APPROVAL_PENDING events, want 2: %v", n, kinds(es))
	}
	rec, err := plans.LoadPlan(context.Background(), "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	if n := len(planOf(t, rec).Steps); rec.Status != store.RunAwaitingApproval || n != 3 || len(rec.Steps) != 0 {
		t.Errorf("stored plan: status %q, %d steps, %d results; want awaiting_approval, 3, 0", rec.Status, n, len(rec.Steps))
	}
	return run, gate, r, pending
}

func TestAPendingDecisionStoresThePlanAndResumeRunsItOnceGranted(t *testing.T) {
	run, gate, r, pending := cExecutePending(t)
	ctx := context.Background()
	for _, req := range pending.Requests {
		if err := run.Decide(ctx, req.Approve("dana")); err != nil {
			t.Fatalf("Decide: %v", err)
		}
	}

	res, err := run.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if asked := gate.Asked(); len(asked) != 2 {
		t.Errorf("the gate was asked %d times in all, want 2 (only before the decisions)", len(asked))
	}
	if !res.Complete || len(res.Steps) != 3 {
		t.Errorf("result: complete %v, %d steps", res.Complete, len(res.Steps))
	}
	for _, id := range []string{"s2", "s3"} {
		if res.Steps[id].ApprovedBy != "dana" {
			t.Errorf("%s ApprovedBy = %q, want dana", id, res.Steps[id].ApprovedBy)
		}
	}
	calls := toolNames(r.Calls())
	slices.Sort(calls)
	if !slices.Equal(calls, []string{"book_flight", "book_flight", "search_flights"}) {
		t.Errorf("calls = %v", calls)
	}
	es := run.Events()
	resumed := findEvent(es, planexec.EventPlanResumed, "")
	if resumed < 0 {
		t.Fatalf("no PLAN_RESUMED: %v", kinds(es))
	}
	for _, id := range []string{"s2", "s3"} {
		i := findEvent(es[resumed:], planexec.EventApprovalGranted, id)
		if i < 0 || !es[resumed+i].Replayed {
			t.Errorf("no replayed APPROVAL_GRANTED for %s after PLAN_RESUMED: %v", id, kinds(es))
		}
	}
	cLastKind(t, es, planexec.EventPlanCompleted)
}

func TestAPendingDecisionThenDeniedRunsNothingOnResume(t *testing.T) {
	run, gate, r, pending := cExecutePending(t)
	ctx := context.Background()
	if err := run.Decide(ctx, pending.Requests[0].Approve("dana")); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if err := run.Decide(ctx, pending.Requests[1].Deny("dana", "not that flight")); err != nil {
		t.Fatalf("Decide: %v", err)
	}

	_, err := run.Resume(ctx)

	var denied *planexec.ApprovalDeniedError
	if !errors.As(err, &denied) {
		t.Fatalf("err = %v, want *ApprovalDeniedError", err)
	}
	if denied.Step != "s3" || denied.Approver != "dana" {
		t.Errorf("denial = %+v, want s3 by dana", denied)
	}
	if asked := gate.Asked(); len(asked) != 2 {
		t.Errorf("the gate was asked %d times in all, want 2", len(asked))
	}
	cNothingStarted(t, r, run.Events())
}

// ---- no gate ----

func TestAStepThatNeedsAPersonWithNoGateIsAConfigurationError(t *testing.T) {
	for name, grants := range map[string][]planexec.Grant{
		"an ask_always grant": {{ID: "g-book", Tenant: "acme", Class: "bookings", Level: planexec.LevelAskAlways}},
		"no live grant":       nil,
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{}
			ladder := cLadder(t, grants...)
			run, _ := newExecutor(t, r, func(s *setup) {
				s.Ladder = ladder
				s.Gate = nil
			})

			_, err := run.Execute(context.Background(), tripPlan())

			var conf *planexec.ConfigurationError
			if !errors.As(err, &conf) {
				t.Fatalf("err = %v, want *ConfigurationError", err)
			}
			if conf.Tool != "book_flight" {
				t.Errorf("configuration error names tool %q, want book_flight", conf.Tool)
			}
			cNothingStarted(t, r, run.Events())
		})
	}
}

// ---- the autonomy ladder ----

func TestAGrantWithinItsCeilingActsWithoutAskingAnyone(t *testing.T) {
	r := &recorder{}
	ladder := cLadder(t, planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits, Ceiling: cGBP100()})
	run, gate := newExecutor(t, r, func(s *setup) { s.Ladder = ladder })

	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{cRefund("s1", "o-1", "40", "GBP")}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if asked := gate.Asked(); len(asked) != 0 {
		t.Errorf("the gate was asked: %+v", asked)
	}
	if got := res.Steps["s1"].Grant; got != "g-refunds" {
		t.Errorf("s1 Grant = %q, want g-refunds", got)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"refund"}) {
		t.Errorf("calls = %v", got)
	}
	es := run.Events()
	i := findEvent(es, planexec.EventAutonomyCleared, "s1")
	if i < 0 || es[i].Grant != "g-refunds" || es[i].Level != planexec.LevelActWithinLimits {
		t.Errorf("want AUTONOMY_CLEARED for s1 under g-refunds at act_within_limits: %+v", es)
	}
	if i >= findEvent(es, planexec.EventStepStarted, "s1") {
		t.Errorf("AUTONOMY_CLEARED does not come before the step started: %v", kinds(es))
	}
}

func TestAnIrreversibleToolTheLadderClassifiesActsUnderAGrantWithNoGate(t *testing.T) {
	r := &recorder{}
	ladder := cLadder(t, planexec.Grant{ID: "g-book", Tenant: "acme", Class: "bookings", Level: planexec.LevelActAndReport})
	run, _ := newExecutor(t, r, func(s *setup) {
		s.Ladder = ladder
		s.Gate = nil
	})
	res, err := run.Execute(context.Background(), tripPlan())
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if res.Steps["s2"].Grant != "g-book" || res.Steps["s2"].ApprovedBy != "" {
		t.Errorf("s2 = %+v, want it run under g-book with no approver", res.Steps["s2"])
	}
	es := run.Events()
	if i := findEvent(es, planexec.EventAutonomyCleared, "s2"); i < 0 || es[i].Level != planexec.LevelActAndReport {
		t.Errorf("want AUTONOMY_CLEARED at act_and_report for s2: %v", kinds(es))
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v", got)
	}
}

func TestAnAskAlwaysGrantEscalatesToThePerson(t *testing.T) {
	r := &recorder{}
	ladder := cLadder(t, planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: planexec.LevelAskAlways})
	run, gate := newExecutor(t, r, func(s *setup) { s.Ladder = ladder })

	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{cRefund("s1", "o-1", "5", "GBP")}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	asked := gate.Asked()
	if len(asked) != 1 || asked[0].StepID != "s1" || asked[0].Class != "refunds" || asked[0].Why == "" {
		t.Fatalf("asked %+v, want once for s1 of class refunds, with a reason", asked)
	}
	if res.Steps["s1"].ApprovedBy != "dana" || res.Steps["s1"].Grant != "" {
		t.Errorf("s1 = %+v, want cleared by dana, not under a grant", res.Steps["s1"])
	}
	es := run.Events()
	esc := findEvent(es, planexec.EventAutonomyEscalated, "s1")
	req := findEvent(es, planexec.EventApprovalRequired, "s1")
	if esc < 0 || req < 0 || esc > req {
		t.Errorf("want AUTONOMY_ESCALATED then APPROVAL_REQUIRED: %v", kinds(es))
	}
	if findEvent(es, planexec.EventAutonomyCleared, "") >= 0 {
		t.Errorf("an ask_always grant acted: %v", kinds(es))
	}
	if len(r.Calls()) != 1 {
		t.Errorf("calls = %v", toolNames(r.Calls()))
	}
}

// clearanceAs runs the run as tenant and user.
func clearanceAs(tenant, user string) func(*setup) {
	return func(s *setup) { s.Delegation.Tenant, s.Delegation.User = tenant, user }
}

// clearanceSearchThenRefund is a search, then a refund of 5 GBP after it.
func clearanceSearchThenRefund() planexec.Plan {
	return planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		cRefund("s2", "o-1", "5", "GBP", "s1"),
	}}
}

// clearanceUnder sets the ladder, then applies edit if there is one.
func clearanceUnder(ladder *planexec.AutonomyLadder, edit func(*setup)) func(*setup) {
	return func(s *setup) {
		s.Ladder = ladder
		if edit != nil {
			edit(s)
		}
	}
}

// cRefused runs clearanceSearchThenRefund under ladder and checks that the
// ladder refused the refund before anything ran, asking no one.
func cRefused(t *testing.T, ladder *planexec.AutonomyLadder, edit func(*setup)) {
	t.Helper()
	r := &recorder{}
	run, gate := newExecutor(t, r, clearanceUnder(ladder, edit))
	tenant := run.Delegation().Tenant
	_, err := run.Execute(context.Background(), clearanceSearchThenRefund())
	var refused *planexec.AutonomyRefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("err = %v, want *AutonomyRefusedError", err)
	}
	if refused.Step != "s2" || refused.Tool != "refund" || refused.Class != "refunds" || refused.Tenant != tenant || refused.AtDispatch {
		t.Errorf("refusal = %+v, want s2 refund refunds %s, during clearance", refused, tenant)
	}
	if asked := gate.Asked(); len(asked) != 0 {
		t.Errorf("a refused step went to the gate: %+v", asked)
	}
	es := run.Events()
	cNothingStarted(t, r, es)
	if findEvent(es, planexec.EventAutonomyRefused, "s2") < 0 {
		t.Errorf("no AUTONOMY_REFUSED for s2: %v", kinds(es))
	}
	if findEvent(es, planexec.EventApprovalRequired, "") >= 0 {
		t.Errorf("a person was asked about a refused step: %v", kinds(es))
	}
	cLastKind(t, es, planexec.EventPlanFailed)
}

// clearanceAskedForLackOfGrant runs clearanceSearchThenRefund under ladder
// and checks that, finding no live grant, the ladder sent the refund to a
// person: escalated, then asked, then run once the person approved, under no
// grant.
func clearanceAskedForLackOfGrant(t *testing.T, ladder *planexec.AutonomyLadder, edit func(*setup)) {
	t.Helper()
	r := &recorder{}
	run, gate := newExecutor(t, r, clearanceUnder(ladder, edit))
	res, err := run.Execute(context.Background(), clearanceSearchThenRefund())
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	asked := gate.Asked()
	if len(asked) != 1 || asked[0].StepID != "s2" || asked[0].Class != "refunds" || !strings.Contains(asked[0].Why, "no live grant") {
		t.Fatalf("asked %+v, want once for s2 of class refunds, saying there is no live grant", asked)
	}
	es := run.Events()
	esc := findEvent(es, planexec.EventAutonomyEscalated, "s2")
	req := findEvent(es, planexec.EventApprovalRequired, "s2")
	started := findEvent(es, planexec.EventStepStarted, "s1")
	if esc < 0 || req < 0 || esc > req || req > started {
		t.Errorf("want AUTONOMY_ESCALATED, then APPROVAL_REQUIRED for s2, before any step started: %v", kinds(es))
	}
	if esc >= 0 && es[esc].Grant != "" {
		t.Errorf("AUTONOMY_ESCALATED names grant %q; no grant was live", es[esc].Grant)
	}
	if findEvent(es, planexec.EventAutonomyCleared, "") >= 0 || findEvent(es, planexec.EventAutonomyRefused, "") >= 0 {
		t.Errorf("the ladder acted or refused without a live grant: %v", kinds(es))
	}
	if s2 := res.Steps["s2"]; s2.ApprovedBy != "dana" || s2.Grant != "" {
		t.Errorf("s2 = %+v, want cleared by dana, under no grant", s2)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "refund"}) {
		t.Errorf("calls = %v, want the search and the approved refund", got)
	}
}

// cActs runs one refund under ladder and checks that it acted under grant.
func cActs(t *testing.T, ladder *planexec.AutonomyLadder, grant string, edit func(*setup)) {
	t.Helper()
	r := &recorder{}
	run, gate := newExecutor(t, r, clearanceUnder(ladder, edit))
	d := run.Delegation()
	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{cRefund("s1", "o-1", "5", "GBP")}})
	if err != nil {
		t.Fatalf("Execute for %s/%s: %v", d.Tenant, d.User, err)
	}
	if res.Steps["s1"].Grant != grant || len(gate.Asked()) != 0 || len(r.Calls()) != 1 {
		t.Errorf("for %s/%s: s1 grant %q, asked %d, called %d; want acted under %s", d.Tenant, d.User, res.Steps["s1"].Grant, len(gate.Asked()), len(r.Calls()), grant)
	}
}

func TestAClassifiedToolWithNoLiveGrantGoesToAPerson(t *testing.T) {
	clock := planexec.NewFakeClock()
	for _, tc := range []struct {
		name         string
		grants       []planexec.Grant
		tenant, user string
	}{
		{"no grant given", nil, "acme", "dana"},
		{"a grant for another tenant", []planexec.Grant{{ID: "g-globex", Tenant: "globex", Class: "refunds", Level: planexec.LevelActWithinLimits}}, "acme", "dana"},
		{"an expired grant", []planexec.Grant{{ID: "g-old", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits, Expires: clock.Now().Add(-time.Hour)}}, "acme", "dana"},
		{"a grant that expires this instant", []planexec.Grant{{ID: "g-now", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits, Expires: clock.Now()}}, "acme", "dana"},
		{"a grant for another user", []planexec.Grant{{ID: "g-bob", Tenant: "acme", User: "bob", Class: "refunds", Level: planexec.LevelActWithinLimits}}, "acme", "dana"},
		{"a grant for another class", []planexec.Grant{{ID: "g-book", Tenant: "acme", Class: "bookings", Level: planexec.LevelActWithinLimits}}, "acme", "dana"},
		{"a parent tenant's grant without SubTenants", []planexec.Grant{{ID: "g-acme", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits}}, "acme/eu", "dana"},
		// "acme" must not cover "acmecorp", with or without SubTenants.
		{"a grant for a tenant whose name is a prefix", []planexec.Grant{{ID: "g-acme", Tenant: "acme", SubTenants: true, Class: "refunds", Level: planexec.LevelActWithinLimits}}, "acmecorp", "dana"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearanceAskedForLackOfGrant(t, cLadder(t, tc.grants...), edits(clearanceAs(tc.tenant, tc.user), func(s *setup) { s.Now = clock.Now }))
		})
	}
}

func TestANeverGrantRefusesTheStepAndAsksNoOne(t *testing.T) {
	ladder := cLadder(t, planexec.Grant{ID: "g-never", Tenant: "acme", Class: "refunds", Level: planexec.LevelNever})
	t.Run("with a gate", func(t *testing.T) { cRefused(t, ladder, nil) })
	// Refusing needs no person, so no gate is needed either.
	t.Run("with no gate", func(t *testing.T) { cRefused(t, ladder, func(s *setup) { s.Gate = nil }) })
}

func TestANeverGrantForOneUserOutranksTheTenantsGrant(t *testing.T) {
	ladder := cLadder(t,
		planexec.Grant{ID: "g-acme", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits},
		planexec.Grant{ID: "g-not-dana", Tenant: "acme", User: "dana", Class: "refunds", Level: planexec.LevelNever},
	)
	cRefused(t, ladder, clearanceAs("acme", "dana"))
	cActs(t, ladder, "g-acme", clearanceAs("acme", "bob"))
}

func TestAGrantExpiresByTheExecutorsClock(t *testing.T) {
	clock := planexec.NewFakeClock()
	ladder := cLadder(t, planexec.Grant{ID: "g-day", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits,
		Expires: clock.Now().Add(24 * time.Hour)})
	onClock := func(s *setup) { s.Now = clock.Now }
	cActs(t, ladder, "g-day", onClock)
	clock.Advance(25 * time.Hour)
	clearanceAskedForLackOfGrant(t, ladder, onClock)
}

func TestAGrantForOneUserActsForThatUserOnly(t *testing.T) {
	ladder := cLadder(t, planexec.Grant{ID: "g-bob", Tenant: "acme", User: "bob", Class: "refunds", Level: planexec.LevelActWithinLimits})
	clearanceAskedForLackOfGrant(t, ladder, clearanceAs("acme", "dana"))
	cActs(t, ladder, "g-bob", clearanceAs("acme", "bob"))
}

func TestAGrantWithSubTenantsCoversTheTenantsBelowIt(t *testing.T) {
	ladder := cLadder(t, planexec.Grant{ID: "g-acme", Tenant: "acme", SubTenants: true, Class: "refunds", Level: planexec.LevelActWithinLimits})
	cActs(t, ladder, "g-acme", clearanceAs("acme/eu", "dana"))
	cActs(t, ladder, "g-acme", clearanceAs("acme", "dana"))
}

// cEscalates runs the refund steps under ladder and checks that the gate was
// asked exactly about the steps in escalated, each after AUTONOMY_ESCALATED.
func cEscalates(t *testing.T, ladder *planexec.AutonomyLadder, steps []planexec.Step, escalated ...string) *planexec.Run {
	t.Helper()
	return cEscalatesIn(t, nil, ladder, steps, escalated...)
}

// cEscalatesIn is cEscalates over st (nil: a store of the run's own).
func cEscalatesIn(t *testing.T, st store.Store, ladder *planexec.AutonomyLadder, steps []planexec.Step, escalated ...string) *planexec.Run {
	t.Helper()
	r := &recorder{}
	run, gate := newExecutor(t, r, func(s *setup) { s.Ladder, s.Store = ladder, st })
	if _, err := run.Execute(context.Background(), planexec.Plan{Steps: steps}); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	var asked []string
	for _, req := range gate.Asked() {
		asked = append(asked, req.StepID)
	}
	if !slices.Equal(asked, escalated) {
		t.Errorf("the gate was asked about %v, want %v", asked, escalated)
	}
	es := run.Events()
	for _, id := range escalated {
		if findEvent(es, planexec.EventAutonomyEscalated, id) < 0 {
			t.Errorf("no AUTONOMY_ESCALATED for %s: %v", id, kinds(es))
		}
	}
	if len(r.Calls()) != len(steps) {
		t.Errorf("calls = %v, want every step run once cleared", toolNames(r.Calls()))
	}
	return run
}

func TestARefundInAnotherCurrencyEscalates(t *testing.T) {
	ladder := cLadder(t, planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits, Ceiling: cGBP100()})
	cEscalates(t, ladder, []planexec.Step{cRefund("s1", "o-1", "10", "EUR")}, "s1")
}

func TestANegativeAmountEscalates(t *testing.T) {
	ladder := cLadder(t, planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits, Ceiling: cGBP100()})
	cEscalates(t, ladder, []planexec.Step{cRefund("s1", "o-1", "-5", "GBP")}, "s1")
}

func TestCeilingsAddUpAcrossTheStepsOfOnePlan(t *testing.T) {
	ladder := cLadder(t, planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits, Ceiling: cGBP100()})
	run := cEscalates(t, ladder, []planexec.Step{
		cRefund("s1", "o-1", "40", "GBP"),
		cRefund("s2", "o-2", "40", "GBP", "s1"),
		cRefund("s3", "o-3", "40", "GBP", "s2"),
	}, "s3")
	es := run.Events()
	for _, id := range []string{"s1", "s2"} {
		if findEvent(es, planexec.EventAutonomyCleared, id) < 0 {
			t.Errorf("%s did not act: %v", id, kinds(es))
		}
	}
	if findEvent(es, planexec.EventAutonomyCleared, "s3") >= 0 {
		t.Errorf("s3 acted past the ceiling: %v", kinds(es))
	}
}

func TestSpendingWithinTheWindowCountsAgainstTheNextPlan(t *testing.T) {
	ceiling := cGBP100()
	ceiling.Window = 24 * time.Hour
	ladder := cLadder(t, planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits, Ceiling: ceiling})

	// Windows are counted in the store the executors share.
	st := memory.New()
	first, gate := newExecutor(t, &recorder{}, func(s *setup) { s.Ladder, s.Store = ladder, st; s.Delegation.RunID = "run-a" })
	if _, err := first.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{cRefund("s1", "o-1", "70", "GBP")}}); err != nil {
		t.Fatalf("first plan: %v", err)
	}
	if len(gate.Asked()) != 0 || findEvent(first.Events(), planexec.EventAutonomyCleared, "s1") < 0 {
		t.Fatalf("the first refund of 70 should act: %v", kinds(first.Events()))
	}

	// 70 already spent; 40 more would pass 100.
	second := cEscalatesIn(t, st, ladder, []planexec.Step{cRefund("s1", "o-2", "40", "GBP")}, "s1")
	if findEvent(second.Events(), planexec.EventAutonomyCleared, "") >= 0 {
		t.Errorf("the second plan acted past the window's headroom: %v", kinds(second.Events()))
	}
}

func TestARevokedGrantStopsAStepThatWasAlreadyCleared(t *testing.T) {
	ladder := cLadder(t, planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: planexec.LevelActWithinLimits})
	var revoked atomic.Bool
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			revoked.Store(ladder.Revoke("g-refunds"))
		}
		return nil
	}}
	run, gate := newExecutor(t, r, func(s *setup) { s.Ladder = ladder })

	_, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		cRefund("s2", "o-1", "5", "GBP", "s1"),
	}})

	if !revoked.Load() {
		t.Fatal("the grant was not there to revoke")
	}
	var refused *planexec.AutonomyRefusedError
	if !errors.As(err, &refused) || refused.Step != "s2" {
		t.Fatalf("err = %v, want *AutonomyRefusedError for s2", err)
	}
	if refused.Tool != "refund" || refused.Class != "refunds" || refused.Tenant != "acme" || !refused.AtDispatch {
		t.Errorf("refusal = %+v, want tool refund, class refunds, tenant acme, at dispatch", refused)
	}
	// s1 ran, so the refusal must not tell whoever reads it otherwise.
	if strings.Contains(refused.Error(), "nothing ran") {
		t.Errorf("the refusal says %q, but s1 had already run", refused.Error())
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want the search only", got)
	}
	if len(gate.Asked()) != 0 {
		t.Errorf("asked %+v", gate.Asked())
	}
	es := run.Events()
	if findEvent(es, planexec.EventAutonomyCleared, "s2") < 0 || findEvent(es, planexec.EventAutonomyRefused, "s2") < 0 {
		t.Errorf("want s2 acted at clearance and refused at dispatch: %v", kinds(es))
	}
	if findEvent(es, planexec.EventStepStarted, "s2") >= 0 {
		t.Errorf("s2 started: %v", kinds(es))
	}
}

func TestALadderWithAToolInTwoClassesIsAConfigurationError(t *testing.T) {
	_, err := planexec.NewAutonomyLadder(
		planexec.ActionClass{Name: "refunds", Tools: []string{"refund"}},
		planexec.ActionClass{Name: "money", Tools: []string{"refund"}},
	)
	var conf *planexec.ConfigurationError
	if !errors.As(err, &conf) || conf.Tool != "refund" {
		t.Fatalf("err = %v, want *ConfigurationError naming refund", err)
	}
}

func TestAGrantForAnUnknownClassOrLevelIsRefused(t *testing.T) {
	ladder := cLadder(t)
	for name, g := range map[string]planexec.Grant{
		"unknown class": {ID: "g1", Tenant: "acme", Class: "lodging", Level: planexec.LevelActWithinLimits},
		"unknown level": {ID: "g2", Tenant: "acme", Class: "refunds", Level: "act_freely"},
	} {
		if err := ladder.Grant(g); err == nil {
			t.Errorf("%s: Grant accepted %+v", name, g)
		}
	}
	// Neither grant took effect: a refund still goes to a person.
	clearanceAskedForLackOfGrant(t, ladder, nil)
}

// ---- the delegation ----

func TestAChildDelegationMayOnlyNarrow(t *testing.T) {
	end := time.Date(2030, time.March, 4, 18, 0, 0, 0, time.UTC)
	parent := planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "dana", Agent: "courier",
		Scope: []string{"search_flights", "book_flight"}, Expires: end}

	child, err := parent.Delegate("booker", []string{"book_flight"}, end.Add(-time.Hour))
	if err != nil {
		t.Fatalf("a narrower child was refused: %v", err)
	}
	if child.Agent != "booker" || child.RunID == "run-1" || child.RunID == "" || child.Parent != "run-1" || child.Tenant != "acme" || child.User != "dana" ||
		!slices.Equal(child.Scope, []string{"book_flight"}) || !child.Expires.Equal(end.Add(-time.Hour)) {
		t.Errorf("child = %+v", child)
	}
	for _, tc := range []struct {
		name    string
		from    planexec.Delegation
		scope   []string
		expires time.Time
		tool    string // the tool the refusal names, if one
	}{
		{"a tool outside the parent's scope", parent, []string{"book_flight", "refund"}, end, "refund"},
		{"no scope under a scoped parent", parent, nil, end, ""},
		{"outliving the parent", parent, []string{"book_flight"}, end.Add(time.Minute), ""},
		{"never expiring under a parent that does", parent, []string{"book_flight"}, time.Time{}, ""},
		{"a tool the parent had given up", child, []string{"search_flights"}, end.Add(-2 * time.Hour), "search_flights"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.from.Delegate("clerk", tc.scope, tc.expires)
			var de *planexec.DelegationError
			if !errors.As(err, &de) {
				t.Fatalf("Delegate = %+v, %v; want a *DelegationError", got, err)
			}
			if de.RunID != tc.from.RunID || de.Tool != tc.tool || de.Why == "" {
				t.Errorf("refusal = %+v, want run %s, tool %q and a reason", de, tc.from.RunID, tc.tool)
			}
		})
	}
}

func TestADelegationThatExpiresBetweenStepsStopsTheNextStep(t *testing.T) {
	clock := planexec.NewFakeClock()
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			clock.Advance(2 * time.Minute)
		}
		return nil
	}}
	run, _ := newExecutor(t, r, func(s *setup) {
		s.Now = clock.Now
		s.Delegation.Expires = clock.Now().Add(time.Minute)
	})

	_, err := run.Execute(context.Background(), tripPlan())

	var de *planexec.DelegationError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want *DelegationError", err)
	}
	if de.Step != "s2" || de.Tool != "book_flight" || de.RunID != "run-1" {
		t.Errorf("delegation error = %+v, want run-1 s2 book_flight", de)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want the search only", got)
	}
	es := run.Events()
	if findEvent(es, planexec.EventStepStarted, "s2") >= 0 {
		t.Errorf("s2 started: %v", kinds(es))
	}
	if i := findEvent(es, planexec.EventStepFailed, "s2"); i < 0 || es[i].Detail == "" {
		t.Errorf("the record does not say why s2 did not run: %v", kinds(es))
	}
	cLastKind(t, es, planexec.EventPlanFailed)
}

func TestAnExpiredDelegationIsRefusedBeforeAnyPersonIsAsked(t *testing.T) {
	for name, expires := range map[string]time.Duration{
		"expired an hour ago":      -time.Hour,
		"expiring at this instant": 0,
	} {
		t.Run(name, func(t *testing.T) {
			clock := planexec.NewFakeClock()
			r := &recorder{}
			// The booking would go to a person and the refund to the ladder,
			// which has no grant for it: either would ask someone.
			run, gate := newExecutor(t, r, func(s *setup) {
				s.Now = clock.Now
				s.Ladder = cLadder(t)
				s.Delegation.Expires = clock.Now().Add(expires)
			})
			plan := tripPlan()
			plan.Steps = append(plan.Steps, cRefund("s3", "o-1", "5", "GBP"))

			res, err := run.Execute(context.Background(), plan)

			clearanceExpiredBeforeAsking(t, r, gate, run, res, err)
		})
	}
}

func TestAnExpiredDelegationResumesNothingAndAsksNoOne(t *testing.T) {
	clock := planexec.NewFakeClock()
	end := clock.Now().Add(time.Hour)
	shared := edits(withStore(memory.New(memory.WithClock(clock.Now))), func(s *setup) {
		s.Now = clock.Now
		s.Delegation.Expires = end
	})
	first, firstGate := newExecutor(t, &recorder{}, shared)
	firstGate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }
	var pending *planexec.ApprovalPendingError
	if _, err := first.Execute(context.Background(), tripPlan()); !errors.As(err, &pending) {
		t.Fatalf("first Execute: err = %v, want *ApprovalPendingError", err)
	}
	clock.Advance(2 * time.Hour)

	r := &recorder{}
	second, gate := newExecutor(t, r, shared)
	res, err := second.Resume(context.Background())

	clearanceExpiredBeforeAsking(t, r, gate, second, res, err)
}

// clearanceExpiredBeforeAsking checks that a run under an expired
// delegation was refused as a whole before clearance: no person asked, no
// ladder consulted, nothing run.
func clearanceExpiredBeforeAsking(t *testing.T, r *recorder, gate *approve, run *planexec.Run, res *planexec.Result, err error) {
	t.Helper()
	var de *planexec.DelegationError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want *DelegationError", err)
	}
	if de.RunID != "run-1" || de.Step != "" {
		t.Errorf("delegation error = %+v, want run-1 and no step: the run is refused as a whole", de)
	}
	if res != nil {
		t.Errorf("an expired delegation returned a result: %+v", res)
	}
	if asked := gate.Asked(); len(asked) != 0 {
		t.Errorf("the gate was asked under an expired delegation: %+v", asked)
	}
	es := run.Events()
	cNothingStarted(t, r, es)
	for _, k := range []planexec.EventKind{planexec.EventApprovalRequired, planexec.EventAutonomyEscalated, planexec.EventAutonomyCleared, planexec.EventAutonomyRefused} {
		if findEvent(es, k, "") >= 0 {
			t.Errorf("%s under an expired delegation: %v", k, kinds(es))
		}
	}
	cLastKind(t, es, planexec.EventPlanFailed)
}

func TestARevocationByTheAuthorizerStopsTheNextStep(t *testing.T) {
	errRevoked := errors.New("dana revoked the courier")
	var searched atomic.Bool
	var authorized []string
	var mu sync.Mutex
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			searched.Store(true)
		}
		return nil
	}}
	run, _ := newExecutor(t, r, func(s *setup) {
		s.Authorizer = planexec.AuthorizerFunc(func(_ context.Context, d planexec.Delegation, s planexec.Step) error {
			mu.Lock()
			authorized = append(authorized, d.RunID+"/"+s.ID)
			mu.Unlock()
			if searched.Load() {
				return errRevoked
			}
			return nil
		})
	})

	_, err := run.Execute(context.Background(), tripPlan())

	var de *planexec.DelegationError
	if !errors.As(err, &de) || de.Step != "s2" {
		t.Fatalf("err = %v, want *DelegationError for s2", err)
	}
	if !errors.Is(err, errRevoked) {
		t.Errorf("err = %v does not wrap the authorizer's error", err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want the search only", got)
	}
	es := run.Events()
	if findEvent(es, planexec.EventStepStarted, "s2") >= 0 {
		t.Errorf("s2 started: %v", kinds(es))
	}
	if i := findEvent(es, planexec.EventStepFailed, "s2"); i < 0 || es[i].Detail == "" {
		t.Errorf("the record does not say why s2 did not run: %v", kinds(es))
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(authorized, []string{"run-1/s1", "run-1/s2"}) {
		t.Errorf("the authorizer was asked about %v, want each step just before it ran", authorized)
	}
}

func TestAuthorizeAsksTheAuthorizerOfEachStepAndRunsNothing(t *testing.T) {
	errNo := errors.New("policy 7: no bookings this week")
	var asked []string
	r := &recorder{}
	run, gate := newExecutor(t, r, func(s *setup) {
		s.Authorizer = planexec.AuthorizerFunc(func(_ context.Context, d planexec.Delegation, s planexec.Step) error {
			asked = append(asked, d.User+"/"+s.ID)
			if s.Tool == "book_flight" {
				return errNo
			}
			return nil
		})
	})

	err := run.Authorize(context.Background(), tripPlan())

	var de *planexec.DelegationError
	if !errors.As(err, &de) || de.Step != "s2" || de.Tool != "book_flight" || !errors.Is(err, errNo) {
		t.Fatalf("err = %v, want a *DelegationError for s2 (book_flight) wrapping the authorizer's", err)
	}
	if !slices.Equal(asked, []string{"dana/s1", "dana/s2"}) {
		t.Errorf("the authorizer was asked about %v, want each step up to the refused one", asked)
	}
	if len(r.Calls()) != 0 || len(gate.Asked()) != 0 || len(run.Events()) != 0 {
		t.Errorf("Authorize ran %v, asked %v, recorded %v", r.Calls(), gate.Asked(), kinds(run.Events()))
	}
	plain, _ := newExecutor(t, r, nil)
	if err := plain.Authorize(context.Background(), tripPlan()); err != nil {
		t.Errorf("with no authorizer: %v", err)
	}
	expired, _ := newExecutor(t, r, func(s *setup) { s.Delegation.Expires = time.Now().Add(-time.Minute) })
	if err := expired.Authorize(context.Background(), tripPlan()); !errors.As(err, &de) || de.Why != "the delegation expired" {
		t.Errorf("an expired delegation: %v", err)
	}
}
