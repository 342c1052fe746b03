package planexec_test

// An effect nobody can vouch for waits for a person: a step held by a live
// holder is waited on (ErrInFlight), a step in doubt is resolved (ErrInDoubt,
// Run.Resolve), and a resolution settles the claim and the step's record so
// the next run replays the outcome or runs the step again.

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// ---- helpers (prefixed resolve) ----

// resolveInDoubtBooking leaves book_flight's key in doubt in store and
// returns a run that found it so, with the key.
func resolveInDoubtBooking(t *testing.T, r *recorder, db store.Store, plan planexec.Plan) (*planexec.Run, planexec.Key) {
	t.Helper()
	ctx := context.Background()
	iSetFail(r, func(string, any) error { return errors.New("connection reset") })
	run, _ := newExecutor(t, r, withStore(db))
	if _, err := run.Execute(ctx, plan); err == nil {
		t.Fatalf("the failing booking succeeded")
	}
	iSetFail(r, nil)
	run, _ = newExecutor(t, r, withStore(db))
	_, err := run.Execute(ctx, plan)
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) || !ioe.InDoubt {
		t.Fatalf("want the booking in doubt, got %v", err)
	}
	return run, ioe.Key
}

// resolveInDoubtPlan books first and searches after, one step at a time, so
// the search is still to run when the booking fails.
func resolveInDoubtPlan() planexec.Plan {
	return planexec.Plan{Goal: "book, then search", Steps: []planexec.Step{iBooking("b1"), iSearch("s2", "LHR")}}
}

// resolveConcurrency bounds how many steps run at once.
func resolveConcurrency(n int) func(*setup) {
	return func(s *setup) { s.Concurrency = n }
}

// resolveInDoubtOnRecord runs resolveInDoubtPlan over a store that keeps
// plans only (no claims), with the booking failing without ErrNotApplied,
// then resumes the run on a second executor, which must refuse to go on. It
// returns that run, the recorder and the key the first run's error carried.
func resolveInDoubtOnRecord(t *testing.T) (*planexec.Run, *recorder, planexec.Key) {
	t.Helper()
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	iSetFail(r, func(tool string, _ any) error {
		if tool == "book_flight" {
			return errors.New("gateway timeout")
		}
		return nil
	})
	first, _ := newExecutor(t, r, edits(withStore(st), resolveConcurrency(1)))
	_, err := first.Execute(ctx, resolveInDoubtPlan())
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) || !ioe.InDoubt || ioe.Key.Digest == "" {
		t.Fatalf("first run: err = %v, want an in-doubt *IndeterminateOutcomeError with a key", err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"book_flight"}) {
		t.Fatalf("first run calls = %v, want the booking only", got)
	}
	iSetFail(r, nil)

	run, _ := newExecutor(t, r, edits(withStore(st), resolveConcurrency(1)))
	res, err := run.Resume(ctx)
	var again *planexec.IndeterminateOutcomeError
	if !errors.As(err, &again) {
		t.Fatalf("Resume: err = %v, want *IndeterminateOutcomeError", err)
	}
	if !again.InDoubt || !errors.Is(err, planexec.ErrInDoubt) || again.Key != ioe.Key || again.Step != "b1" || again.Tool != "book_flight" || again.RunID != "run-1" {
		t.Errorf("Resume: error = %+v, want b1 of run-1 in doubt under key %v", again, ioe.Key)
	}
	if res != nil && len(res.Steps) != 0 {
		t.Errorf("Resume: result = %+v, want nothing run", res)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"book_flight"}) {
		t.Errorf("after Resume, calls = %v: a step in doubt let the run go on", got)
	}
	if n := count(run.Events(), planexec.EventStepStarted); n != 0 {
		t.Errorf("Resume started %d steps: %v", n, kinds(run.Events()))
	}
	return run, r, ioe.Key
}

// ---- wait or resolve ----

func TestAnIndeterminateOutcomeSaysWhetherToWaitOrToResolve(t *testing.T) {
	t.Run("held by a live holder: wait", func(t *testing.T) {
		ctx := context.Background()
		db := memory.New()
		hold := newHoldFirst()
		defer hold.open()
		r := &recorder{fail: func(string, any) error {
			hold.hold()
			return nil
		}}
		plan := iOne(iBooking("b1"))
		// A booking once per tenant: another run meets its key in flight.
		perTenant := withContracts(r, map[string][]planexec.ContractOption{"book_flight": {planexec.Irreversible(), planexec.OncePerTenant()}})
		first, _ := newExecutor(t, r, edits(withStore(db), withHolder("worker-a"), perTenant))
		done := make(chan error, 1)
		go func() {
			_, err := first.Execute(ctx, plan)
			done <- err
		}()
		<-hold.entered

		second, _ := newExecutor(t, r, edits(withStore(db), withHolder("worker-b"), perTenant, iRun("acme", "run-2")))
		_, err := second.Execute(ctx, plan)
		var ioe *planexec.IndeterminateOutcomeError
		if !errors.As(err, &ioe) {
			t.Fatalf("err = %v, want *IndeterminateOutcomeError", err)
		}
		if !errors.Is(err, planexec.ErrInFlight) || errors.Is(err, planexec.ErrInDoubt) || ioe.InDoubt {
			t.Errorf("err = %v, want ErrInFlight (wait) and not ErrInDoubt", err)
		}
		if ioe.RunID != "run-2" || ioe.Step != "b1" {
			t.Errorf("error = %+v, want step b1 of run-2", ioe)
		}
		// Resolving what a live holder is doing is refused: its outcome is
		// about to be known. And only the run that holds the key may.
		for _, res := range []planexec.Resolution{{Applied: false}, {Applied: true, Outcome: json.RawMessage(`"PNR-GUESS"`)}} {
			if err := first.Resolve(ctx, ioe.Key, res); !errors.Is(err, planexec.ErrInFlight) {
				t.Errorf("Resolve(%+v) of a key in flight: want ErrInFlight, got %v", res, err)
			}
			if err := second.Resolve(ctx, ioe.Key, res); !errors.Is(err, planexec.ErrNoRecord) {
				t.Errorf("Resolve(%+v) by a run that does not hold the key: want ErrNoRecord, got %v", res, err)
			}
		}

		hold.open()
		if err := <-done; err != nil {
			t.Fatalf("the holder's run: %v", err)
		}
		third, _ := newExecutor(t, r, edits(withStore(db), perTenant, iRun("acme", "run-3")))
		res, err := third.Execute(ctx, plan)
		if err != nil {
			t.Fatalf("a later run: %v", err)
		}
		if b1 := res.Steps["b1"]; !b1.Replayed || string(b1.Outcome) != `"PNR-BA117"` {
			t.Errorf("b1 = %+v, want the holder's booking replayed, untouched by the refused resolutions", b1)
		}
		if n := callsOf(r, "book_flight"); n != 1 {
			t.Errorf("book_flight called %d times, want once", n)
		}
	})
	t.Run("in doubt: resolve", func(t *testing.T) {
		ctx := context.Background()
		db := memory.New()
		r := &recorder{}
		run, key := resolveInDoubtBooking(t, r, db, iOne(iBooking("b1")))
		_, err := run.Execute(ctx, iOne(iBooking("b1")))
		if !errors.Is(err, planexec.ErrInDoubt) || errors.Is(err, planexec.ErrInFlight) {
			t.Fatalf("err = %v, want ErrInDoubt (resolve) and not ErrInFlight", err)
		}
		if err := run.Resolve(ctx, key, planexec.Resolution{Applied: false}); err != nil {
			t.Fatalf("Resolve of a key in doubt: %v", err)
		}
	})
}

// ---- resolving a key of the store's claims ----

func TestResolvingAKeyAsAppliedReplaysTheGivenOutcome(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	r := &recorder{}
	plan := iOne(iBooking("b1"))
	run, key := resolveInDoubtBooking(t, r, db, plan)

	if err := run.Resolve(ctx, key, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`"PNR-FOUND-BY-OPS"`)}); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	next, _ := newExecutor(t, r, withStore(db))
	res, err := next.Execute(ctx, plan)
	if err != nil {
		t.Fatalf("Execute after resolving: %v", err)
	}
	sr := res.Steps["b1"]
	if !sr.Replayed || sr.Status != planexec.StepDone || string(sr.Outcome) != `"PNR-FOUND-BY-OPS"` {
		t.Errorf("b1 = %+v, want the resolved outcome replayed", sr)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Fatalf("book_flight called %d times, want only the first failed call", n)
	}
}

func TestResolvingAKeyAsNotAppliedLetsTheStepRunAgain(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	r := &recorder{}
	plan := iOne(iBooking("b1"))
	run, key := resolveInDoubtBooking(t, r, db, plan)

	if err := run.Resolve(ctx, key, planexec.Resolution{Applied: false}); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	next, _ := newExecutor(t, r, withStore(db))
	res, err := next.Execute(ctx, plan)
	if err != nil {
		t.Fatalf("Execute after resolving: %v", err)
	}
	if sr := res.Steps["b1"]; sr.Replayed || string(sr.Outcome) != `"PNR-BA117"` {
		t.Errorf("b1 = %+v, want a new booking", sr)
	}
	if n := callsOf(r, "book_flight"); n != 2 {
		t.Fatalf("book_flight called %d times, want 2", n)
	}
}

func TestResolvingAKeyAlreadyDoneIsErrCompletedAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(db))
	res, err := run.Execute(ctx, tripPlan())
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	key := res.Steps["s2"].Key
	for _, rs := range []planexec.Resolution{{Applied: false}, {Applied: true, Outcome: json.RawMessage(`"PNR-OTHER"`)}} {
		if err := run.Resolve(ctx, key, rs); !errors.Is(err, planexec.ErrCompleted) {
			t.Errorf("Resolve(%+v) of a booking done: want ErrCompleted, got %v", rs, err)
		}
	}
	again, _ := newExecutor(t, r, withStore(db))
	res, err = again.Execute(ctx, tripPlan())
	if err != nil {
		t.Fatalf("Execute again: %v", err)
	}
	if s2 := res.Steps["s2"]; !s2.Replayed || string(s2.Outcome) != `"PNR-BA117"` {
		t.Errorf("s2 = %+v, want the booking done replayed", s2)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("book_flight called %d times, want once", n)
	}
}

// ---- resolving a step in doubt on the plan record ----

func TestAStepInDoubtOnThePlanRecordBlocksResumeUntilItIsResolved(t *testing.T) {
	t.Run("resolved as applied", func(t *testing.T) {
		ctx := context.Background()
		run, r, key := resolveInDoubtOnRecord(t)
		if err := run.Resolve(ctx, key, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`"PNR-X"`)}); err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		res, err := run.Resume(ctx)
		if err != nil {
			t.Fatalf("Resume after resolving: %v", err)
		}
		b1 := res.Steps["b1"]
		if !b1.Replayed || b1.Status != planexec.StepDone || string(b1.Outcome) != `"PNR-X"` {
			t.Errorf("b1 = %+v, want the resolved outcome \"PNR-X\" replayed", b1)
		}
		if !res.Complete || res.Steps["s2"].Status != planexec.StepDone {
			t.Errorf("result = %+v, want complete with s2 done", res)
		}
		if n := callsOf(r, "book_flight"); n != 1 {
			t.Errorf("book_flight called %d times, want only the first, failed, call", n)
		}
		if n := callsOf(r, "search_flights"); n != 1 {
			t.Errorf("search_flights called %d times, want once", n)
		}
	})
	t.Run("resolved as not applied", func(t *testing.T) {
		ctx := context.Background()
		run, r, key := resolveInDoubtOnRecord(t)
		if err := run.Resolve(ctx, key, planexec.Resolution{Applied: false}); err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		res, err := run.Resume(ctx)
		if err != nil {
			t.Fatalf("Resume after resolving: %v", err)
		}
		if b1 := res.Steps["b1"]; b1.Replayed || b1.Status != planexec.StepDone || string(b1.Outcome) != `"PNR-BA117"` {
			t.Errorf("b1 = %+v, want a new booking", b1)
		}
		if n := callsOf(r, "book_flight"); n != 2 {
			t.Errorf("book_flight called %d times, want 2 (the effect did not happen the first time)", n)
		}
	})
}

// ---- what Resolve refuses ----

func TestResolvingAKeyNobodyClaimedIsErrNoRecord(t *testing.T) {
	for name, key := range map[string]planexec.Key{
		"an unknown digest":    {Tenant: "acme", Digest: "sha256:00"},
		"another tenant's key": {Tenant: "globex", Digest: "sha256:00"},
	} {
		t.Run(name, func(t *testing.T) {
			run, _ := newExecutor(t, &recorder{}, withStore(memory.New()))
			err := run.Resolve(context.Background(), key, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`1`)})
			if !errors.Is(err, planexec.ErrNoRecord) {
				t.Fatalf("want ErrNoRecord, got %v", err)
			}
		})
	}
}

func TestAResolutionWhoseOutcomeIsNotJSONIsRefusedAndTheKeyStaysInDoubt(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	r := &recorder{}
	plan := iOne(iBooking("b1"))
	run, key := resolveInDoubtBooking(t, r, db, plan)
	err := run.Resolve(ctx, key, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`PNR-FOUND`)})
	if !errors.Is(err, planexec.ErrInvalidDecision) {
		t.Fatalf("want ErrInvalidDecision, got %v", err)
	}
	next, _ := newExecutor(t, r, withStore(db))
	if _, err := next.Execute(ctx, plan); !errors.Is(err, planexec.ErrInDoubt) {
		t.Errorf("after a refused resolution: err = %v, want the booking still in doubt", err)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("book_flight called %d times, want once", n)
	}
}

// A completion can land although its writer saw an error (the connection
// dropped after the commit): the claim says done while the step's record,
// written after the error, says in doubt. The claim is the truth.
func TestResolvingAStepInDoubtWhoseClaimIsDoneSettlesItsRecordFromTheClaim(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(db))
	res, err := run.Execute(ctx, tripPlan())
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	rec, err := db.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	s2 := rec.Steps["s2"]
	s2.Status, s2.Outcome, s2.Error = planexec.StepInDoubt, nil, "recording the outcome failed"
	if err := db.SaveStep(ctx, "acme", "run-1", s2); err != nil {
		t.Fatal(err)
	}
	next, _ := newExecutor(t, r, withStore(db))
	if _, err := next.Resume(ctx); !errors.Is(err, planexec.ErrInDoubt) {
		t.Fatalf("Resume with s2 in doubt on the record: %v, want ErrInDoubt", err)
	}
	// Whoever resolves it is told the effect is on record as done, with
	// either answer, and the record follows the claim.
	if err := next.Resolve(ctx, res.Steps["s2"].Key, planexec.Resolution{Applied: false}); !errors.Is(err, planexec.ErrCompleted) {
		t.Fatalf("Resolve as not applied: %v, want ErrCompleted", err)
	}
	again, err := next.Resume(ctx)
	if err != nil || !again.Complete {
		t.Fatalf("Resume after resolving: %+v, %v", again, err)
	}
	if got := again.Steps["s2"]; !got.Replayed || string(got.Outcome) != `"PNR-BA117"` {
		t.Errorf("s2 = %+v, want the recorded booking replayed", got)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("book_flight called %d times, want once", n)
	}
}
