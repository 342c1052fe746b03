package planexec_test

// An effect is done once: its key is the digest of what it is, a repeat
// replays what was recorded, a key held elsewhere is not run twice, and a
// failure frees the key only when the effect cannot have happened.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// ---- helpers (prefixed i) ----

// iLedgerEntry is a reversible effect whose whole argument set is its key:
// a decimal amount and a 64-bit count, so numbers reach the key exactly.
type iLedgerEntry struct {
	Account string          `json:"account"`
	Amount  decimal.Decimal `json:"amount"`
	Units   int64           `json:"units"`
}

// iWithLedger adds two ledger tools taking the same arguments to the
// executor newExecutor builds.
func iWithLedger(r *recorder) func(*setup) {
	return func(s *setup) {
		for _, name := range []string{"i_debit", "i_credit"} {
			s.Tools = append(s.Tools, planexec.MustTool(name, "Move money.", func(ctx context.Context, e iLedgerEntry) (string, error) {
				return "ok " + name, r.record(ctx, name, e)
			}))
		}
	}
}

// iRun sets the run's tenant and id.
func iRun(tenant, runID string) func(*setup) {
	return func(s *setup) {
		s.Delegation.Tenant = tenant
		s.Delegation.RunID = runID
	}
}

// iOne is a plan of one step.
func iOne(s planexec.Step) planexec.Plan {
	return planexec.Plan{Goal: "one effect", Steps: []planexec.Step{s}}
}

// iSearch is a search step from origin.
func iSearch(id, origin string, deps ...string) planexec.Step {
	return step(id, "search_flights", fmt.Sprintf(`{"origin":%q,"destination":"JFK"}`, origin), deps...)
}

// iBooking is the trip's booking as a step of its own.
func iBooking(id string) planexec.Step {
	return step(id, "book_flight", `{"flight":"BA117","seats":1}`)
}

// iSetFail replaces the recorder's failure hook.
func iSetFail(r *recorder, fail func(tool string, args any) error) {
	r.mu.Lock()
	r.fail = fail
	r.mu.Unlock()
}

// iKeySeen runs one step, on a fresh store, for tenant and run, and returns
// the key the tool was called with.
func iKeySeen(t *testing.T, tenant, runID string, s planexec.Step) string {
	t.Helper()
	r := &recorder{}
	run, _ := newExecutor(t, r, edits(iWithLedger(r), iRun(tenant, runID), withStore(memory.New())))
	if _, err := run.Execute(context.Background(), iOne(s)); err != nil {
		t.Fatalf("Execute %s: %v", s.Arguments, err)
	}
	calls := r.Calls()
	if len(calls) != 1 {
		t.Fatalf("want the tool called once, got %v", toolNames(calls))
	}
	if calls[0].Key == "" {
		t.Fatalf("the tool saw no idempotency key")
	}
	return calls[0].Key
}

// iReplayedExecutions counts STEP_EXECUTED events marked Replayed.
func iReplayedExecutions(es []planexec.Event) int {
	n := 0
	for _, e := range es {
		if e.Kind == planexec.EventStepExecuted && e.Replayed {
			n++
		}
	}
	return n
}

// iLearnKey runs s once on a store of its own and returns the key its tool
// saw: the key the same step has on any store.
func iLearnKey(t *testing.T, s planexec.Step) planexec.Key {
	t.Helper()
	learn := &recorder{}
	run, _ := newExecutor(t, learn, withStore(memory.New()))
	if _, err := run.Execute(context.Background(), iOne(s)); err != nil {
		t.Fatalf("learning run: %v", err)
	}
	return planexec.Key{Tenant: "acme", Digest: learn.Calls()[0].Key}
}

// ---- key derivation ----

func TestAToolSeesTheSameKeyForTheSameArgumentsHoweverTheyAreWritten(t *testing.T) {
	base := iKeySeen(t, "acme", "run-1", step("d1", "i_debit", `{"account":"ACC-9","amount":412.5,"units":3}`))
	for _, args := range []string{
		`{"units":3,"amount":412.5,"account":"ACC-9"}`,                    // another key order
		"{ \"account\" : \"ACC-9\",\n\t\"amount\": 412.5 , \"units\":3 }", // whitespace
		`{"account":"ACC-9","amount":412.50,"units":3}`,                   // trailing zero of a decimal
		`{"account":"ACC-9","amount":4.125e2,"units":3}`,                  // exponent
		`{"account":"ACC-\u0039","amount":412.5,"units":3}`,               // escaped character
	} {
		if got := iKeySeen(t, "acme", "run-1", step("d1", "i_debit", args)); got != base {
			t.Errorf("arguments %s: key %s, want %s (the same effect)", args, got, base)
		}
	}
	// The step id is not part of the effect.
	if got := iKeySeen(t, "acme", "run-1", step("other-id", "i_debit", `{"account":"ACC-9","amount":412.5,"units":3}`)); got != base {
		t.Errorf("another step id: key %s, want %s", got, base)
	}
}

func TestTheKeyDiffersForAnotherTenantRunToolOrArguments(t *testing.T) {
	const args = `{"account":"ACC-9","amount":412.5,"units":3}`
	base := iKeySeen(t, "acme", "run-1", step("d1", "i_debit", args))
	variants := map[string]string{
		"another tenant":   iKeySeen(t, "globex", "run-1", step("d1", "i_debit", args)),
		"another run":      iKeySeen(t, "acme", "run-2", step("d1", "i_debit", args)),
		"another tool":     iKeySeen(t, "acme", "run-1", step("d1", "i_credit", args)),
		"another account":  iKeySeen(t, "acme", "run-1", step("d1", "i_debit", `{"account":"ACC-8","amount":412.5,"units":3}`)),
		"another amount":   iKeySeen(t, "acme", "run-1", step("d1", "i_debit", `{"account":"ACC-9","amount":412.51,"units":3}`)),
		"another quantity": iKeySeen(t, "acme", "run-1", step("d1", "i_debit", `{"account":"ACC-9","amount":412.5,"units":4}`)),
	}
	seen := map[string]string{base: "the base"}
	for what, key := range variants {
		if other, dup := seen[key]; dup {
			t.Errorf("%s gives the same key as %s: %s", what, other, key)
		}
		seen[key] = what
	}
}

func TestOnlyKeyArgumentsDecideTheKey(t *testing.T) {
	// book_flight's contract names flight and seats as its key arguments.
	keyOf := func(args string) string {
		t.Helper()
		r := &recorder{}
		run, _ := newExecutor(t, r, withStore(memory.New()))
		if _, err := run.Execute(context.Background(), iOne(step("b1", "book_flight", args))); err != nil {
			t.Fatalf("Execute %s: %v", args, err)
		}
		calls := r.Calls()
		if len(calls) != 1 || calls[0].Key == "" {
			t.Fatalf("want one call with a key, got %+v", calls)
		}
		return calls[0].Key
	}
	base := keyOf(`{"flight":"BA117","seats":1,"note":"window please"}`)
	if got := keyOf(`{"flight":"BA117","seats":1,"note":"aisle please"}`); got != base {
		t.Errorf("a changed note changed the key: %s, want %s", got, base)
	}
	if got := keyOf(`{"flight":"BA117","seats":1}`); got != base {
		t.Errorf("a missing note changed the key: %s, want %s", got, base)
	}
	if got := keyOf(`{"flight":"BA117","seats":1,"fare":99.99}`); got != base {
		t.Errorf("a fare (not a key argument) changed the key: %s, want %s", got, base)
	}
	if got := keyOf(`{"flight":"BA117","seats":2,"note":"window please"}`); got == base {
		t.Errorf("other seats gave the same key %s", got)
	}
	if got := keyOf(`{"flight":"VS3","seats":1,"note":"window please"}`); got == base {
		t.Errorf("another flight gave the same key %s", got)
	}
}

func TestIntegersBeyondFloatPrecisionGiveDifferentKeys(t *testing.T) {
	// 2^53 and 2^53+1 are the same float64; as int64 arguments they are
	// different effects.
	a := iKeySeen(t, "acme", "run-1", step("d1", "i_debit", `{"account":"ACC-9","amount":1,"units":9007199254740992}`))
	b := iKeySeen(t, "acme", "run-1", step("d1", "i_debit", `{"account":"ACC-9","amount":1,"units":9007199254740993}`))
	if a == b {
		t.Fatalf("2^53 and 2^53+1 share the key %s", a)
	}
}

// ---- one effect twice in a plan ----

func TestTwoStepsWithOneEffectAreRefusedBeforeAnythingRuns(t *testing.T) {
	refused := func(t *testing.T, err error, step, first, tool string) {
		t.Helper()
		var pv *planexec.PlanValidationError
		if !errors.As(err, &pv) || !errors.Is(err, planexec.ReasonDuplicateEffect) {
			t.Fatalf("err = %v, want a duplicate_effect refusal", err)
		}
		if pv.Step != step || pv.Tool != tool {
			t.Errorf("refusal names step %q tool %q, want %s %s", pv.Step, pv.Tool, step, tool)
		}
		if len(pv.Violations) != 1 || pv.Violations[0].Path != "/steps/1" || !strings.Contains(pv.Violations[0].Why, fmt.Sprintf("%q", first)) {
			t.Errorf("violations = %+v, want one at /steps/1 naming step %q", pv.Violations, first)
		}
	}

	searches := planexec.Plan{Steps: []planexec.Step{iSearch("s1", "LHR"), iSearch("s2", "LHR")}}
	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(memory.New()))
	refused(t, run.Validate(searches), "s2", "s1", "search_flights")

	res, err := run.Execute(context.Background(), searches)
	refused(t, err, "s2", "s1", "search_flights")
	if res != nil {
		t.Errorf("result = %+v, want none: nothing ran", res)
	}
	if cs := r.Calls(); len(cs) != 0 {
		t.Errorf("tools were called: %v", toolNames(cs))
	}
	es := run.Events()
	if i := findEvent(es, planexec.EventPlanRefused, ""); i < 0 || es[i].Reason != planexec.ReasonDuplicateEffect {
		t.Errorf("no PLAN_REFUSED for duplicate_effect: %+v", es)
	}
	if n := count(es, planexec.EventStepStarted); n != 0 {
		t.Errorf("%d steps started", n)
	}

	// book_flight's key arguments are the flight and the seats: the note is
	// not part of the effect.
	notes := planexec.Plan{Steps: []planexec.Step{
		step("b1", "book_flight", `{"flight":"BA117","seats":1,"note":"window please"}`),
		step("b2", "book_flight", `{"flight":"BA117","seats":1,"note":"aisle please"}`),
	}}
	refused(t, run.Validate(notes), "b2", "b1", "book_flight")
	seats := planexec.Plan{Steps: []planexec.Step{
		step("b1", "book_flight", `{"flight":"BA117","seats":1,"note":"window please"}`),
		step("b2", "book_flight", `{"flight":"BA117","seats":2,"note":"window please"}`),
	}}
	if err := run.Validate(seats); err != nil {
		t.Errorf("bookings of other seats were refused: %v", err)
	}
}

// ---- repeats ----

func TestARepeatedStepReturnsTheRecordedOutcomeWithoutCallingTheTool(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	r := &recorder{}
	first, _ := newExecutor(t, r, withStore(db))
	want, err := first.Execute(ctx, tripPlan())
	if err != nil {
		t.Fatalf("first Execute: %v", err)
	}
	if got := toolNames(r.Calls()); len(got) != 2 {
		t.Fatalf("first run: want both tools called, got %v", got)
	}

	second, _ := newExecutor(t, r, withStore(db))
	res, err := second.Execute(ctx, tripPlan())
	if err != nil {
		t.Fatalf("second Execute: %v", err)
	}
	if got := toolNames(r.Calls()); len(got) != 2 {
		t.Fatalf("the repeat called tools again: %v", got)
	}
	if !res.Complete {
		t.Errorf("the repeat is not complete")
	}
	for _, id := range []string{"s1", "s2"} {
		sr := res.Steps[id]
		if !sr.Replayed || sr.Status != planexec.StepDone {
			t.Errorf("step %s: status %q replayed %v, want done and replayed", id, sr.Status, sr.Replayed)
		}
		if string(sr.Outcome) != string(want.Steps[id].Outcome) {
			t.Errorf("step %s replayed %s, want the recorded %s", id, sr.Outcome, want.Steps[id].Outcome)
		}
		if want.Steps[id].Replayed {
			t.Errorf("step %s of the first run is marked replayed", id)
		}
	}
	var pnr string
	if err := res.Outcome("s2", &pnr); err != nil || pnr != "PNR-BA117" {
		t.Errorf("replayed booking = %q, %v; want PNR-BA117", pnr, err)
	}
	es := second.Events()
	if n := iReplayedExecutions(es); n != 2 {
		t.Errorf("want 2 replayed STEP_EXECUTED events, got %d: %v", n, kinds(es))
	}
	if n := count(es, planexec.EventStepStarted); n != 0 {
		t.Errorf("the repeat started %d steps: %v", n, kinds(es))
	}
}

// ---- keys held elsewhere ----

func TestAKeyClaimedElsewhereIsInFlightAndTheToolIsNotCalled(t *testing.T) {
	ctx := context.Background()
	plan := iOne(iSearch("s1", "LHR"))
	key := iLearnKey(t, plan.Steps[0])

	db := memory.New()
	held, err := db.Claim(ctx, store.ClaimRequest{Key: key, RunID: "run-1", StepID: "s1", Tool: "search_flights", Holder: "replica-7", Lease: time.Hour})
	if err != nil || held.State != store.ClaimAcquired {
		t.Fatalf("pre-claim: %+v, %v", held, err)
	}

	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(db))
	res, err := run.Execute(ctx, plan)
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) {
		t.Fatalf("want *IndeterminateOutcomeError, got %v", err)
	}
	if ioe.InDoubt || !errors.Is(err, planexec.ErrInFlight) || errors.Is(err, planexec.ErrInDoubt) {
		t.Errorf("a key in flight is not reported as in flight only: %v", err)
	}
	if ioe.Holder != "replica-7" || ioe.Step != "s1" || ioe.Tool != "search_flights" || ioe.Key != key || ioe.RunID != "run-1" {
		t.Errorf("error = %+v, want holder replica-7, run-1, step s1, key %v", ioe, key)
	}
	if !ioe.LeaseExpires.Equal(held.LeaseExpires) {
		t.Errorf("LeaseExpires = %v, want the holder's %v", ioe.LeaseExpires, held.LeaseExpires)
	}
	if n := len(r.Calls()); n != 0 {
		t.Errorf("the tool was called %d times while another holder had its key", n)
	}
	if res == nil || res.Complete {
		t.Errorf("result = %+v, want an incomplete result", res)
	}
	if n := count(run.Events(), planexec.EventStepStarted); n != 0 {
		t.Errorf("%d steps started: %v", n, kinds(run.Events()))
	}
	if n := count(run.Events(), planexec.EventStepFailed); n != 1 {
		t.Errorf("want one STEP_FAILED, got %v", kinds(run.Events()))
	}
}

func TestASecondExecutionOfTheSameRunWaitsForTheFirst(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	gate := newHoldFirst()
	defer gate.open()
	r := &recorder{fail: func(tool string, _ any) error {
		gate.hold()
		return nil
	}}
	plan := iOne(iSearch("s1", "LHR"))

	first, _ := newExecutor(t, r, edits(withStore(db), withHolder("worker-a")))
	type outcome struct {
		res *planexec.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := first.Execute(ctx, plan)
		done <- outcome{res, err}
	}()
	<-gate.entered

	// Another replica's execution of the run finds it held, and touches
	// nothing: not the run's record, not the step in flight.
	second, _ := newExecutor(t, r, edits(withStore(db), withHolder("worker-b")))
	_, err := second.Execute(ctx, plan)
	gate.open()
	got := <-done

	if !errors.Is(err, planexec.ErrRunBusy) || planexec.StatusOf(err) != planexec.RunRunning {
		t.Fatalf("second executor: %v, want ErrRunBusy: the run is held by the first", err)
	}
	if got.err != nil || !got.res.Complete {
		t.Fatalf("first executor: %+v, %v", got.res, got.err)
	}
	if n := callsOf(r, "search_flights"); n != 1 {
		t.Fatalf("search_flights called %d times, want once", n)
	}
}

func TestAnotherRunDoesNotRunAnEffectOncePerTenantStillInFlight(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	gate := newHoldFirst()
	defer gate.open()
	r := &recorder{fail: func(tool string, _ any) error {
		gate.hold()
		return nil
	}}
	perTenant := withContracts(r, map[string][]planexec.ContractOption{"search_flights": {planexec.OncePerTenant()}})
	plan := iOne(iSearch("s1", "LHR"))

	first, _ := newExecutor(t, r, edits(withStore(db), withHolder("worker-a"), perTenant))
	done := make(chan error, 1)
	go func() {
		_, err := first.Execute(ctx, plan)
		done <- err
	}()
	<-gate.entered

	second, _ := newExecutor(t, r, edits(withStore(db), withHolder("worker-b"), perTenant, iRun("acme", "run-2")))
	_, err := second.Execute(ctx, plan)
	gate.open()
	if err := <-done; err != nil {
		t.Fatalf("first executor: %v", err)
	}
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) {
		t.Fatalf("second executor: want *IndeterminateOutcomeError, got %v", err)
	}
	if ioe.InDoubt || !errors.Is(err, planexec.ErrInFlight) || !strings.HasPrefix(ioe.Holder, "worker-a/") {
		t.Errorf("error = %+v, want held in flight by worker-a", ioe)
	}
	if ioe.LeaseExpires.IsZero() {
		t.Errorf("a key in flight has no lease end")
	}
	if n := callsOf(r, "search_flights"); n != 1 {
		t.Fatalf("search_flights called %d times, want once", n)
	}
}

// ---- failures ----

func TestAFailedReversibleStepFreesItsKeySoTheNextRunCallsTheToolAgain(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	boom := errors.New("search backend unavailable")
	r := &recorder{fail: func(tool string, _ any) error { return boom }}
	plan := iOne(iSearch("s1", "LHR"))

	first, _ := newExecutor(t, r, withStore(db))
	res, err := first.Execute(ctx, plan)
	var se *planexec.StepError
	if !errors.As(err, &se) || !errors.Is(err, boom) || se.Step != "s1" {
		t.Fatalf("first run: want a *StepError for s1 wrapping the tool's error, got %v", err)
	}
	if errors.Is(err, planexec.ErrInDoubt) {
		t.Errorf("a reversible failure is reported in doubt: %v", err)
	}
	if got := res.Steps["s1"].Status; got != planexec.StepFailed {
		t.Errorf("s1 status %q, want failed", got)
	}

	iSetFail(r, nil)
	second, _ := newExecutor(t, r, withStore(db))
	res, err = second.Execute(ctx, plan)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if n := callsOf(r, "search_flights"); n != 2 {
		t.Fatalf("search_flights called %d times, want 2 (the failure freed the key)", n)
	}
	if sr := res.Steps["s1"]; sr.Replayed || sr.Status != planexec.StepDone {
		t.Errorf("s1 = %+v, want done by a new call", sr)
	}
}

func TestAFailedIrreversibleStepLeavesItsKeyInDoubtAndIsNotCalledAgain(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	r := &recorder{fail: func(tool string, _ any) error { return errors.New("gateway timeout") }}
	plan := iOne(iBooking("b1"))

	first, _ := newExecutor(t, r, withStore(db))
	res, err := first.Execute(ctx, plan)
	var se *planexec.StepError
	if !errors.As(err, &se) {
		t.Fatalf("first run: want a *StepError, got %v", err)
	}
	if got := res.Steps["b1"].Status; got != planexec.StepInDoubt {
		t.Errorf("b1 status %q, want in_doubt", got)
	}
	seen := r.Calls()[0].Key

	iSetFail(r, nil)
	second, _ := newExecutor(t, r, withStore(db))
	_, err = second.Execute(ctx, plan)
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) {
		t.Fatalf("second run: want *IndeterminateOutcomeError, got %v", err)
	}
	if !ioe.InDoubt || !errors.Is(err, planexec.ErrInDoubt) || errors.Is(err, planexec.ErrInFlight) {
		t.Errorf("error = %+v, want in doubt only", ioe)
	}
	if ioe.Key.Digest != seen || ioe.Key.Tenant != "acme" || ioe.Step != "b1" || ioe.Tool != "book_flight" || ioe.RunID != "run-1" {
		t.Errorf("error = %+v, want key %s of tenant acme for step b1 of run-1", ioe, seen)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Fatalf("book_flight called %d times, want once: its effect may have landed", n)
	}
}

func TestAnIrreversibleFailureThatWrapsErrNotAppliedFreesItsKey(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	r := &recorder{fail: func(tool string, _ any) error {
		return fmt.Errorf("card declined before the request was sent: %w", planexec.ErrNotApplied)
	}}
	plan := iOne(iBooking("b1"))

	first, _ := newExecutor(t, r, withStore(db))
	res, err := first.Execute(ctx, plan)
	if !errors.Is(err, planexec.ErrNotApplied) || errors.Is(err, planexec.ErrInDoubt) {
		t.Fatalf("first run: want an error wrapping ErrNotApplied, not in doubt; got %v", err)
	}
	if got := res.Steps["b1"].Status; got != planexec.StepFailed {
		t.Errorf("b1 status %q, want failed (not in doubt)", got)
	}

	iSetFail(r, nil)
	second, _ := newExecutor(t, r, withStore(db))
	res, err = second.Execute(ctx, plan)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if n := callsOf(r, "book_flight"); n != 2 {
		t.Fatalf("book_flight called %d times, want 2", n)
	}
	if sr := res.Steps["b1"]; sr.Replayed || string(sr.Outcome) != `"PNR-BA117"` {
		t.Errorf("b1 = %+v, want a new booking", sr)
	}
}

func TestTheFirstFailureOfAnIrreversibleStepCarriesItsKeyAndTheToolsError(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*setup)
	}{
		{"with a store of claims", withStore(memory.New())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			boom := errors.New("gateway timeout")
			r := &recorder{fail: func(tool string, _ any) error {
				if tool == "book_flight" {
					return boom
				}
				return nil
			}}
			run, _ := newExecutor(t, r, tc.edit)
			res, err := run.Execute(context.Background(), tripPlan())

			var ioe *planexec.IndeterminateOutcomeError
			if !errors.As(err, &ioe) {
				t.Fatalf("err = %v, want an *IndeterminateOutcomeError", err)
			}
			if !ioe.InDoubt || !errors.Is(err, planexec.ErrInDoubt) || ioe.Key.Digest == "" || ioe.Key.Tenant != "acme" || ioe.Step != "s2" || ioe.Tool != "book_flight" || ioe.RunID != "run-1" {
				t.Errorf("error = %+v, want s2 of run-1 in doubt with a key of tenant acme", ioe)
			}
			var se *planexec.StepError
			if !errors.As(err, &se) || se.Step != "s2" || se.Tool != "book_flight" {
				t.Errorf("err = %v, want a *StepError for s2 too", err)
			}
			if !errors.Is(err, boom) {
				t.Errorf("err = %v does not wrap the tool's error", err)
			}
			if res == nil {
				t.Fatal("no result, though s1 ran")
			}
			s2 := res.Steps["s2"]
			if s2.Status != planexec.StepInDoubt || s2.Key != ioe.Key {
				t.Errorf("s2 = %+v, want in_doubt under the error's key %v", s2, ioe.Key)
			}
			if seen := r.Calls()[len(r.Calls())-1].Key; seen != "" && seen != ioe.Key.Digest {
				t.Errorf("the tool ran under key %s, the error names %s", seen, ioe.Key.Digest)
			}
		})
	}
}
