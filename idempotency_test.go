package planexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
)

// ---- helpers (prefixed i) ----

// iLedgerEntry is a reversible effect whose whole argument set is its key:
// a decimal amount and a 64-bit count, so numbers reach the key exactly.
type iLedgerEntry struct {
	Account string          `json:"account"`
	Amount  decimal.Decimal `json:"amount"`
	Units   int64           `json:"units"`
}

var (
	iDebitContract  = planexec.MustContract[iLedgerEntry]("i_debit")
	iCreditContract = planexec.MustContract[iLedgerEntry]("i_credit")
)

// iWithLedger adds two ledger tools taking the same arguments to the
// executor newExecutor builds.
func iWithLedger(r *recorder) func(*planexec.Config) {
	return func(cfg *planexec.Config) {
		for _, name := range []string{"i_debit", "i_credit"} {
			cfg.Tools = append(cfg.Tools, planexec.NewTool(name, "Move money.", func(ctx context.Context, e iLedgerEntry) (string, error) {
				return "ok " + name, r.record(ctx, name, e)
			}))
			cfg.Agent.Tools = append(cfg.Agent.Tools, name)
		}
		cfg.Contracts = append(cfg.Contracts, iDebitContract, iCreditContract)
	}
}

// iRun sets the run's tenant and id.
func iRun(tenant, runID string) func(*planexec.Config) {
	return func(cfg *planexec.Config) {
		cfg.Delegation.Tenant = tenant
		cfg.Delegation.RunID = runID
	}
}

// iOne is a plan of one step.
func iOne(s planexec.Step) planexec.Plan {
	return planexec.Plan{Goal: "one effect", Steps: []planexec.Step{s}}
}

// iKeySeen runs one step, on a fresh idempotency store, for tenant and run,
// and returns the key the tool was called with.
func iKeySeen(t *testing.T, tenant, runID string, s planexec.Step) string {
	t.Helper()
	r := &recorder{}
	ex, _ := newExecutor(t, r, edits(iWithLedger(r), iRun(tenant, runID), withIdempotency(&planexec.MemoryIdempotencyStore{})))
	if _, err := ex.Execute(context.Background(), iOne(s)); err != nil {
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

// iCountingStore counts lease renewals of a memory store.
type iCountingStore struct {
	*planexec.MemoryIdempotencyStore
	extends atomic.Int64
}

func (s *iCountingStore) Extend(ctx context.Context, key planexec.Key, epoch int64, lease time.Duration) error {
	s.extends.Add(1)
	return s.MemoryIdempotencyStore.Extend(ctx, key, epoch, lease)
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
		ex, _ := newExecutor(t, r, withIdempotency(&planexec.MemoryIdempotencyStore{}))
		if _, err := ex.Execute(context.Background(), iOne(step("b1", "book_flight", args))); err != nil {
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

func TestAToolSeesNoKeyWithoutAnIdempotencyStore(t *testing.T) {
	r := &recorder{}
	ex, _ := newExecutor(t, r, nil)
	if _, err := ex.Execute(context.Background(), iOne(step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`))); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	calls := r.Calls()
	if len(calls) != 1 {
		t.Fatalf("want one call, got %v", toolNames(calls))
	}
	if calls[0].Key != "" {
		t.Fatalf("the tool saw key %q with no idempotency store", calls[0].Key)
	}
	if k, ok := planexec.IdempotencyKey(context.Background()); ok || k != "" {
		t.Fatalf("outside a step: IdempotencyKey = %q, %v", k, ok)
	}
}

// ---- repeats ----

func TestARepeatedStepReturnsTheRecordedOutcomeWithoutCallingTheTool(t *testing.T) {
	ctx := context.Background()
	store := &planexec.MemoryIdempotencyStore{}
	r := &recorder{}
	first, _ := newExecutor(t, r, withIdempotency(store))
	want, err := first.Execute(ctx, tripPlan())
	if err != nil {
		t.Fatalf("first Execute: %v", err)
	}
	if got := toolNames(r.Calls()); len(got) != 2 {
		t.Fatalf("first run: want both tools called, got %v", got)
	}

	second, _ := newExecutor(t, r, withIdempotency(store))
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

func TestAKeyClaimedElsewhereIsIndeterminateAndTheToolIsNotCalled(t *testing.T) {
	ctx := context.Background()
	plan := iOne(step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`))

	// Learn the key from a run on another store.
	learn := &recorder{}
	ex0, _ := newExecutor(t, learn, withIdempotency(&planexec.MemoryIdempotencyStore{}))
	if _, err := ex0.Execute(ctx, plan); err != nil {
		t.Fatalf("learning run: %v", err)
	}
	key := planexec.Key{Tenant: "acme", Digest: learn.Calls()[0].Key}

	store := &planexec.MemoryIdempotencyStore{}
	held, err := store.Claim(ctx, planexec.ClaimRequest{Key: key, RunID: "run-1", StepID: "s1", Tool: "search_flights", Holder: "replica-7", Lease: time.Hour})
	if err != nil || held.State != planexec.ClaimAcquired {
		t.Fatalf("pre-claim: %+v, %v", held, err)
	}

	r := &recorder{}
	ex, _ := newExecutor(t, r, withIdempotency(store))
	res, err := ex.Execute(ctx, plan)
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) {
		t.Fatalf("want *IndeterminateOutcomeError, got %v", err)
	}
	if ioe.InDoubt {
		t.Errorf("a key in flight is reported in doubt")
	}
	if ioe.Holder != "replica-7" || ioe.Step != "s1" || ioe.Tool != "search_flights" || ioe.Key != key {
		t.Errorf("error = %+v, want holder replica-7, step s1, key %v", ioe, key)
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
	if n := count(ex.Events(), planexec.EventStepStarted); n != 0 {
		t.Errorf("%d steps started: %v", n, kinds(ex.Events()))
	}
	if n := count(ex.Events(), planexec.EventStepFailed); n != 1 {
		t.Errorf("want one STEP_FAILED, got %v", kinds(ex.Events()))
	}
}

func TestASecondExecutorOfTheSameRunDoesNotRunAStepStillInFlight(t *testing.T) {
	ctx := context.Background()
	store := &planexec.MemoryIdempotencyStore{}
	gate := newHoldFirst()
	defer gate.open()
	r := &recorder{fail: func(tool string, _ any) error {
		gate.hold()
		return nil
	}}
	plan := iOne(step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`))

	first, _ := newExecutor(t, r, edits(withIdempotency(store), withHolder("worker-a")))
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

	second, _ := newExecutor(t, r, edits(withIdempotency(store), withHolder("worker-b")))
	_, err := second.Execute(ctx, plan)
	gate.open()
	got := <-done

	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) {
		t.Fatalf("second executor: want *IndeterminateOutcomeError, got %v", err)
	}
	if ioe.InDoubt || ioe.Holder != "worker-a" {
		t.Errorf("error = %+v, want held in flight by worker-a", ioe)
	}
	if ioe.LeaseExpires.IsZero() {
		t.Errorf("a key in flight has no lease end")
	}
	if got.err != nil || !got.res.Complete {
		t.Fatalf("first executor: %+v, %v", got.res, got.err)
	}
	if n := callsOf(r, "search_flights"); n != 1 {
		t.Fatalf("search_flights called %d times, want once", n)
	}
}

func TestALongRunningToolKeepsItsClaimByRenewingTheLease(t *testing.T) {
	ctx := context.Background()
	store := &iCountingStore{MemoryIdempotencyStore: &planexec.MemoryIdempotencyStore{}}
	const lease = 45 * time.Millisecond
	gate := newHoldFirst()
	defer gate.open()
	r := &recorder{fail: func(string, any) error {
		gate.hold()
		return nil
	}}
	// search_flights is reversible: a second holder would take it over if
	// the first holder's lease ran out.
	plan := iOne(step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`))
	withLease := func(cfg *planexec.Config) { cfg.Lease = lease }

	first, _ := newExecutor(t, r, edits(withIdempotency(store), withHolder("worker-a"), withLease))
	done := make(chan error, 1)
	go func() {
		_, err := first.Execute(ctx, plan)
		done <- err
	}()
	<-gate.entered
	// Renewals come every third of a lease; after six the tool has run for
	// about two leases, past the first one. Without renewals, give up
	// waiting for them once many leases have passed.
	giveUp := time.After(40 * lease)
wait:
	for store.extends.Load() < 6 {
		select {
		case err := <-done:
			t.Fatalf("the first run ended while its tool was blocked: %v", err)
		case <-giveUp:
			break wait
		case <-time.After(time.Millisecond):
		}
	}

	second, _ := newExecutor(t, r, edits(withIdempotency(store), withHolder("worker-b"), withLease))
	_, err := second.Execute(ctx, plan)
	gate.open()
	if ferr := <-done; ferr != nil {
		t.Errorf("first executor: %v", ferr)
	}

	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) {
		t.Fatalf("second executor: want *IndeterminateOutcomeError (key still held), got %v", err)
	}
	if ioe.InDoubt || ioe.Holder != "worker-a" {
		t.Errorf("error = %+v, want held in flight by worker-a", ioe)
	}
	if n := callsOf(r, "search_flights"); n != 1 {
		t.Fatalf("search_flights ran %d times, want once", n)
	}
	if store.extends.Load() == 0 {
		t.Errorf("the lease was never renewed")
	}
}

func TestAnExpiredClaimIsTakenOverForAReversibleStepButLeftInDoubtForAnIrreversibleOne(t *testing.T) {
	// A holder that crashed: its claim's lease has run out and it never
	// completed or released the key.
	for _, tc := range []struct {
		name    string
		step    planexec.Step
		inDoubt bool
	}{
		{"reversible", step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`), false},
		{"irreversible", step("b1", "book_flight", `{"flight":"BA117","seats":1}`), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			learn := &recorder{}
			ex0, _ := newExecutor(t, learn, withIdempotency(&planexec.MemoryIdempotencyStore{}))
			if _, err := ex0.Execute(ctx, iOne(tc.step)); err != nil {
				t.Fatalf("learning run: %v", err)
			}
			key := planexec.Key{Tenant: "acme", Digest: learn.Calls()[0].Key}

			store := &planexec.MemoryIdempotencyStore{}
			crashed, err := store.Claim(ctx, planexec.ClaimRequest{Key: key, Holder: "crashed-replica", Lease: time.Nanosecond})
			if err != nil || crashed.State != planexec.ClaimAcquired {
				t.Fatalf("pre-claim: %+v, %v", crashed, err)
			}
			for !time.Now().After(crashed.LeaseExpires) {
				time.Sleep(time.Millisecond)
			}

			r := &recorder{}
			ex, _ := newExecutor(t, r, edits(withIdempotency(store), withHolder("worker-b")))
			res, err := ex.Execute(ctx, iOne(tc.step))
			if !tc.inDoubt {
				if err != nil {
					t.Fatalf("want the expired claim taken over, got %v", err)
				}
				if n := len(r.Calls()); n != 1 || res.Steps["s1"].Replayed {
					t.Fatalf("want the tool called once by the new holder, got %v", toolNames(r.Calls()))
				}
				return
			}
			var ioe *planexec.IndeterminateOutcomeError
			if !errors.As(err, &ioe) || !ioe.InDoubt || ioe.Holder != "crashed-replica" {
				t.Fatalf("want *IndeterminateOutcomeError in doubt, left by crashed-replica; got %v", err)
			}
			if n := len(r.Calls()); n != 0 {
				t.Fatalf("the irreversible tool was called %d times after its holder vanished", n)
			}
		})
	}
}

// ---- failures ----

func TestAFailedReversibleStepFreesItsKeySoTheNextRunCallsTheToolAgain(t *testing.T) {
	ctx := context.Background()
	store := &planexec.MemoryIdempotencyStore{}
	boom := errors.New("search backend unavailable")
	r := &recorder{fail: func(tool string, _ any) error { return boom }}
	plan := iOne(step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`))

	first, _ := newExecutor(t, r, withIdempotency(store))
	res, err := first.Execute(ctx, plan)
	var se *planexec.StepError
	if !errors.As(err, &se) || !errors.Is(err, boom) || se.Step != "s1" {
		t.Fatalf("first run: want a *StepError for s1 wrapping the tool's error, got %v", err)
	}
	if got := res.Steps["s1"].Status; got != planexec.StepFailed {
		t.Errorf("s1 status %q, want failed", got)
	}

	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	second, _ := newExecutor(t, r, withIdempotency(store))
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
	store := &planexec.MemoryIdempotencyStore{}
	r := &recorder{fail: func(tool string, _ any) error { return errors.New("gateway timeout") }}
	plan := iOne(step("b1", "book_flight", `{"flight":"BA117","seats":1}`))

	first, _ := newExecutor(t, r, withIdempotency(store))
	res, err := first.Execute(ctx, plan)
	var se *planexec.StepError
	if !errors.As(err, &se) {
		t.Fatalf("first run: want a *StepError, got %v", err)
	}
	if got := res.Steps["b1"].Status; got != planexec.StepInDoubt {
		t.Errorf("b1 status %q, want in_doubt", got)
	}
	seen := r.Calls()[0].Key

	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	second, _ := newExecutor(t, r, withIdempotency(store))
	_, err = second.Execute(ctx, plan)
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) {
		t.Fatalf("second run: want *IndeterminateOutcomeError, got %v", err)
	}
	if !ioe.InDoubt {
		t.Errorf("error = %+v, want InDoubt", ioe)
	}
	if ioe.Key.Digest != seen || ioe.Key.Tenant != "acme" || ioe.Step != "b1" || ioe.Tool != "book_flight" {
		t.Errorf("error = %+v, want key %s of tenant acme for step b1", ioe, seen)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Fatalf("book_flight called %d times, want once: its effect may have landed", n)
	}
}

func TestAnIrreversibleFailureThatWrapsErrNotAppliedFreesItsKey(t *testing.T) {
	ctx := context.Background()
	store := &planexec.MemoryIdempotencyStore{}
	r := &recorder{fail: func(tool string, _ any) error {
		return fmt.Errorf("card declined before the request was sent: %w", planexec.ErrNotApplied)
	}}
	plan := iOne(step("b1", "book_flight", `{"flight":"BA117","seats":1}`))

	first, _ := newExecutor(t, r, withIdempotency(store))
	res, err := first.Execute(ctx, plan)
	if !errors.Is(err, planexec.ErrNotApplied) {
		t.Fatalf("first run: want an error wrapping ErrNotApplied, got %v", err)
	}
	if got := res.Steps["b1"].Status; got != planexec.StepFailed {
		t.Errorf("b1 status %q, want failed (not in doubt)", got)
	}

	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	second, _ := newExecutor(t, r, withIdempotency(store))
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

// iInDoubtBooking leaves book_flight's key in doubt and returns the key.
func iInDoubtBooking(t *testing.T, r *recorder, store planexec.IdempotencyStore, plan planexec.Plan) (*planexec.Executor, planexec.Key) {
	t.Helper()
	ctx := context.Background()
	r.mu.Lock()
	r.fail = func(string, any) error { return errors.New("connection reset") }
	r.mu.Unlock()
	ex, _ := newExecutor(t, r, withIdempotency(store))
	if _, err := ex.Execute(ctx, plan); err == nil {
		t.Fatalf("the failing booking succeeded")
	}
	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	ex, _ = newExecutor(t, r, withIdempotency(store))
	_, err := ex.Execute(ctx, plan)
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) || !ioe.InDoubt {
		t.Fatalf("want the booking in doubt, got %v", err)
	}
	return ex, ioe.Key
}

func TestResolvingAKeyAsAppliedReplaysTheGivenOutcome(t *testing.T) {
	ctx := context.Background()
	store := &planexec.MemoryIdempotencyStore{}
	r := &recorder{}
	plan := iOne(step("b1", "book_flight", `{"flight":"BA117","seats":1}`))
	ex, key := iInDoubtBooking(t, r, store, plan)

	if err := ex.Resolve(ctx, key, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`"PNR-FOUND-BY-OPS"`)}); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	next, _ := newExecutor(t, r, withIdempotency(store))
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
	store := &planexec.MemoryIdempotencyStore{}
	r := &recorder{}
	plan := iOne(step("b1", "book_flight", `{"flight":"BA117","seats":1}`))
	ex, key := iInDoubtBooking(t, r, store, plan)

	if err := ex.Resolve(ctx, key, planexec.Resolution{Applied: false}); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	next, _ := newExecutor(t, r, withIdempotency(store))
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

func TestResolvingAKeyNobodyClaimedIsErrNoRecord(t *testing.T) {
	r := &recorder{}
	ex, _ := newExecutor(t, r, withIdempotency(&planexec.MemoryIdempotencyStore{}))
	err := ex.Resolve(context.Background(), planexec.Key{Tenant: "acme", Digest: "sha256:00"}, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`1`)})
	if !errors.Is(err, planexec.ErrNoRecord) {
		t.Fatalf("want ErrNoRecord, got %v", err)
	}
}

func TestResolveWithoutAnIdempotencyStoreIsAConfigurationError(t *testing.T) {
	r := &recorder{}
	ex, _ := newExecutor(t, r, nil)
	err := ex.Resolve(context.Background(), planexec.Key{Tenant: "acme", Digest: "sha256:00"}, planexec.Resolution{})
	var ce *planexec.ConfigurationError
	if !errors.As(err, &ce) {
		t.Fatalf("want *ConfigurationError, got %v", err)
	}
}
