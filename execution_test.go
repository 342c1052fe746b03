package planexec_test

// Execution: when steps start, how many run at once, what a failure, a
// cancellation or a panic does to the rest, and what the Result and a tool's
// context say.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planexec/planexec"
)

// cBarrier lets n calls through once all n have arrived. A call that waits
// longer than patience gets an error, which fails the step and the test.
type cBarrier struct {
	n    int32
	hits atomic.Int32
	all  chan struct{}
}

func cNewBarrier(n int) *cBarrier { return &cBarrier{n: int32(n), all: make(chan struct{})} }

func (b *cBarrier) arrive() error {
	if b.hits.Add(1) == b.n {
		close(b.all)
	}
	return cAwait(b.all, fmt.Sprintf("only %d of %d calls were in flight together", b.hits.Load(), b.n))
}

// cAwait waits for ch to close, or fails with what after patience.
func cAwait(ch <-chan struct{}, what string) error {
	select {
	case <-ch:
		return nil
	case <-time.After(patience):
		return errors.New(what)
	}
}

// cStepErrors collects every *StepError in err's tree.
func cStepErrors(err error) []*planexec.StepError {
	var out []*planexec.StepError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if se, ok := e.(*planexec.StepError); ok {
			out = append(out, se)
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// cSearch is a search step from origin.
func cSearch(id, origin string, deps ...string) planexec.Step {
	return step(id, "search_flights", fmt.Sprintf(`{"origin":%q,"destination":"JFK"}`, origin), deps...)
}

// cOrigin is the origin of a search call, or "".
func cOrigin(args any) string {
	s, _ := args.(Search)
	return s.Origin
}

// cWide is n independent refunds, s0 … s(n-1).
func cWide(n int) planexec.Plan {
	p := planexec.Plan{Goal: "refund everyone"}
	for i := range n {
		p.Steps = append(p.Steps, cRefund(fmt.Sprintf("s%d", i), fmt.Sprintf("o-%d", i), "1", "GBP"))
	}
	return p
}

// ---- when steps start ----

func TestIndependentStepsRunAtTheSameTime(t *testing.T) {
	both := cNewBarrier(2)
	r := &recorder{fail: func(tool string, _ any) error { return both.arrive() }}
	run, _ := newExecutor(t, r, nil)

	// Each search waits until the other has started: run one after the other,
	// they would never finish.
	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{cSearch("s1", "LHR"), cSearch("s2", "LGW")}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if !res.Complete || len(r.Calls()) != 2 {
		t.Errorf("complete %v, calls %v", res.Complete, toolNames(r.Calls()))
	}
}

func TestAStepStartsWhenItsOwnDependenciesFinishNotWhenItsLevelDoes(t *testing.T) {
	refunded := make(chan struct{})
	var once sync.Once
	r := &recorder{fail: func(tool string, args any) error {
		switch {
		case tool == "refund":
			once.Do(func() { close(refunded) })
		case cOrigin(args) == "LHR":
			// The slow search finishes only once the refund behind the fast
			// one has run.
			return cAwait(refunded, "the refund waited for an unrelated step")
		}
		return nil
	}}
	run, _ := newExecutor(t, r, nil)

	_, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		cSearch("s1", "LHR"),
		cSearch("s2", "LGW"),
		cRefund("s3", "o-1", "5", "GBP", "s2"),
	}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if got := len(r.Calls()); got != 3 {
		t.Errorf("%d calls, want 3", got)
	}
}

func TestAStepNeverStartsBeforeAllItsDependenciesFinished(t *testing.T) {
	// A diamond: s1 → {s2, s3} → s4. s2 and s3 overlap; s3 finishes only after
	// s2 has, so s4 would see s2 done and s3 still running if it started early.
	s2Done := make(chan struct{})
	var once sync.Once
	both := cNewBarrier(2)
	order := func(args any) string { f, _ := args.(Refund); return f.Order }
	r := &recorder{fail: func(_ string, args any) error {
		switch order(args) {
		case "o-2", "o-3":
			if err := both.arrive(); err != nil {
				return err
			}
			if order(args) == "o-3" {
				return cAwait(s2Done, "s2 never finished")
			}
		}
		return nil
	}}
	run, _ := newExecutor(t, r, func(c *setup) {
		c.Observer = func(e planexec.Event) {
			if e.Kind == planexec.EventStepExecuted && e.StepID == "s2" {
				once.Do(func() { close(s2Done) })
			}
		}
	})

	_, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		cRefund("s4", "o-4", "1", "GBP", "s2", "s3"),
		cRefund("s3", "o-3", "1", "GBP", "s1"),
		cRefund("s2", "o-2", "1", "GBP", "s1"),
		cRefund("s1", "o-1", "1", "GBP"),
	}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}

	var calls []string
	for _, c := range r.Calls() {
		calls = append(calls, order(c.Args))
	}
	if len(calls) != 4 || calls[0] != "o-1" || calls[3] != "o-4" {
		t.Errorf("calls in order %v, want o-1 first and o-4 last", calls)
	}
	es := run.Events()
	s4 := findEvent(es, planexec.EventStepStarted, "s4")
	for _, dep := range []string{"s2", "s3"} {
		if done := findEvent(es, planexec.EventStepExecuted, dep); done < 0 || done > s4 {
			t.Errorf("s4 started before %s finished: %v", dep, es)
		}
		if started, s1 := findEvent(es, planexec.EventStepStarted, dep), findEvent(es, planexec.EventStepExecuted, "s1"); started < s1 {
			t.Errorf("%s started before s1 finished", dep)
		}
	}
}

// ---- how many at once ----

// cPeakInFlight runs width independent refunds, with edit applied to the
// setup, and returns the most that were ever in flight together. The first
// want calls wait until want are in flight, so the bound is reached if it is
// at least want.
func cPeakInFlight(t *testing.T, edit func(*setup), width, want int) int32 {
	t.Helper()
	var now, peak, entered atomic.Int32
	full := cNewBarrier(want)
	r := &recorder{fail: func(string, any) error {
		n := now.Add(1)
		defer now.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if entered.Add(1) <= int32(want) {
			if err := full.arrive(); err != nil {
				return err
			}
		}
		// Stay in flight a moment, so that calls that should not overlap
		// would be seen to if they did.
		time.Sleep(2 * time.Millisecond)
		return nil
	}}
	run, _ := newExecutor(t, r, edit)
	res, err := run.Execute(context.Background(), cWide(width))
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if !res.Complete || len(r.Calls()) != width {
		t.Errorf("complete %v, %d calls; want all %d", res.Complete, len(r.Calls()), width)
	}
	return peak.Load()
}

// cConcurrency sets Config.Concurrency.
func cConcurrency(n int) func(*setup) {
	return func(s *setup) { s.Concurrency = n }
}

func TestConcurrencyOneRunsOneStepAtATime(t *testing.T) {
	if peak := cPeakInFlight(t, cConcurrency(1), 10, 1); peak != 1 {
		t.Errorf("%d steps were in flight together under Concurrency 1", peak)
	}
}

func TestConcurrencyThreeKeepsThreeStepsInFlightAndNeverMore(t *testing.T) {
	if peak := cPeakInFlight(t, cConcurrency(3), 10, 3); peak != 3 {
		t.Errorf("peak in flight = %d, want exactly 3", peak)
	}
}

func TestTheDefaultConcurrencyIsMaxSteps(t *testing.T) {
	// The widest plan the default limits accept runs all at once.
	if peak := cPeakInFlight(t, nil, 24, 24); peak != 24 {
		t.Errorf("peak in flight = %d, want all 24 steps of the widest plan", peak)
	}
	// Raising MaxSteps raises the default with it.
	if peak := cPeakInFlight(t, func(s *setup) { s.Limits.MaxSteps = 30 }, 30, 30); peak != 30 {
		t.Errorf("peak in flight = %d with MaxSteps 30, want 30", peak)
	}
}

func TestTheDefaultConcurrencyDoesNotHoldAWidePlanBack(t *testing.T) {
	// Each of ten independent steps waits until all ten have started: under
	// any bound below ten they would never all start, and each would fail
	// after patience.
	const width = 10
	all := cNewBarrier(width)
	r := &recorder{fail: func(string, any) error { return all.arrive() }}
	run, _ := newExecutor(t, r, nil)
	res, err := run.Execute(context.Background(), cWide(width))
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if !res.Complete || len(r.Calls()) != width {
		t.Errorf("complete %v, %d calls; want all %d", res.Complete, len(r.Calls()), width)
	}
	if n := count(run.Events(), planexec.EventStepExecuted); n != width {
		t.Errorf("%d STEP_EXECUTED events, want %d", n, width)
	}
}

// ---- failures ----

func TestAFailedStepStopsItsDependentsWhileRunningStepsFinishAndAreRecorded(t *testing.T) {
	errNoFlights := errors.New("no flights")
	s3Started := make(chan struct{})
	s1Failed := make(chan struct{})
	var once sync.Once
	r := &recorder{fail: func(tool string, args any) error {
		switch cOrigin(args) {
		case "LHR": // s1
			if err := cAwait(s3Started, "s3 never started"); err != nil {
				return err
			}
			return errNoFlights
		case "LGW": // s3, slow: it finishes after s1 failed
			close(s3Started)
			return cAwait(s1Failed, "s1 never failed")
		}
		return nil
	}}
	run, _ := newExecutor(t, r, func(c *setup) {
		c.Observer = func(e planexec.Event) {
			if e.Kind == planexec.EventStepFailed && e.StepID == "s1" {
				once.Do(func() { close(s1Failed) })
			}
		}
	})

	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		cSearch("s1", "LHR"),
		cRefund("s2", "o-1", "5", "GBP", "s1"),
		cSearch("s3", "LGW"),
	}})

	var se *planexec.StepError
	if !errors.As(err, &se) || se.Step != "s1" || se.Tool != "search_flights" {
		t.Fatalf("err = %v, want a *StepError for s1", err)
	}
	if !errors.Is(err, errNoFlights) {
		t.Errorf("err = %v does not wrap the tool's error", err)
	}
	if slices.Contains(toolNames(r.Calls()), "refund") {
		t.Errorf("s2 ran after the step it depends on failed: %v", toolNames(r.Calls()))
	}
	if res == nil {
		t.Fatal("no result")
	}
	if res.Complete {
		t.Error("a failed run is Complete")
	}
	if got := res.Steps["s3"].Status; got != planexec.StepDone {
		t.Errorf("s3, running when s1 failed, has status %q, want done", got)
	}
	if got := res.Steps["s1"]; got.Status != planexec.StepFailed || !errors.Is(got.Err, errNoFlights) {
		t.Errorf("s1 = %+v, want failed with the tool's error", got)
	}
	if _, ok := res.Steps["s2"]; ok {
		t.Errorf("s2 is in the result: %+v", res.Steps["s2"])
	}
	es := run.Events()
	if findEvent(es, planexec.EventStepExecuted, "s3") < 0 || findEvent(es, planexec.EventStepStarted, "s2") >= 0 {
		t.Errorf("want s3 executed and s2 never started: %v", kinds(es))
	}
	cLastKind(t, es, planexec.EventPlanFailed)
}

func TestAFailedStepLeavesStepsWaitingForASlotUndispatched(t *testing.T) {
	errNoFlights := errors.New("no flights")
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			return errNoFlights
		}
		return nil
	}}
	// One slot: s1 holds it and fails; the independent refunds behind it are
	// ready but must not be dispatched.
	run, _ := newExecutor(t, r, func(c *setup) { c.Concurrency = 1 })
	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		cSearch("s1", "LHR"),
		cRefund("s2", "o-2", "5", "GBP"),
		cRefund("s3", "o-3", "5", "GBP"),
	}})
	if !errors.Is(err, errNoFlights) {
		t.Fatalf("err = %v, want the search failure", err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want nothing dispatched after the failure", got)
	}
	if len(res.Steps) != 1 || res.Complete {
		t.Errorf("result: %d steps, complete %v", len(res.Steps), res.Complete)
	}
}

func TestSeveralFailuresAreAllReturned(t *testing.T) {
	errLHR, errLGW := errors.New("LHR is closed"), errors.New("LGW is closed")
	both := cNewBarrier(2)
	r := &recorder{fail: func(_ string, args any) error {
		if err := both.arrive(); err != nil {
			return err
		}
		if cOrigin(args) == "LHR" {
			return errLHR
		}
		return errLGW
	}}
	run, _ := newExecutor(t, r, nil)

	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{cSearch("s1", "LHR"), cSearch("s2", "LGW")}})

	if !errors.Is(err, errLHR) || !errors.Is(err, errLGW) {
		t.Fatalf("err = %v, want both failures", err)
	}
	var steps []string
	for _, se := range cStepErrors(err) {
		steps = append(steps, se.Step)
	}
	slices.Sort(steps)
	if !slices.Equal(steps, []string{"s1", "s2"}) {
		t.Errorf("step errors for %v, want s1 and s2", steps)
	}
	if res.Steps["s1"].Status != planexec.StepFailed || res.Steps["s2"].Status != planexec.StepFailed {
		t.Errorf("result steps = %+v", res.Steps)
	}
	if n := count(run.Events(), planexec.EventStepFailed); n != 2 {
		t.Errorf("%d STEP_FAILED events, want 2", n)
	}
}

func TestCancellingTheContextStopsTheRunAndItsDependents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	var once sync.Once
	// The search runs until its context is cancelled.
	r := &recorder{delay: time.Hour}
	run, _ := newExecutor(t, r, func(c *setup) {
		c.Observer = func(e planexec.Event) {
			if e.Kind == planexec.EventStepStarted && e.StepID == "s1" {
				once.Do(func() { close(started) })
			}
		}
	})

	type outcome struct {
		res *planexec.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := run.Execute(ctx, planexec.Plan{Steps: []planexec.Step{
			cSearch("s1", "LHR"),
			cRefund("s2", "o-1", "5", "GBP", "s1"),
		}})
		done <- outcome{res, err}
	}()
	if err := cAwait(started, "s1 never started"); err != nil {
		t.Fatal(err)
	}
	cancel()

	var out outcome
	select {
	case out = <-done:
	case <-time.After(patience):
		t.Fatal("Execute did not return after its context was cancelled")
	}
	if !errors.Is(out.err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", out.err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want the search only", got)
	}
	if out.res == nil || out.res.Complete || out.res.Steps["s1"].Status == planexec.StepDone {
		t.Errorf("result = %+v, want s1 not done and the run incomplete", out.res)
	}
	es := run.Events()
	if findEvent(es, planexec.EventStepStarted, "s2") >= 0 {
		t.Errorf("s2 started: %v", kinds(es))
	}
	cLastKind(t, es, planexec.EventPlanFailed)
}

func TestAPanickingToolBecomesAStepError(t *testing.T) {
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "refund" {
			panic("the card reader caught fire")
		}
		return nil
	}}
	run, _ := newExecutor(t, r, nil)

	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		cRefund("s1", "o-1", "5", "GBP"),
		cSearch("s2", "LHR", "s1"),
	}})

	var se *planexec.StepError
	if !errors.As(err, &se) || se.Step != "s1" || se.Tool != "refund" || se.Err == nil {
		t.Fatalf("err = %v, want a *StepError for s1", err)
	}
	if res.Steps["s1"].Status != planexec.StepFailed {
		t.Errorf("s1 = %+v, want failed", res.Steps["s1"])
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"refund"}) {
		t.Errorf("calls = %v, want the refund only", got)
	}
	es := run.Events()
	if findEvent(es, planexec.EventStepFailed, "s1") < 0 {
		t.Errorf("no STEP_FAILED for s1: %v", kinds(es))
	}
	cLastKind(t, es, planexec.EventPlanFailed)
}

// ---- results ----

func TestTheResultHoldsEachStepsOutcomeAndIsCompleteWhenAllFinished(t *testing.T) {
	run, _ := newExecutor(t, &recorder{}, nil)
	res, err := run.Execute(context.Background(), tripPlan())
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if !res.Complete || res.RunID != "run-1" || res.PlanID == "" || res.Revision != 1 || len(res.Steps) != 2 {
		t.Errorf("result = %+v", res)
	}
	var flights []string
	if err := res.Outcome("s1", &flights); err != nil || !slices.Equal(flights, []string{"BA117", "VS3"}) {
		t.Errorf("s1 outcome = %v, %v", flights, err)
	}
	var pnr string
	if err := res.Outcome("s2", &pnr); err != nil || pnr != "PNR-BA117" {
		t.Errorf("s2 outcome = %q, %v", pnr, err)
	}
	for id, s := range res.Steps {
		if s.Replayed || s.Status != planexec.StepDone || s.Err != nil {
			t.Errorf("%s = %+v, want done and not replayed on a first run", id, s)
		}
	}
	if res.Steps["s1"].Tool != "search_flights" || res.Steps["s2"].Tool != "book_flight" {
		t.Errorf("tools = %q, %q", res.Steps["s1"].Tool, res.Steps["s2"].Tool)
	}
	if err := res.Outcome("s9", &pnr); err == nil {
		t.Error("Outcome of a step nobody planned succeeded")
	}
}

func TestAnIncompleteResultHasNoOutcomeForTheStepsThatDidNotFinish(t *testing.T) {
	errDeclined := errors.New("card declined")
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "refund" {
			return errDeclined
		}
		return nil
	}}
	run, _ := newExecutor(t, r, nil)
	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		cSearch("s1", "LHR"),
		cRefund("s2", "o-1", "5", "GBP", "s1"),
		cSearch("s3", "LGW", "s2"),
	}})
	if !errors.Is(err, errDeclined) {
		t.Fatalf("err = %v, want the refund's failure", err)
	}
	if res.Complete {
		t.Error("Complete with a failed step")
	}
	var flights []string
	if err := res.Outcome("s1", &flights); err != nil || len(flights) != 2 {
		t.Errorf("s1 outcome = %v, %v", flights, err)
	}
	var s string
	if err := res.Outcome("s2", &s); err == nil {
		t.Error("a failed step has an outcome")
	}
	if err := res.Outcome("s3", &s); err == nil {
		t.Error("a step that never ran has an outcome")
	}
	if got := res.Steps["s2"]; got.Status != planexec.StepFailed || !errors.Is(got.Err, errDeclined) {
		t.Errorf("s2 = %+v", got)
	}
}

// ---- what a tool's context says ----

func TestTheIdempotencyKeyReachesTheToolAndIsStable(t *testing.T) {
	keyOf := func(runID, args string) (string, bool) {
		t.Helper()
		r := &recorder{}
		run, _ := newExecutor(t, r, func(c *setup) { c.Delegation.RunID = runID })
		if _, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{step("s1", "book_flight", args)}}); err != nil {
			t.Fatalf("Execute: %v", err)
		}
		calls := r.Calls()
		if len(calls) != 1 {
			t.Fatalf("%d calls", len(calls))
		}
		// The recorder asks planexec.IdempotencyKey inside the tool.
		return calls[0].Key, calls[0].Key != ""
	}

	a, ok := keyOf("run-1", `{"flight":"BA117","seats":1}`)
	if !ok {
		t.Fatal("the tool got no idempotency key")
	}
	if b, _ := keyOf("run-1", `{ "seats": 1, "flight": "BA117" }`); b != a {
		t.Errorf("the same effect in another executor of the run has key %q, want %q", b, a)
	}
	if b, _ := keyOf("run-1", `{"flight":"BA117","seats":1,"note":"window seat"}`); b != a {
		t.Errorf("a note, not a key argument, changed the key: %q vs %q", b, a)
	}
	if b, _ := keyOf("run-1", `{"flight":"BA117","seats":2}`); b == a {
		t.Error("two seats have the key of one")
	}
	if b, _ := keyOf("run-2", `{"flight":"BA117","seats":1}`); b == a {
		t.Error("another run has the same key")
	}
	if _, ok := planexec.IdempotencyKey(context.Background()); ok {
		t.Error("IdempotencyKey reports a key outside any step")
	}
}

// cStepSeer is an executor with one search tool that remembers, by origin,
// what CurrentStep told it, and a run of it for run-7 of tenant acme, user
// dana.
func cStepSeer(t *testing.T) (*planexec.Run, func() map[string]planexec.StepInfo) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]planexec.StepInfo{}
	search := planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s Search) ([]string, error) {
		info, ok := planexec.CurrentStep(ctx)
		if !ok {
			return nil, errors.New("no current step")
		}
		mu.Lock()
		seen[s.Origin] = info
		mu.Unlock()
		return nil, nil
	})
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{search}})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-7", Tenant: "acme", User: "dana", Agent: "courier"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return run, func() map[string]planexec.StepInfo {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
}

func TestCurrentStepTellsTheToolWhichStepItRunsFor(t *testing.T) {
	run, seen := cStepSeer(t)
	res, err := run.Execute(context.Background(), planexec.Plan{ID: "plan-x", Revision: 3, Steps: []planexec.Step{
		cSearch("first", "LHR"),
		cSearch("second", "LGW", "first"),
	}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	for origin, want := range map[string]planexec.StepInfo{
		"LHR": {RunID: "run-7", Tenant: "acme", PlanID: "plan-x", Revision: 3, StepID: "first", Tool: "search_flights"},
		"LGW": {RunID: "run-7", Tenant: "acme", PlanID: "plan-x", Revision: 3, StepID: "second", Tool: "search_flights"},
	} {
		got := seen()[origin]
		got.User = "" // see TestCurrentStepNamesTheUserTheRunActsFor
		if got != want {
			t.Errorf("the %s search saw %+v, want %+v", origin, got, want)
		}
	}
	if res.PlanID != "plan-x" || res.Revision != 3 {
		t.Errorf("result names plan %q rev %d", res.PlanID, res.Revision)
	}
	if _, ok := planexec.CurrentStep(context.Background()); ok {
		t.Error("CurrentStep reports a step outside any step")
	}
}

func TestCurrentStepNamesTheUserTheRunActsFor(t *testing.T) {
	run, seen := cStepSeer(t)
	if _, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{cSearch("s1", "LHR")}}); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if got := seen()["LHR"].User; got != "dana" {
		t.Errorf("StepInfo.User = %q, want the delegation's user %q", got, "dana")
	}
}

func TestAStepPastItsTimeoutFailsAndSaysSo(t *testing.T) {
	r := &recorder{delay: time.Second}
	run, _ := newExecutor(t, r, func(s *setup) { s.StepTimeout = 20 * time.Millisecond })
	start := time.Now()
	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`)}})
	if !errors.Is(err, planexec.ErrStepTimeout) || res.Steps["s1"].Status != planexec.StepFailed {
		t.Fatalf("Execute: %+v, %v; want the step failed with ErrStepTimeout", res, err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("the run took %v: the timeout did not stop the tool", took)
	}
	if i := findEvent(run.Events(), planexec.EventStepFailed, "s1"); i < 0 || !strings.Contains(run.Events()[i].Detail, "timed out") {
		t.Errorf("events %v", run.Events())
	}
}
