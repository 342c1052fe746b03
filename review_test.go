package planexec_test

// What the review fixes promise: a step in doubt blocks a resume until it is
// resolved; an in-doubt failure carries its key; lease renewal outlives a
// cancelled caller and a hung store; one effect twice in a plan is refused; a
// tool cannot crash or hang a run by panicking in its outcome or ending its
// goroutine; a cancellation is reported once; grants are re-checked by
// identity and their windows survive a revocation; ceilings count what
// finished before a resume; decisions are re-read before their step and kept
// by the plan store; delegations leave a tool or are refused; a child
// delegation is a run of its own; step records carry their plan, key and
// grant.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
)

// ---- helpers (prefixed rv) ----

// rvSetFail replaces the recorder's failure hook.
func rvSetFail(r *recorder, fail func(tool string, args any) error) {
	r.mu.Lock()
	r.fail = fail
	r.mu.Unlock()
}

func rvLease(d time.Duration) func(*planexec.Config) {
	return func(c *planexec.Config) { c.Lease = d }
}

func rvConcurrency(n int) func(*planexec.Config) {
	return func(c *planexec.Config) { c.Concurrency = n }
}

func rvLadderOf(l *planexec.AutonomyLadder) func(*planexec.Config) {
	return func(c *planexec.Config) { c.Ladder = l }
}

// rvOwnApprovals gives the executor a decision store of its own, shared with
// no other executor.
func rvOwnApprovals(c *planexec.Config) { c.Approvals = &planexec.MemoryApprovalStore{} }

// rvSearch is a search step from origin.
func rvSearch(id, origin string, deps ...string) planexec.Step {
	return step(id, "search_flights", fmt.Sprintf(`{"origin":%q,"destination":"JFK"}`, origin), deps...)
}

// rvRefund is a refund step in GBP.
func rvRefund(id, order, amount string, deps ...string) planexec.Step {
	return step(id, "refund", fmt.Sprintf(`{"order":%q,"amount":%s,"currency":"GBP"}`, order, amount), deps...)
}

// rvLadder is a ladder with a refunds class (amount and currency) holding
// grants.
func rvLadder(t *testing.T, grants ...planexec.Grant) *planexec.AutonomyLadder {
	t.Helper()
	l, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: "refunds", Tools: []string{"refund"}, Amount: "amount", Currency: "currency"})
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

// rvRefundGrant is a refunds grant for acme at level, with a ceiling in GBP
// when ceiling is not "".
func rvRefundGrant(level planexec.Level, ceiling string, window time.Duration) planexec.Grant {
	g := planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: level}
	if ceiling != "" {
		g.Ceiling = &planexec.Ceiling{Amount: decimal.RequireFromString(ceiling), Currency: "GBP", Window: window}
	}
	return g
}

// rvAsked lists the step ids the gate was asked about, in order.
func rvAsked(g *approve) []string {
	var ids []string
	for _, req := range g.Asked() {
		ids = append(ids, req.StepID)
	}
	return ids
}

// rvOutcome is what an Execute or Resume returned.
type rvOutcome struct {
	res *planexec.Result
	err error
}

// rvWithin runs fn and returns what it returned, failing the test if it has
// not returned within patience.
func rvWithin(t *testing.T, what string, fn func() (*planexec.Result, error)) rvOutcome {
	t.Helper()
	done := make(chan rvOutcome, 1)
	go func() {
		res, err := fn()
		done <- rvOutcome{res, err}
	}()
	select {
	case out := <-done:
		return out
	case <-time.After(patience):
		t.Fatalf("%s did not return within %v", what, patience)
		return rvOutcome{}
	}
}

// rvWait waits for ch to close, failing the test after patience.
func rvWait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("%s: gave up after %v", what, patience)
	}
}

// rvCtxStore is a memory idempotency store that, like one across a network,
// refuses any call whose context is already done.
type rvCtxStore struct {
	*planexec.MemoryIdempotencyStore
}

func (s rvCtxStore) Claim(ctx context.Context, req planexec.ClaimRequest) (planexec.Claim, error) {
	if err := ctx.Err(); err != nil {
		return planexec.Claim{}, err
	}
	return s.MemoryIdempotencyStore.Claim(ctx, req)
}

func (s rvCtxStore) Extend(ctx context.Context, key planexec.Key, epoch int64, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.MemoryIdempotencyStore.Extend(ctx, key, epoch, lease)
}

func (s rvCtxStore) Complete(ctx context.Context, key planexec.Key, epoch int64, outcome json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.MemoryIdempotencyStore.Complete(ctx, key, epoch, outcome)
}

func (s rvCtxStore) Release(ctx context.Context, key planexec.Key, epoch int64, inDoubt bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.MemoryIdempotencyStore.Release(ctx, key, epoch, inDoubt)
}

// rvHungStore is a memory idempotency store whose Extend hangs until its
// context is done, as a store behind a dead connection would.
type rvHungStore struct {
	*planexec.MemoryIdempotencyStore
	extending chan struct{} // closed when the first Extend begins
	once      sync.Once
}

func (s *rvHungStore) Extend(ctx context.Context, _ planexec.Key, _ int64, _ time.Duration) error {
	s.once.Do(func() { close(s.extending) })
	<-ctx.Done()
	return ctx.Err()
}

// ---- a step in doubt on the plan record ----

// rvInDoubtPlan books first and searches after, one step at a time, so the
// search is still to run when the booking fails.
func rvInDoubtPlan() planexec.Plan {
	return planexec.Plan{Goal: "book, then search", Steps: []planexec.Step{
		step("b1", "book_flight", `{"flight":"BA117","seats":1}`),
		rvSearch("s2", "LHR"),
	}}
}

// rvInDoubtOnRecord runs rvInDoubtPlan with a plan store and no idempotency
// store, with the booking failing without ErrNotApplied, then resumes the run
// on a second executor, which must refuse to go on. It returns that executor,
// the recorder and the key the first run's error carried.
func rvInDoubtOnRecord(t *testing.T) (*planexec.Executor, *recorder, planexec.Key) {
	t.Helper()
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	r := &recorder{}
	rvSetFail(r, func(tool string, _ any) error {
		if tool == "book_flight" {
			return errors.New("gateway timeout")
		}
		return nil
	})
	first, _ := newExecutor(t, r, edits(withPlans(plans), rvConcurrency(1)))
	_, err := first.Execute(ctx, rvInDoubtPlan())
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) || !ioe.InDoubt || ioe.Key.Digest == "" {
		t.Fatalf("first run: err = %v, want an in-doubt *IndeterminateOutcomeError with a key", err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"book_flight"}) {
		t.Fatalf("first run calls = %v, want the booking only", got)
	}
	rvSetFail(r, nil)

	ex, _ := newExecutor(t, r, edits(withPlans(plans), rvConcurrency(1)))
	res, err := ex.Resume(ctx)
	var again *planexec.IndeterminateOutcomeError
	if !errors.As(err, &again) {
		t.Fatalf("Resume: err = %v, want *IndeterminateOutcomeError", err)
	}
	if !again.InDoubt || again.Key != ioe.Key || again.Step != "b1" || again.Tool != "book_flight" {
		t.Errorf("Resume: error = %+v, want b1 in doubt under key %v", again, ioe.Key)
	}
	if res != nil && len(res.Steps) != 0 {
		t.Errorf("Resume: result = %+v, want nothing run", res)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"book_flight"}) {
		t.Errorf("after Resume, calls = %v: a step in doubt let the run go on", got)
	}
	if n := count(ex.Events(), planexec.EventStepStarted); n != 0 {
		t.Errorf("Resume started %d steps: %v", n, kinds(ex.Events()))
	}
	return ex, r, ioe.Key
}

func TestAStepInDoubtOnThePlanRecordBlocksResumeUntilItIsResolved(t *testing.T) {
	t.Run("resolved as applied", func(t *testing.T) {
		ctx := context.Background()
		ex, r, key := rvInDoubtOnRecord(t)
		if err := ex.Resolve(ctx, key, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`"PNR-X"`)}); err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		res, err := ex.Resume(ctx)
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
		ex, r, key := rvInDoubtOnRecord(t)
		if err := ex.Resolve(ctx, key, planexec.Resolution{Applied: false}); err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		res, err := ex.Resume(ctx)
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

// ---- an in-doubt failure carries its key ----

func TestTheFirstFailureOfAnIrreversibleStepCarriesItsKeyAndTheToolsError(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*planexec.Config)
	}{
		{"with an idempotency store", withIdempotency(&planexec.MemoryIdempotencyStore{})},
		{"with only a plan store", withPlans(&planexec.MemoryPlanStore{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			boom := errors.New("gateway timeout")
			r := &recorder{fail: func(tool string, _ any) error {
				if tool == "book_flight" {
					return boom
				}
				return nil
			}}
			ex, _ := newExecutor(t, r, tc.edit)
			res, err := ex.Execute(context.Background(), tripPlan())

			var ioe *planexec.IndeterminateOutcomeError
			if !errors.As(err, &ioe) {
				t.Fatalf("err = %v, want an *IndeterminateOutcomeError", err)
			}
			if !ioe.InDoubt || ioe.Key.Digest == "" || ioe.Key.Tenant != "acme" || ioe.Step != "s2" || ioe.Tool != "book_flight" {
				t.Errorf("error = %+v, want s2 in doubt with a key of tenant acme", ioe)
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

// ---- lease renewal ----

func TestALeaseIsStillRenewedAfterTheCallerCancelsWhileTheToolRuns(t *testing.T) {
	const lease = 30 * time.Millisecond
	store := rvCtxStore{&planexec.MemoryIdempotencyStore{}}
	hold := newHoldFirst()
	defer hold.open()
	// The tool does not watch its context: it finishes its work whatever
	// the caller does.
	r := &recorder{fail: func(string, any) error {
		hold.hold()
		return nil
	}}
	plan := planexec.Plan{Steps: []planexec.Step{rvSearch("s1", "LHR")}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, _ := newExecutor(t, r, edits(withIdempotency(store), withHolder("worker-a"), rvLease(lease)))
	done := make(chan rvOutcome, 1)
	go func() {
		res, err := first.Execute(ctx, plan)
		done <- rvOutcome{res, err}
	}()
	defer func() {
		hold.open()
		select {
		case <-done:
		case <-time.After(patience):
			t.Errorf("the first run did not return once its tool did")
		}
	}()
	rvWait(t, hold.entered, "the tool never started")
	cancel()
	// Five leases: long gone, unless the claim is being renewed.
	time.Sleep(5 * lease)

	second, _ := newExecutor(t, r, edits(withIdempotency(store), withHolder("worker-b"), rvLease(lease)))
	_, err := second.Execute(context.Background(), plan)
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) {
		t.Fatalf("second executor: err = %v, want *IndeterminateOutcomeError (the key still held)", err)
	}
	if ioe.InDoubt || ioe.Holder != "worker-a" {
		t.Errorf("error = %+v, want held in flight by worker-a", ioe)
	}
	if n := callsOf(r, "search_flights"); n != 1 {
		t.Errorf("search_flights ran %d times, want once", n)
	}
}

func TestAHungLeaseRenewalDoesNotHoldTheStep(t *testing.T) {
	store := &rvHungStore{MemoryIdempotencyStore: &planexec.MemoryIdempotencyStore{}, extending: make(chan struct{})}
	// The tool returns once a renewal is hanging in the store.
	r := &recorder{fail: func(string, any) error {
		select {
		case <-store.extending:
			return nil
		case <-time.After(patience):
			return errors.New("the lease was never renewed")
		}
	}}
	ex, _ := newExecutor(t, r, edits(withIdempotency(store), rvLease(30*time.Millisecond)))
	out := rvWithin(t, "Execute with a hung renewal", func() (*planexec.Result, error) {
		return ex.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{rvSearch("s1", "LHR")}})
	})
	if out.err != nil {
		t.Fatalf("Execute: %v", out.err)
	}
	if s1 := out.res.Steps["s1"]; s1.Status != planexec.StepDone {
		t.Errorf("s1 = %+v, want done", s1)
	}
}

// ---- one effect twice ----

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
		if len(pv.Violations) != 1 || pv.Violations[0].Path != "/steps/1" || !strings.Contains(pv.Violations[0].Problem, fmt.Sprintf("%q", first)) {
			t.Errorf("violations = %+v, want one at /steps/1 naming step %q", pv.Violations, first)
		}
	}

	searches := planexec.Plan{Steps: []planexec.Step{rvSearch("s1", "LHR"), rvSearch("s2", "LHR")}}
	r := &recorder{}
	ex, _ := newExecutor(t, r, withIdempotency(&planexec.MemoryIdempotencyStore{}))
	refused(t, ex.Validate(searches), "s2", "s1", "search_flights")

	res, err := ex.Execute(context.Background(), searches)
	refused(t, err, "s2", "s1", "search_flights")
	if res != nil {
		t.Errorf("result = %+v, want none: nothing ran", res)
	}
	if cs := r.Calls(); len(cs) != 0 {
		t.Errorf("tools were called: %v", toolNames(cs))
	}
	es := ex.Events()
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
	refused(t, ex.Validate(notes), "b2", "b1", "book_flight")
	seats := planexec.Plan{Steps: []planexec.Step{
		step("b1", "book_flight", `{"flight":"BA117","seats":1,"note":"window please"}`),
		step("b2", "book_flight", `{"flight":"BA117","seats":2,"note":"window please"}`),
	}}
	if err := ex.Validate(seats); err != nil {
		t.Errorf("bookings of other seats were refused: %v", err)
	}
}

// ---- a tool cannot crash or hang the run ----

type rvTicketArgs struct {
	Flight string `json:"flight"`
}

// rvTicket is an outcome that cannot be rendered: its MarshalJSON panics.
type rvTicket struct{ PNR string }

func (rvTicket) MarshalJSON() ([]byte, error) { panic("the ticket printer jammed") }

var rvTicketContract = planexec.MustContract[rvTicketArgs]("rv_issue_ticket", planexec.Irreversible())

func TestAnOutcomeThatPanicsWhenRenderedIsAStepErrorAndLeavesAnIrreversibleKeyInDoubt(t *testing.T) {
	ctx := context.Background()
	store := &planexec.MemoryIdempotencyStore{}
	var issued atomic.Int32
	withTicket := func(c *planexec.Config) {
		c.Tools = append(c.Tools, planexec.NewTool("rv_issue_ticket", "Issue a ticket.", func(ctx context.Context, a rvTicketArgs) (rvTicket, error) {
			issued.Add(1)
			return rvTicket{PNR: "PNR-" + a.Flight}, nil
		}))
		c.Contracts = append(c.Contracts, rvTicketContract)
		c.Agent.Tools = append(c.Agent.Tools, "rv_issue_ticket")
		c.Idempotency = store
	}
	plan := planexec.Plan{Steps: []planexec.Step{step("t1", "rv_issue_ticket", `{"flight":"BA117"}`)}}

	first, _ := newExecutor(t, &recorder{}, withTicket)
	res, err := first.Execute(ctx, plan)
	var se *planexec.StepError
	if !errors.As(err, &se) || se.Step != "t1" {
		t.Fatalf("err = %v, want a *StepError for t1", err)
	}
	if !strings.Contains(se.Error(), "panicked") {
		t.Errorf("step error = %q, want it to say the tool panicked", se)
	}
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) || !ioe.InDoubt {
		t.Errorf("err = %v, want the irreversible step in doubt", err)
	}
	if res == nil || res.Steps["t1"].Status != planexec.StepInDoubt {
		t.Errorf("result = %+v, want t1 in_doubt", res)
	}

	second, _ := newExecutor(t, &recorder{}, withTicket)
	_, err = second.Execute(ctx, plan)
	if !errors.As(err, &ioe) || !ioe.InDoubt || ioe.Step != "t1" {
		t.Fatalf("second run: err = %v, want *IndeterminateOutcomeError in doubt for t1", err)
	}
	if n := issued.Load(); n != 1 {
		t.Errorf("the ticket was issued %d times, want once", n)
	}
}

func TestAToolThatEndsItsGoroutineDoesNotHangTheRun(t *testing.T) {
	r := &recorder{fail: func(tool string, _ any) error {
		runtime.Goexit()
		return nil
	}}
	ex, _ := newExecutor(t, r, nil)
	out := rvWithin(t, "Execute with a tool calling runtime.Goexit", func() (*planexec.Result, error) {
		return ex.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{rvSearch("s1", "LHR"), rvSearch("s2", "LGW", "s1")}})
	})
	var se *planexec.StepError
	if !errors.As(out.err, &se) || se.Step != "s1" || se.Tool != "search_flights" {
		t.Fatalf("err = %v, want a *StepError for s1", out.err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want s1's only", got)
	}
	if out.res == nil || out.res.Complete {
		t.Errorf("result = %+v, want an incomplete result", out.res)
	}
}

// A tool that ends its goroutine failed without saying its effect did not
// land: for an irreversible tool that is doubt, as it is for a panic.
func TestAnIrreversibleToolThatEndsItsGoroutineIsLeftInDoubt(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	r := &recorder{}
	var exited atomic.Bool
	rvSetFail(r, func(tool string, _ any) error {
		if tool == "book_flight" && exited.CompareAndSwap(false, true) {
			runtime.Goexit()
		}
		return nil
	})
	first, _ := newExecutor(t, r, withPlans(plans))
	out := rvWithin(t, "Execute with a booking calling runtime.Goexit", func() (*planexec.Result, error) {
		return first.Execute(ctx, tripPlan())
	})
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(out.err, &ioe) || !ioe.InDoubt || ioe.Step != "s2" || ioe.Key.Digest == "" {
		t.Errorf("err = %v, want s2 in doubt with its key, as for any irreversible failure without ErrNotApplied", out.err)
	}

	second, _ := newExecutor(t, r, withPlans(plans))
	if _, err := second.Resume(ctx); !errors.As(err, &ioe) || !ioe.InDoubt {
		t.Errorf("Resume: err = %v, want *IndeterminateOutcomeError in doubt", err)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("book_flight called %d times, want once: its effect may have landed", n)
	}
}

// ---- cancellation ----

// rvCanceledLines counts the lines of err's message that are exactly the
// cancellation.
func rvCanceledLines(err error) int {
	n := 0
	for _, line := range strings.Split(err.Error(), "\n") {
		if line == context.Canceled.Error() {
			n++
		}
	}
	return n
}

// rvWide is n independent searches, s0 … s(n-1).
func rvWide(n int) planexec.Plan {
	var p planexec.Plan
	for i := range n {
		p.Steps = append(p.Steps, rvSearch(fmt.Sprintf("s%d", i), fmt.Sprintf("A%02d", i)))
	}
	return p
}

func TestACancelledRunReportsTheCancellationOnceAndOnlyTheStepsThatStarted(t *testing.T) {
	t.Run("while a step runs", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		started := make(chan struct{})
		var once sync.Once
		r := &recorder{delay: time.Hour} // runs until its context is cancelled
		ex, _ := newExecutor(t, r, edits(rvConcurrency(1), func(c *planexec.Config) {
			c.Observer = func(e planexec.Event) {
				if e.Kind == planexec.EventStepStarted {
					once.Do(func() { close(started) })
				}
			}
		}))
		done := make(chan rvOutcome, 1)
		go func() {
			res, err := ex.Execute(ctx, rvWide(5))
			done <- rvOutcome{res, err}
		}()
		rvWait(t, started, "no step started")
		cancel()
		var out rvOutcome
		select {
		case out = <-done:
		case <-time.After(patience):
			t.Fatal("Execute did not return after its context was cancelled")
		}
		if !errors.Is(out.err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", out.err)
		}
		if n := rvCanceledLines(out.err); n != 1 {
			t.Errorf("the cancellation is reported %d times, want once:\n%v", n, out.err)
		}
		if n := len(r.Calls()); n != 1 {
			t.Errorf("%d tools were called, want the one running when the run was cancelled", n)
		}
		if out.res == nil || len(out.res.Steps) != 1 {
			t.Fatalf("result = %+v, want only the step that started", out.res)
		}
		for id := range out.res.Steps {
			if findEvent(ex.Events(), planexec.EventStepStarted, id) < 0 {
				t.Errorf("step %s, which never started, is in the result", id)
			}
		}
	})
	t.Run("before any step starts", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &recorder{}
		ex, gate := newExecutor(t, r, edits(rvConcurrency(1), func(c *planexec.Config) {
			c.Agent.ApprovalRequired = []string{"search_flights"}
		}))
		// The person approves, and the caller gives up meanwhile.
		gate.answer = func(req planexec.ApprovalRequest) planexec.ApprovalDecision {
			cancel()
			return req.Grant("dana")
		}
		out := rvWithin(t, "Execute", func() (*planexec.Result, error) { return ex.Execute(ctx, rvWide(5)) })
		if !errors.Is(out.err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", out.err)
		}
		if n := rvCanceledLines(out.err); n != 1 {
			t.Errorf("the cancellation is reported %d times, want once:\n%v", n, out.err)
		}
		if cs := r.Calls(); len(cs) != 0 {
			t.Errorf("tools were called: %v", toolNames(cs))
		}
		if out.res != nil && len(out.res.Steps) != 0 {
			t.Errorf("result steps = %+v, want none: none started", out.res.Steps)
		}
	})
}

// ---- the autonomy ladder ----

func TestAGrantReplacedBeforeItsStepRunsStopsTheStepClearedUnderIt(t *testing.T) {
	ladder := rvLadder(t, rvRefundGrant(planexec.LevelActWithinLimits, "", 0))
	var regrantErr error
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			// Same id, but a person must now be asked.
			regrantErr = ladder.Grant(rvRefundGrant(planexec.LevelAskAlways, "", 0))
		}
		return nil
	}}
	ex, gate := newExecutor(t, r, rvLadderOf(ladder))

	_, err := ex.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		rvSearch("s1", "LHR"),
		rvRefund("s2", "o-1", "5", "s1"),
	}})

	if regrantErr != nil {
		t.Fatalf("replacing the grant: %v", regrantErr)
	}
	var refused *planexec.AutonomyRefusedError
	if !errors.As(err, &refused) || refused.Step != "s2" || !refused.AtDispatch {
		t.Fatalf("err = %v, want *AutonomyRefusedError for s2 at dispatch", err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want the search only", got)
	}
	if asked := gate.Asked(); len(asked) != 0 {
		t.Errorf("the gate was asked: %+v", asked)
	}
	es := ex.Events()
	if findEvent(es, planexec.EventAutonomyRefused, "s2") < 0 || findEvent(es, planexec.EventStepStarted, "s2") >= 0 {
		t.Errorf("want s2 refused and never started: %v", kinds(es))
	}
}

func TestRevokingAndGrantingAgainDoesNotResetTheWindow(t *testing.T) {
	grant := rvRefundGrant(planexec.LevelActWithinLimits, "100", time.Hour)
	ladder := rvLadder(t, grant)

	first, gate1 := newExecutor(t, &recorder{}, edits(rvLadderOf(ladder), func(c *planexec.Config) { c.Delegation.RunID = "run-a" }))
	if _, err := first.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{rvRefund("s1", "o-1", "60")}}); err != nil {
		t.Fatalf("first plan: %v", err)
	}
	if len(gate1.Asked()) != 0 || findEvent(first.Events(), planexec.EventAutonomyCleared, "s1") < 0 {
		t.Fatalf("a refund of 60 under a ceiling of 100 should act: %v", kinds(first.Events()))
	}

	if !ladder.Revoke("g-refunds") {
		t.Fatal("the grant was not there to revoke")
	}
	if err := ladder.Grant(grant); err != nil {
		t.Fatalf("granting again: %v", err)
	}

	// 60 spent within the hour; 60 more would pass 100.
	r := &recorder{}
	second, gate2 := newExecutor(t, r, edits(rvLadderOf(ladder), func(c *planexec.Config) { c.Delegation.RunID = "run-b" }))
	res, err := second.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{rvRefund("s1", "o-2", "60")}})
	if err != nil {
		t.Fatalf("second plan: %v", err)
	}
	if got := rvAsked(gate2); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("the gate was asked about %v, want s1: the window still holds the first 60", got)
	}
	es := second.Events()
	if findEvent(es, planexec.EventAutonomyEscalated, "s1") < 0 || findEvent(es, planexec.EventAutonomyCleared, "s1") >= 0 {
		t.Errorf("want s1 escalated, not acted on: %v", kinds(es))
	}
	if s1 := res.Steps["s1"]; s1.Grant != "" || s1.ApprovedBy != "dana" {
		t.Errorf("s1 = %+v, want cleared by dana, not under the grant", s1)
	}
}

func TestAPlanCeilingCountsWhatFinishedBeforeAResume(t *testing.T) {
	ctx := context.Background()
	ladder := rvLadder(t, rvRefundGrant(planexec.LevelActWithinLimits, "100", 0))
	plans := &planexec.MemoryPlanStore{}
	plan := planexec.Plan{Goal: "two refunds", Steps: []planexec.Step{
		rvRefund("s1", "o-1", "60"),
		rvSearch("f", "LHR", "s1"),
		rvRefund("s2", "o-2", "60", "f"),
	}}

	r := &recorder{}
	failOnce(r, "search_flights", errors.New("search is down"))
	// Each executor keeps its own decisions, so the resume must decide s2
	// afresh.
	first, _ := newExecutor(t, r, edits(rvLadderOf(ladder), withPlans(plans), rvOwnApprovals))
	if _, err := first.Execute(ctx, plan); err == nil {
		t.Fatal("the first run succeeded with a failing search")
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"refund", "search_flights"}) {
		t.Fatalf("first run calls = %v, want s1's refund and the failed search", got)
	}

	second, gate := newExecutor(t, r, edits(rvLadderOf(ladder), withPlans(plans), rvOwnApprovals))
	res, err := second.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	// s1's 60 is still on this plan's account: 60 more passes 100.
	if got := rvAsked(gate); !slices.Equal(got, []string{"s2"}) {
		t.Errorf("on resume the gate was asked about %v, want s2", got)
	}
	es := second.Events()
	if findEvent(es, planexec.EventAutonomyEscalated, "s2") < 0 || findEvent(es, planexec.EventAutonomyCleared, "s2") >= 0 {
		t.Errorf("want s2 escalated on resume, not acted on: %v", kinds(es))
	}
	if s2 := res.Steps["s2"]; s2.Grant != "" || s2.ApprovedBy != "dana" {
		t.Errorf("s2 = %+v, want cleared by dana, not under the grant", s2)
	}
	if s1 := res.Steps["s1"]; !s1.Replayed || s1.Grant != "g-refunds" {
		t.Errorf("s1 = %+v, want replayed from the record under g-refunds", s1)
	}
	if n := callsOf(r, "refund"); n != 2 {
		t.Errorf("refund called %d times, want 2 (s1 once, s2 once)", n)
	}
}

func TestAResumeDoesNotCountItsFinishedStepsTwiceAgainstAWindowedCeiling(t *testing.T) {
	ctx := context.Background()
	// 40 + 40 is within a ceiling of 100, in the plan and in the window.
	ladder := rvLadder(t, rvRefundGrant(planexec.LevelActWithinLimits, "100", time.Hour))
	plans := &planexec.MemoryPlanStore{}
	plan := planexec.Plan{Goal: "two refunds", Steps: []planexec.Step{
		rvRefund("s1", "o-1", "40"),
		rvSearch("f", "LHR", "s1"),
		rvRefund("s2", "o-2", "40", "f"),
	}}
	r := &recorder{}
	failOnce(r, "search_flights", errors.New("search is down"))
	first, gate1 := newExecutor(t, r, edits(rvLadderOf(ladder), withPlans(plans)))
	if _, err := first.Execute(ctx, plan); err == nil {
		t.Fatal("the first run succeeded with a failing search")
	}
	if got := rvAsked(gate1); len(got) != 0 {
		t.Fatalf("the first run asked about %v, want both refunds cleared under the grant", got)
	}

	second, gate2 := newExecutor(t, r, edits(rvLadderOf(ladder), withPlans(plans)))
	res, err := second.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if got := rvAsked(gate2); len(got) != 0 {
		t.Errorf("on resume the gate was asked about %v: s1's 40 counted twice (80 of 100 acted on in all)", got)
	}
	if s2 := res.Steps["s2"]; s2.Grant != "g-refunds" {
		t.Errorf("s2 = %+v, want it acted on under g-refunds", s2)
	}
}

func TestActAndReportReportsAStepAfterItRanAndActWithinLimitsDoesNot(t *testing.T) {
	for _, level := range []planexec.Level{planexec.LevelActAndReport, planexec.LevelActWithinLimits} {
		t.Run(string(level), func(t *testing.T) {
			ladder := rvLadder(t, rvRefundGrant(level, "100", 0))
			ex, gate := newExecutor(t, &recorder{}, rvLadderOf(ladder))
			if _, err := ex.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{rvRefund("s1", "o-1", "5")}}); err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if asked := gate.Asked(); len(asked) != 0 {
				t.Errorf("the gate was asked: %+v", asked)
			}
			es := ex.Events()
			cleared := findEvent(es, planexec.EventAutonomyCleared, "s1")
			started := findEvent(es, planexec.EventStepStarted, "s1")
			executed := findEvent(es, planexec.EventStepExecuted, "s1")
			if cleared < 0 || started < 0 || cleared > started {
				t.Fatalf("want AUTONOMY_CLEARED for s1 before it started: %v", kinds(es))
			}
			if es[cleared].Grant != "g-refunds" || es[cleared].Level != level {
				t.Errorf("AUTONOMY_CLEARED = %+v, want g-refunds at %s", es[cleared], level)
			}
			reported := findEvent(es, planexec.EventAutonomyReported, "")
			if level == planexec.LevelActWithinLimits {
				if reported >= 0 {
					t.Errorf("a step under act_within_limits was reported: %v", kinds(es))
				}
				return
			}
			if reported < 0 || reported < executed || es[reported].StepID != "s1" {
				t.Fatalf("want AUTONOMY_REPORTED for s1 after STEP_EXECUTED: %v", kinds(es))
			}
			if es[reported].Grant != "g-refunds" || es[reported].Level != planexec.LevelActAndReport {
				t.Errorf("AUTONOMY_REPORTED = %+v, want g-refunds at act_and_report", es[reported])
			}
			if n := count(es, planexec.EventAutonomyReported); n != 1 {
				t.Errorf("%d AUTONOMY_REPORTED events, want 1", n)
			}
		})
	}
}

// ---- decisions ----

func TestADecisionChangedToADenialBeforeItsStepRunsStopsThatStep(t *testing.T) {
	ctx := context.Background()
	var ex *planexec.Executor
	var gate *approve
	var decideErr error
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			// Dana changes her mind while the search runs.
			asked := gate.Asked()
			decideErr = ex.Decide(ctx, asked[len(asked)-1].Deny("dana", "not that flight after all"))
		}
		return nil
	}}
	ex, gate = newExecutor(t, r, nil)

	_, err := ex.Execute(ctx, tripPlan())

	if decideErr != nil {
		t.Fatalf("Decide: %v", decideErr)
	}
	var denied *planexec.ApprovalDeniedError
	if !errors.As(err, &denied) || denied.Step != "s2" || denied.Approver != "dana" {
		t.Fatalf("err = %v, want *ApprovalDeniedError for s2 by dana", err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want the search only", got)
	}
	es := ex.Events()
	granted := findEvent(es, planexec.EventApprovalGranted, "s2")
	deniedAt := findEvent(es, planexec.EventApprovalDenied, "s2")
	if granted < 0 || deniedAt < 0 || deniedAt < granted {
		t.Errorf("want APPROVAL_GRANTED for s2 at clearance, then APPROVAL_DENIED: %v", kinds(es))
	}
	if findEvent(es, planexec.EventStepStarted, "s2") >= 0 {
		t.Errorf("s2 started: %v", kinds(es))
	}
}

func TestADecisionRecordedOnOneExecutorIsFoundByAnotherSharingThePlanStore(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	r := &recorder{}
	first, gate1 := newExecutor(t, r, withPlans(plans))
	gate1.answer = func(req planexec.ApprovalRequest) planexec.ApprovalDecision { return req.Pending() }

	_, err := first.Execute(ctx, tripPlan())
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) || !pending.Stored || len(pending.Requests) != 1 {
		t.Fatalf("err = %v, want one pending request, stored", err)
	}
	if err := first.Decide(ctx, pending.Requests[0].Grant("dana")); err != nil {
		t.Fatalf("Decide: %v", err)
	}

	// Another process picks the run up; it shares the plan store only.
	second, gate2 := newExecutor(t, r, withPlans(plans))
	res, err := second.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if asked := gate2.Asked(); len(asked) != 0 {
		t.Errorf("the second executor asked again: %+v", asked)
	}
	if !res.Complete || res.Steps["s2"].ApprovedBy != "dana" {
		t.Errorf("result = %+v, want complete with s2 approved by dana", res)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v", got)
	}
	es := second.Events()
	if i := findEvent(es, planexec.EventApprovalGranted, "s2"); i < 0 || !es[i].Replayed {
		t.Errorf("want a replayed APPROVAL_GRANTED for s2: %v", kinds(es))
	}
}

// ---- delegations ----

func TestAnExecutorWhoseDelegationLeavesNoToolIsAConfigurationError(t *testing.T) {
	r := &recorder{}
	build := func(agentTools, scope []string) (*planexec.Executor, error) {
		return planexec.NewExecutor(planexec.Config{
			Tools:      r.tools(),
			Contracts:  []*planexec.Contract{searchContract, bookContract, refundContract},
			Agent:      planexec.Agent{Name: "courier", Tools: agentTools},
			Delegation: planexec.Delegation{RunID: "run-1", Tenant: "acme", Scope: scope},
			Gate:       &approve{},
		})
	}
	for name, tc := range map[string]struct{ agent, scope []string }{
		"an empty scope":                   {allTools, []string{}},
		"a scope outside the agent's list": {[]string{"search_flights", "book_flight"}, []string{"refund"}},
	} {
		_, err := build(tc.agent, tc.scope)
		var ce *planexec.ConfigurationError
		if !errors.As(err, &ce) {
			t.Errorf("%s: err = %v, want *ConfigurationError", name, err)
		}
	}
	ex, err := build([]string{"search_flights", "book_flight"}, []string{"search_flights"})
	if err != nil {
		t.Fatalf("a scope that leaves one tool was refused: %v", err)
	}
	if cat := ex.Catalog(); len(cat) != 1 || cat[0].Name != "search_flights" {
		t.Errorf("catalog = %+v, want search_flights only", cat)
	}
}

func TestAChildDelegationIsARunOfItsOwn(t *testing.T) {
	ctx := context.Background()
	parent := planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "dana", Agent: "courier"}
	child, err := parent.Delegate("scout", []string{"search_flights"}, time.Time{})
	if err != nil {
		t.Fatalf("Delegate: %v", err)
	}
	sibling, err := parent.Delegate("scout", []string{"search_flights"}, time.Time{})
	if err != nil {
		t.Fatalf("Delegate: %v", err)
	}
	if child.RunID == "" || child.RunID == parent.RunID || child.Parent != parent.RunID {
		t.Errorf("child run %q parent %q, want a new run whose parent is %q", child.RunID, child.Parent, parent.RunID)
	}
	if sibling.RunID == child.RunID {
		t.Errorf("two children share the run %q", child.RunID)
	}
	grandchild, err := child.Delegate("clerk", []string{"search_flights"}, time.Time{})
	if err != nil {
		t.Fatalf("Delegate: %v", err)
	}
	if grandchild.Parent != child.RunID || grandchild.RunID == child.RunID || grandchild.RunID == parent.RunID {
		t.Errorf("grandchild run %q parent %q, want a new run whose parent is %q", grandchild.RunID, grandchild.Parent, child.RunID)
	}

	// The same search in the child is an effect of its own, not a replay of
	// the parent's.
	store := &planexec.MemoryIdempotencyStore{}
	r := &recorder{}
	plan := planexec.Plan{Steps: []planexec.Step{rvSearch("s1", "LHR")}}
	pex, _ := newExecutor(t, r, edits(withIdempotency(store), func(c *planexec.Config) { c.Delegation = parent }))
	cex, _ := newExecutor(t, r, edits(withIdempotency(store), func(c *planexec.Config) { c.Delegation = child }))
	if cex.RunID() != child.RunID {
		t.Errorf("the child's executor acts for run %q, want %q", cex.RunID(), child.RunID)
	}
	if _, err := pex.Execute(ctx, plan); err != nil {
		t.Fatalf("parent: %v", err)
	}
	res, err := cex.Execute(ctx, plan)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if res.Steps["s1"].Replayed {
		t.Errorf("the child's search replayed the parent's outcome")
	}
	calls := r.Calls()
	if len(calls) != 2 || calls[0].Key == calls[1].Key {
		t.Errorf("calls = %+v, want two searches under two keys", calls)
	}
}

// ---- step records ----

func TestAStepRecordCarriesItsPlanKeyGrantAndAmount(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	r := &recorder{}
	ladder := rvLadder(t, rvRefundGrant(planexec.LevelActWithinLimits, "100", 0))
	ex, _ := newExecutor(t, r, edits(withPlans(plans), withIdempotency(&planexec.MemoryIdempotencyStore{}), rvLadderOf(ladder)))
	res, err := ex.Execute(ctx, planexec.Plan{Steps: []planexec.Step{rvRefund("s1", "o-1", "60.50")}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	rec, err := plans.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	st, ok := rec.Steps["s1"]
	if !ok {
		t.Fatalf("s1 is not on record: %+v", rec.Steps)
	}
	if st.PlanID == "" || st.PlanID != res.PlanID {
		t.Errorf("PlanID = %q, want %q", st.PlanID, res.PlanID)
	}
	if st.Key == "" || st.Key != res.Steps["s1"].Key.Digest || st.Key != r.Calls()[0].Key {
		t.Errorf("Key = %q, want the step's key %q", st.Key, res.Steps["s1"].Key.Digest)
	}
	if st.Grant != "g-refunds" || !st.Amount.Equal(decimal.RequireFromString("60.5")) {
		t.Errorf("Grant %q Amount %s, want g-refunds 60.5", st.Grant, st.Amount)
	}
}

func TestResumeDoesNotReplayAStepRecordOfAnotherPlan(t *testing.T) {
	ctx := context.Background()
	plans := &planexec.MemoryPlanStore{}
	planB := planexec.Plan{ID: "plan-B", Revision: 1, Goal: "search twice", Steps: []planexec.Step{
		rvSearch("s1", "LHR"),
		rvSearch("s2", "LGW", "s1"),
	}}
	if err := plans.SavePlan(ctx, &planexec.PlanRecord{Version: planexec.PlanRecordVersion, Tenant: "acme", RunID: "run-1", Plan: planB, Status: planexec.PlanRunning}); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	// A late write from plan A of the same run, for a step of the same id
	// and tool.
	if err := plans.SaveStep(ctx, "acme", "run-1", planexec.StepRecord{
		StepID: "s1", PlanID: "plan-A", Tool: "search_flights", Status: planexec.StepDone,
		Outcome: json.RawMessage(`["FROM-PLAN-A"]`), Finished: time.Now(),
	}); err != nil {
		t.Fatalf("SaveStep: %v", err)
	}

	r := &recorder{}
	ex, _ := newExecutor(t, r, withPlans(plans))
	res, err := ex.Resume(ctx)
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
	if findEvent(ex.Events(), planexec.EventStepStarted, "s1") < 0 {
		t.Errorf("s1 never started: %v", kinds(ex.Events()))
	}
}

func TestAHolderWhoseClaimWasTakenOverWritesNothingOverTheNewHoldersRecord(t *testing.T) {
	ctx := context.Background()
	clock := planexec.NewFakeClock()
	idem := &planexec.MemoryIdempotencyStore{}
	idem.SetClock(clock.Now)
	plans := &planexec.MemoryPlanStore{}
	hold := newHoldFirst()
	r := &recorder{}
	slowSearch := func(c *planexec.Config) {
		c.Tools[0] = planexec.NewTool("search_flights", "Find flights.", func(ctx context.Context, s Search) ([]string, error) {
			hold.hold() // the first caller stalls past its lease
			return []string{"BA117"}, r.record(ctx, "search_flights", s)
		})
		c.Lease = time.Hour
		c.Now = clock.Now
	}
	plan := planexec.Plan{ID: "p1", Steps: []planexec.Step{step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`)}}

	first, _ := newExecutor(t, r, edits(withPlans(plans), withIdempotency(idem), withHolder("slow"), slowSearch))
	done := make(chan error, 1)
	go func() {
		_, err := first.Execute(ctx, plan)
		done <- err
	}()
	select {
	case <-hold.entered:
	case <-time.After(patience):
		t.Fatal("the first holder never started")
	}
	clock.Advance(2 * time.Hour) // its lease runs out; a reversible step may be taken over
	second, _ := newExecutor(t, r, edits(withPlans(plans), withIdempotency(idem), withHolder("fast"), slowSearch))
	if res, err := second.Execute(ctx, plan); err != nil || !res.Complete {
		t.Fatalf("the second holder: %v", err)
	}
	hold.open()
	var err error
	select {
	case err = <-done:
	case <-time.After(patience):
		t.Fatal("the first holder never returned")
	}
	if !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("the late holder's error = %v, want ErrFenced", err)
	}
	rec, lerr := plans.LoadPlan(ctx, "acme", "run-1")
	if lerr != nil {
		t.Fatal(lerr)
	}
	if rec.Status != planexec.PlanCompleted || rec.Steps["s1"].Status != planexec.StepDone {
		t.Errorf("after the late holder returned: plan %s, step %s; want the new holder's completed and done", rec.Status, rec.Steps["s1"].Status)
	}
}
