package planexec_test

// Every effect goes through one gate, whatever performs it: a tool the
// executor calls or a call handed back to the caller; in one round or many;
// on a first run, a resume or a retried request. These are the ways past
// the guarantees that paths added one at a time once left open.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// Charge is what the caller's card tool takes.
type Charge struct {
	Amount   decimal.Decimal `json:"amount"`
	Currency string          `json:"currency"`
}

const chargeSchema = `{"type":"object","properties":{"amount":{"type":"number"},"currency":{"type":"string"}},
	"required":["amount","currency"],"additionalProperties":false}`

// chargeTool is a tool the caller runs: it charges the traveller's card.
func chargeTool(t *testing.T, opts ...planexec.ContractOption) *planexec.Tool {
	t.Helper()
	tool, err := planexec.NewClientTool("charge_card", "Charge the traveller's card.", json.RawMessage(chargeSchema), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// chargeRun is a run over the trip's tools and the caller's card tool.
func chargeRun(t *testing.T, r *recorder, st store.Store, run string, tool *planexec.Tool, edit ...func(*setup)) (*planexec.Run, *approve) {
	t.Helper()
	return newExecutor(t, r, edits(append([]func(*setup){withStore(st), func(s *setup) {
		s.Delegation.RunID = run
		s.Options = append(s.Options, planexec.WithTools(tool))
	}}, edit...)...))
}

func chargeStep(id, amount string) string {
	return fmt.Sprintf(`{"id":%q,"tool":"charge_card","arguments":{"amount":%s,"currency":"GBP"}}`, id, amount)
}

// handedBack returns the one call err hands back.
func handedBack(t *testing.T, err error) planexec.ToolCall {
	t.Helper()
	var p *planexec.ToolCallPendingError
	if !errors.As(err, &p) || len(p.Calls) != 1 {
		t.Fatalf("err = %v, want one call handed back", err)
	}
	return p.Calls[0]
}

func TestAnIrreversibleCallAskedForAgainInALaterRoundIsNotHandedBackAgain(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	run, _ := chargeRun(t, &recorder{}, st, "run-1", chargeTool(t, planexec.Irreversible()))
	round := `{"goal":"charge","steps":[` + chargeStep("c1", "40") + `]}`
	p := &script{payloads: []string{round, round, round, answer("Charged once.")}}

	_, err := run.Do(ctx, p, "charge the fare")
	call := handedBack(t, err)
	if err := run.SubmitResult(ctx, call.ID, json.RawMessage(`"ch_1"`)); err != nil {
		t.Fatalf("SubmitResult: %v", err)
	}
	res, err := run.Do(ctx, p, "charge the fare")
	if err != nil || res.Answer != "Charged once." {
		t.Fatalf("Do after the result: %+v, %v; want the answer, the charge not handed back again", res, err)
	}
	if n := count(run.Events(), planexec.EventToolCallHandedBack); n != 1 {
		t.Errorf("the charge was handed back %d times in three rounds, want once: %v", n, kinds(run.Events()))
	}
	for _, r := range p.requests()[1:3] {
		if o := r.History[len(r.History)-1].Observations[0]; o.Status != string(planexec.StepDone) || string(o.Outcome) != `"ch_1"` {
			t.Errorf("round %d was told %+v, want the charge's one result", r.Round, o)
		}
	}
}

func TestACallOncePerTenantIsHandedBackOnceWhateverTheRun(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	tool := chargeTool(t, planexec.Irreversible(), planexec.OncePerTenant())
	plan := func() planexec.Plan {
		return planexec.Plan{Steps: []planexec.Step{step("c1", "charge_card", `{"amount":40,"currency":"GBP"}`)}}
	}
	first, _ := chargeRun(t, &recorder{}, st, "run-1", tool)
	_, err := first.Execute(ctx, plan())
	call := handedBack(t, err)
	// Before the result is in, another run finds the call in flight.
	second, _ := chargeRun(t, &recorder{}, st, "run-2", tool)
	if _, err := second.Execute(ctx, plan()); !errors.Is(err, planexec.ErrInFlight) {
		t.Fatalf("run-2 before the result: %v, want the call in flight, not handed back again", err)
	}
	if err := first.SubmitResult(ctx, call.ID, json.RawMessage(`"ch_1"`)); err != nil {
		t.Fatalf("SubmitResult: %v", err)
	}
	for _, id := range []string{"run-3", "run-4"} {
		run, _ := chargeRun(t, &recorder{}, st, id, tool)
		res, err := run.Execute(ctx, plan())
		if err != nil || !res.Steps["c1"].Replayed || string(res.Steps["c1"].Outcome) != `"ch_1"` {
			t.Errorf("%s: %+v, %v; want the tenant's one charge replayed", id, res, err)
		}
		if n := count(run.Events(), planexec.EventToolCallHandedBack); n != 0 {
			t.Errorf("%s handed the charge back again", id)
		}
	}
}

func TestACallHandedBackSpendsAgainstItsGrantsWindow(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	ladder, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: "charges", Tools: []string{"charge_card"}, Amount: "amount", Currency: "currency"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ladder.Grant(planexec.Grant{ID: "g-charges", Tenant: "acme", Class: "charges", Level: planexec.LevelActWithinLimits,
		Ceiling: &planexec.Ceiling{Amount: decimal.RequireFromString("50"), Currency: "GBP", Window: 24 * time.Hour}}); err != nil {
		t.Fatal(err)
	}
	tool := chargeTool(t)
	deferAll := func(s *setup) { s.Ladder, s.Gate = ladder, planexec.DecideLater }
	var handed int
	for i := range 5 {
		run, _ := chargeRun(t, &recorder{}, st, fmt.Sprint("run-", i), tool, deferAll)
		_, err := run.Execute(ctx, planexec.Plan{Steps: []planexec.Step{step("c1", "charge_card", `{"amount":40,"currency":"GBP"}`)}})
		var pending *planexec.ToolCallPendingError
		switch {
		case errors.As(err, &pending):
			handed++
			if err := run.SubmitResult(ctx, pending.Calls[0].ID, json.RawMessage(`"ok"`)); err != nil {
				t.Fatalf("SubmitResult: %v", err)
			}
		case errors.As(err, new(*planexec.ApprovalPendingError)):
			if findEvent(run.Events(), planexec.EventAutonomyEscalated, "c1") < 0 {
				t.Errorf("run %d asks a person without the ladder escalating: %v", i, kinds(run.Events()))
			}
		default:
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if handed != 1 {
		t.Errorf("%d charges of 40 were handed back under a 50-a-day grant with nobody asked, want 1", handed)
	}
	spent, err := st.Spent(ctx, "g-charges", time.Now(), 24*time.Hour, nil)
	if err != nil || !spent.Equal(decimal.RequireFromString("40")) {
		t.Errorf("the window holds %s, %v; want the one charge's 40", spent, err)
	}
}

func TestAnApprovalClearsItsStepInOneRoundOnly(t *testing.T) {
	ctx := context.Background()
	r := &recorder{}
	run, gate := newExecutor(t, r, edits(withStore(memory.New()), withContracts(r, map[string][]planexec.ContractOption{
		"refund": {planexec.RequireApproval()},
	})))
	first := true
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision {
		if first {
			first = false
			return req.Approve("dana")
		}
		return req.Defer()
	}
	round := `{"goal":"say sorry","steps":[{"id":"r1","tool":"refund","arguments":{"order":"o-1","amount":5,"currency":"GBP"}}]}`
	p := &script{payloads: []string{round, round, round, answer("done")}}
	_, err := run.Do(ctx, p, "refund o-1 three times")
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) || pending.Requests[0].Round != 2 {
		t.Fatalf("Do: %v, want round 2's refund put to the person again", err)
	}
	if n := callsOf(r, "refund"); n != 1 {
		t.Errorf("the refund ran %d times on one approval, want once", n)
	}
	if asked := gate.Asked(); len(asked) != 2 || asked[0].ID == asked[1].ID || asked[1].Round != 2 {
		t.Errorf("asked %+v, want round 1's request and round 2's, each its own", asked)
	}
}

func TestARunSettlesOnlyTheKeysItHolds(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	failOnce(r, "book_flight", errors.New("gateway timeout"))
	a, _ := newExecutor(t, r, withStore(st))
	_, err := a.Execute(ctx, tripPlan())
	var doubt *planexec.IndeterminateOutcomeError
	if !errors.As(err, &doubt) || !doubt.InDoubt {
		t.Fatalf("run-1: %v, want the booking in doubt", err)
	}
	b, _ := newExecutor(t, r, edits(withStore(st), iRun("acme", "run-2")))
	if _, err := b.Execute(ctx, planexec.Plan{Steps: []planexec.Step{step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`)}}); err != nil {
		t.Fatalf("run-2: %v", err)
	}
	if err := b.Resolve(ctx, doubt.Key, planexec.Resolution{Applied: false}); !errors.Is(err, planexec.ErrNoRecord) {
		t.Fatalf("run-2 settling run-1's key: %v, want ErrNoRecord", err)
	}
	again, _ := newExecutor(t, r, withStore(st))
	if _, err := again.Resume(ctx); !errors.Is(err, planexec.ErrInDoubt) {
		t.Errorf("run-1 after run-2 tried to settle its key: %v, want still in doubt", err)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("the booking ran %d times, want once", n)
	}
}

// pruneOnLoad is a store that, the first time a run is read, lets another
// replica prune the tenant's finished runs before the reader goes on.
type pruneOnLoad struct {
	*memory.Store
	prune func()
	once  sync.Once
}

func (s *pruneOnLoad) LoadPlan(ctx context.Context, tenant, run string) (*store.PlanRecord, error) {
	rec, err := s.Store.LoadPlan(ctx, tenant, run)
	s.once.Do(s.prune)
	return rec, err
}

func TestARunPrunedWhileARequestHasItIsNeverWrittenBack(t *testing.T) {
	ctx := context.Background()
	clock := planexec.NewFakeClock()
	mem := memory.New(memory.WithClock(clock.Now))
	r := &recorder{}
	first, _ := newExecutor(t, r, edits(withStore(mem), func(s *setup) { s.Now = clock.Now }))
	if _, err := first.Execute(ctx, tripPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	clock.Advance(planexec.DefaultRetention + time.Hour)
	st := &pruneOnLoad{Store: mem}
	replica, _ := newExecutor(t, r, edits(withStore(st), func(s *setup) { s.Now = clock.Now }))
	other, err := planexec.NewExecutor(planexec.Config{Store: mem, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	st.prune = func() {
		if p, err := other.Prune(ctx, "acme", 0); err != nil || p.Runs != 1 {
			t.Errorf("Prune = %+v, %v; want the finished run dropped", p, err)
		}
	}
	if _, err := replica.Resume(ctx); !errors.Is(err, planexec.ErrNoRecord) {
		t.Fatalf("the retried request: %v, want ErrNoRecord: the run it read was dropped since", err)
	}
	if _, err := mem.LoadPlan(ctx, "acme", "run-1"); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("LoadPlan after the race: %v; the pruned run was written back", err)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("the booking ran %d times, want once", n)
	}
}

// together is a store whose callers read a run (and a decision) together:
// each waits, for a moment, until the other has read too, so that both
// decide on what they read before either writes.
type together struct {
	*memory.Store
	mu      sync.Mutex
	armed   bool
	readers map[string]chan struct{}
	count   map[string]int
}

func (s *together) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.readers, s.count = true, map[string]chan struct{}{}, map[string]int{}
}

// meet waits until two callers reached what, or a moment passed.
func (s *together) meet(what string) {
	s.mu.Lock()
	if !s.armed {
		s.mu.Unlock()
		return
	}
	ch, ok := s.readers[what]
	if !ok {
		ch = make(chan struct{})
		s.readers[what] = ch
	}
	if s.count[what]++; s.count[what] == 2 {
		close(ch)
	}
	s.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(200 * time.Millisecond):
	}
}

func (s *together) LoadPlan(ctx context.Context, tenant, run string) (*store.PlanRecord, error) {
	rec, err := s.Store.LoadPlan(ctx, tenant, run)
	s.meet("run")
	return rec, err
}

func (s *together) Decision(ctx context.Context, tenant, request string) (planexec.Decision, error) {
	d, err := s.Store.Decision(ctx, tenant, request)
	s.meet("decision")
	return d, err
}

// SaveDecision saves a denial after an approval being saved at once: the
// approval is first.
func (s *together) SaveDecision(ctx context.Context, tenant string, d planexec.Decision) error {
	if d.Status == planexec.Denied {
		s.meet("approved")
		return s.Store.SaveDecision(ctx, tenant, d)
	}
	err := s.Store.SaveDecision(ctx, tenant, d)
	s.meet("approved") // the denial goes on once the approval is saved
	return err
}

func TestTheFirstOfTwoResultsForOneCallStands(t *testing.T) {
	ctx := context.Background()
	st := &together{Store: memory.New()}
	run, _ := chargeRun(t, &recorder{}, st, "run-1", chargeTool(t, planexec.Irreversible()))
	_, err := run.Execute(ctx, planexec.Plan{Steps: []planexec.Step{step("c1", "charge_card", `{"amount":40,"currency":"GBP"}`)}})
	call := handedBack(t, err)
	results := []string{`"ch_A"`, `"ch_B"`}
	errs := make([]error, len(results))
	var wg sync.WaitGroup
	st.arm()
	for i, res := range results {
		other, _ := chargeRun(t, &recorder{}, st, "run-1", chargeTool(t, planexec.Irreversible()))
		wg.Go(func() { errs[i] = other.SubmitResult(ctx, call.ID, json.RawMessage(res)) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won < 0:
			won = i
		case err == nil:
			t.Fatalf("both results were taken: %v", errs)
		case !errors.Is(err, planexec.ErrNotPending):
			t.Fatalf("result %d: %v, want ErrNotPending", i, err)
		}
	}
	if won < 0 {
		t.Fatalf("no result was taken: %v", errs)
	}
	if err := run.SubmitResult(ctx, call.ID, json.RawMessage(results[won])); err != nil {
		t.Errorf("the taken result again: %v, want it taken (a retried request)", err)
	}
	if err := run.SubmitResult(ctx, call.ID, json.RawMessage(results[1-won])); !errors.Is(err, planexec.ErrNotPending) {
		t.Errorf("the other result again: %v, want ErrNotPending", err)
	}
	res, err := run.Resume(ctx)
	if err != nil || string(res.Steps["c1"].Outcome) != results[won] {
		t.Errorf("Resume: %+v, %v; want the result taken", res, err)
	}
}

func TestTheFirstOfAnApprovalAndADenialAtOnceStands(t *testing.T) {
	ctx := context.Background()
	st := &together{Store: memory.New()}
	r := &recorder{}
	run, gate := newExecutor(t, r, withStore(st))
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }
	_, err := run.Execute(ctx, tripPlan())
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) {
		t.Fatalf("Execute: %v, want a request pending", err)
	}
	req := pending.Requests[0]
	decisions := []planexec.Decision{req.Approve("dana"), req.Deny("lee", "no")}
	errs := make([]error, len(decisions))
	var wg sync.WaitGroup
	st.arm()
	for i, d := range decisions {
		ops := toollessRun(t, st)
		wg.Go(func() { errs[i] = ops.Decide(ctx, d) })
	}
	wg.Wait()
	if errs[0] != nil || !errors.Is(errs[1], planexec.ErrNotPending) {
		t.Fatalf("Decide = %v and %v, want the approval recorded and the denial after it refused", errs[0], errs[1])
	}
	won := decisions[0]
	got, err := st.Decision(ctx, "acme", req.ID)
	if err != nil || got.Status != won.Status || got.Approver != won.Approver {
		t.Errorf("recorded %+v, %v; want the decision that was taken, %+v", got, err, won)
	}
}

func TestARunActsUnderTheDelegationItWasStoredWith(t *testing.T) {
	ctx := context.Background()
	clock := planexec.NewFakeClock()
	st := memory.New(memory.WithClock(clock.Now))
	r := &recorder{}
	timed := func(s *setup) {
		s.Now = clock.Now
		s.Gate = planexec.DecideLater
	}
	run, _ := newExecutor(t, r, edits(withStore(st), timed, func(s *setup) { s.Delegation.Expires = clock.Now().Add(time.Hour) }))
	if _, err := run.Execute(ctx, tripPlan()); !errors.As(err, new(*planexec.ApprovalPendingError)) {
		t.Fatalf("Execute: %v, want the booking pending", err)
	}
	clock.Advance(2 * time.Hour)

	// A service approving later knows only the run: what it is asked, and
	// the authority the run acts under, are in the store.
	later, _ := newExecutor(t, r, edits(withStore(st), timed, func(s *setup) { s.Delegation = planexec.Delegation{RunID: "run-1", Tenant: "acme"} }))
	info, err := later.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if d := info.Delegation; d == nil || d.User != "dana" || !d.Expires.Equal(clock.Now().Add(-time.Hour)) {
		t.Errorf("Info.Delegation = %+v, want dana's, expired an hour ago", d)
	}
	w := info.Waiting[0]
	if a := w.Approval; a == nil || a.Tool != "book_flight" || string(a.Arguments) != `{"flight":"BA117","seats":1}` || a.ID != w.Request {
		t.Fatalf("Info.Waiting[0] = %+v, want what the person is asked: the booking and its arguments", w)
	}
	var de *planexec.DelegationError
	if err := later.Decide(ctx, w.Approval.Approve("dana")); !errors.As(err, &de) {
		t.Errorf("Decide under the expired delegation: %v, want a *DelegationError", err)
	}
	if _, err := later.Resume(ctx); !errors.As(err, &de) {
		t.Errorf("Resume under the expired delegation: %v, want a *DelegationError", err)
	}
	if n := callsOf(r, "book_flight"); n != 0 {
		t.Errorf("the booking ran %d times under a delegation that had expired", n)
	}
	// Nor may a caller act for someone else.
	other, _ := newExecutor(t, r, edits(withStore(st), timed, func(s *setup) { s.Delegation.User = "mallory" }))
	if _, err := other.Resume(ctx); !errors.As(err, &de) {
		t.Errorf("Resume as another user: %v, want a *DelegationError", err)
	}
}

func TestAStepInterruptedAfterItSpentIsCountedOnceOnResume(t *testing.T) {
	ladder := grantsLadder(t, grantsRefunds(planexec.LevelActWithinLimits, "600", 24*time.Hour))
	st := memory.New()
	r := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	iSetFail(r, func(tool string, _ any) error {
		if tool == "refund" {
			cancel() // the service stops while the hold is under way
			return fmt.Errorf("stopped: %w", planexec.ErrNotApplied)
		}
		return nil
	})
	plan := planexec.Plan{ID: "p1", Steps: []planexec.Step{grantsRefund("h1", "o-1", "540")}}
	first, _ := newExecutor(t, r, edits(grantsWithLadder(ladder), withStore(st)))
	if _, err := first.Execute(ctx, plan); !errors.Is(err, planexec.ErrNotApplied) {
		t.Fatalf("Execute: %v, want the hold stopped", err)
	}
	if rec, err := st.LoadPlan(context.Background(), "acme", "run-1"); err != nil || rec.Status != store.RunInterrupted {
		t.Fatalf("stored as %v, %v; want interrupted", rec.Status, err)
	}
	iSetFail(r, nil)
	again, gate := newExecutor(t, r, edits(grantsWithLadder(ladder), withStore(st)))
	res, err := again.Resume(context.Background())
	if err != nil || !res.Complete {
		t.Fatalf("Resume: %+v, %v", res, err)
	}
	if asked := grantsAsked(gate); len(asked) != 0 {
		t.Errorf("the resumed hold of 540 under a grant of 600 was put to a person: %v", asked)
	}
	if spent, err := st.Spent(context.Background(), "g-refunds", time.Now(), 24*time.Hour, nil); err != nil || !spent.Equal(decimal.RequireFromString("540")) {
		t.Errorf("the window holds %s, %v; want 540 once", spent, err)
	}
}

func TestAnActionThatIssuesAuthorityIsRefusedWhateverTheGrantsAndNobodyIsAsked(t *testing.T) {
	ladder, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: planexec.AuthorityClass, Tools: []string{"refund"}})
	if err != nil {
		t.Fatal(err)
	}
	var ce *planexec.ConfigurationError
	if err := ladder.Grant(planexec.Grant{ID: "g", Tenant: "acme", Class: planexec.AuthorityClass, Level: planexec.LevelActWithinLimits}); !errors.As(err, &ce) {
		t.Fatalf("a grant of the authority class: %v, want a *ConfigurationError", err)
	}
	for name, args := range map[string]string{
		"written out":      `{"order":"o-1","amount":5,"currency":"GBP"}`,
		"read from a step": `{"order":{"$from":"s1","path":"/0"},"amount":5,"currency":"GBP"}`,
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{}
			run, gate := newExecutor(t, r, func(s *setup) { s.Ladder = ladder })
			_, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
				step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
				step("s2", "refund", args, "s1"),
			}})
			var refused *planexec.AutonomyRefusedError
			if !errors.As(err, &refused) || refused.Step != "s2" || refused.AtDispatch {
				t.Fatalf("Execute: %v, want s2 refused before anything ran", err)
			}
			if len(gate.Asked()) != 0 || len(r.Calls()) != 0 {
				t.Errorf("asked %v, ran %v; want nobody asked and nothing run", gate.Asked(), r.Calls())
			}
		})
	}
}

// Notes is what a tool that files notes takes.
type Notes struct {
	Notes []string `json:"notes"`
}

func TestReferencesAreBoundedBeforeAnythingIsCopied(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	search := planexec.MustTool("read_page", "Read a page.", func(context.Context, Search) (string, error) { return big, nil })
	file := planexec.MustTool("file_notes", "File notes.", func(context.Context, Notes) (string, error) { return "filed", nil })
	refs := make([]string, 2000)
	for i := range refs {
		refs[i] = `{"$from":"s1","path":""}`
	}
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "read_page", `{"origin":"LHR","destination":"JFK"}`),
		step("s2", "file_notes", `{"notes":[`+strings.Join(refs, ",")+`]}`),
	}}
	run := func(lim planexec.Limits) (*planexec.Result, error) {
		ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{search, file}, Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		r, err := ex.Run(planexec.Delegation{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		return r.Execute(context.Background(), plan)
	}
	// By default a plan holds at most 128 references.
	if _, err := run(planexec.Limits{}); !errors.Is(err, planexec.ReasonReference) {
		t.Fatalf("2000 references: %v, want ReasonReference", err)
	}
	// Allowed more, the step's arguments are still bounded once resolved:
	// refused before the 128 MB they would come to is allocated.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := run(planexec.Limits{MaxReferences: 4096})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, planexec.ReasonArguments) || res.Steps["s2"].Status != planexec.StepFailed {
		t.Fatalf("resolved past MaxPlanBytes: %v, want s2 failed with ReasonArguments", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("resolving allocated %d MB before refusing", grew>>20)
	}
}

func TestAnOutputPastTheLimitIsMalformedWhateverItHolds(t *testing.T) {
	for _, raw := range [][]byte{[]byte(strings.Repeat(" ", 2<<20)), []byte(`{"goal":"` + strings.Repeat("a", 2<<20) + `"}`)} {
		if _, err := planexec.DecodePlan(raw, planexec.Limits{}); !errors.Is(err, planexec.ReasonMalformed) {
			t.Errorf("%d bytes: %v, want ReasonMalformed", len(raw), err)
		}
	}
}

func TestAPendingApprovalSaysWhichStepsRanBeforeIt(t *testing.T) {
	r := &recorder{}
	run, gate := newExecutor(t, r, nil)
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }
	_, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s2", "book_flight", `{"flight":{"$from":"s1","path":"/0"},"seats":1}`),
	}})
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) || pending.Ran != 1 {
		t.Fatalf("Execute: %v, want the booking pending after the search ran", err)
	}
	if msg := err.Error(); strings.Contains(msg, "nothing ran") || !strings.Contains(msg, "1 step before it ran") {
		t.Errorf("message %q, want it to say the search ran", msg)
	}
}

func TestHistoryTakesAnyLimit(t *testing.T) {
	run, _ := newExecutor(t, &recorder{}, nil)
	if _, err := run.Execute(context.Background(), tripPlan()); err != nil {
		t.Fatal(err)
	}
	for _, after := range []int64{0, 1, math.MaxInt64} {
		es, err := run.History(context.Background(), after, math.MaxInt)
		if err != nil || (after == 0 && len(es) != len(run.Events())) {
			t.Errorf("History(%d, MaxInt) = %d events, %v", after, len(es), err)
		}
	}
}

func TestAStepActsAgainstItsCeilingAtTheTimeItActs(t *testing.T) {
	ctx := context.Background()
	clock := planexec.NewFakeClock()
	st := memory.New(memory.WithClock(clock.Now))
	ladder := grantsLadder(t, grantsRefunds(planexec.LevelActWithinLimits, "100", time.Hour))
	r := &recorder{}
	failOnce(r, "refund", fmt.Errorf("the bank is down: %w", planexec.ErrNotApplied))
	timed := func(s *setup) { s.Now = clock.Now }
	a, _ := newExecutor(t, r, edits(grantsWithLadder(ladder), withStore(st), timed))
	if _, err := a.Execute(ctx, planexec.Plan{ID: "p1", Steps: []planexec.Step{grantsRefund("r1", "o-1", "40")}}); !errors.Is(err, planexec.ErrNotApplied) {
		t.Fatalf("first try: %v, want the refund not applied", err)
	}
	clock.Advance(time.Hour + time.Minute)
	// The refund acts now: its 40 counts in this hour's window, not in the
	// one it first tried in.
	again, _ := newExecutor(t, r, edits(grantsWithLadder(ladder), withStore(st), timed))
	if res, err := again.Resume(ctx); err != nil || !res.Complete {
		t.Fatalf("Resume: %+v, %v", res, err)
	}
	b, gate := newExecutor(t, r, edits(grantsWithLadder(ladder), withStore(st), timed, iRun("acme", "run-b")))
	if _, err := b.Execute(ctx, planexec.Plan{Steps: []planexec.Step{grantsRefund("r1", "o-2", "80")}}); err != nil {
		t.Fatalf("run-b: %v", err)
	}
	if asked := grantsAsked(gate); len(asked) != 1 {
		t.Errorf("80 more within the hour the 40 acted in was put to %d people, want it escalated to one: 120 passes 100", len(asked))
	}
}

func TestOneExecutionOfARunAtATimeOnEveryReplica(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	hold := newHoldFirst()
	defer hold.open()
	r := &recorder{}
	slow := func(s *setup) {
		s.Tools[0] = planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, a Search) ([]string, error) {
			hold.hold()
			return []string{"BA117"}, r.record(ctx, "search_flights", a)
		})
	}
	first, _ := newExecutor(t, r, edits(withStore(st), slow))
	second, _ := newExecutor(t, r, edits(withStore(st), slow))
	plan := planexec.Plan{ID: "p1", Steps: []planexec.Step{iSearch("s1", "LHR")}}
	// The first execution is stored and holds the run before the second
	// starts; the second is another replica's, with a Run of its own.
	if err := st.SavePlan(ctx, storedPlan(t, "acme", "run-1", plan, store.RunInterrupted)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := first.Resume(ctx)
		done <- err
	}()
	<-hold.entered
	if _, err := second.Resume(ctx); !errors.Is(err, planexec.ErrRunBusy) {
		t.Errorf("a second execution while the first holds the run: %v, want ErrRunBusy", err)
	}
	hold.open()
	if err := <-done; err != nil {
		t.Fatalf("the first execution: %v", err)
	}
	if n := callsOf(r, "search_flights"); n != 1 {
		t.Errorf("the search ran %d times, want once", n)
	}
	if res, err := second.Resume(ctx); err != nil || !res.Complete || !res.Steps["s1"].Replayed {
		t.Errorf("the second execution once the first let the run go: %+v, %v; want the search replayed", res, err)
	}
}

func TestAStepThatMayHaveActedIsNotPutToAPersonAgain(t *testing.T) {
	ctx := context.Background()
	clock := planexec.NewFakeClock()
	st := memory.New(memory.WithClock(clock.Now))
	timed := func(s *setup) { s.Now = clock.Now }
	r := &recorder{}
	failOnce(r, "book_flight", errors.New("gateway timeout"))
	first, _ := newExecutor(t, r, edits(withStore(st), timed))
	if _, err := first.Execute(ctx, tripPlan()); !errors.Is(err, planexec.ErrInDoubt) {
		t.Fatalf("Execute: %v, want the booking in doubt", err)
	}
	// The person's decision goes with age; the booking's key is in doubt:
	// nobody is asked to approve what may have happened.
	clock.Advance(planexec.DefaultRetention + time.Hour)
	pruneDecisions(t, st, clock.Now)
	again, gate := newExecutor(t, r, edits(withStore(st), timed))
	if _, err := again.Resume(ctx); !errors.Is(err, planexec.ErrInDoubt) {
		t.Fatalf("Resume: %v, want the booking still in doubt", err)
	}
	if asked := gate.Asked(); len(asked) != 0 {
		t.Errorf("a booking that may have happened was put to a person again: %+v", asked)
	}
}

// pruneDecisions prunes acme's store as a replica would, and checks that a
// decision went.
func pruneDecisions(t *testing.T, st store.Store, now func() time.Time) {
	t.Helper()
	ex, err := planexec.NewExecutor(planexec.Config{Store: st, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := ex.Prune(context.Background(), "acme", 0); err != nil || p.Decisions == 0 {
		t.Fatalf("Prune = %+v, %v; want a decision dropped", p, err)
	}
}

func TestARoundRefusedAtClearanceStillTellsWhatFinished(t *testing.T) {
	clock := planexec.NewFakeClock()
	st := memory.New(memory.WithClock(clock.Now))
	timed := func(s *setup) { s.Now = clock.Now }
	r := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	iSetFail(r, func(tool string, _ any) error {
		if tool == "search_flights" {
			cancel() // the service stops once the search is done
		}
		return nil
	})
	both := `{"goal":"search and book","steps":[{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}},` +
		`{"id":"s2","tool":"book_flight","arguments":{"flight":"BA117","seats":1},"depends_on":["s1"]}]}`
	p := &script{payloads: []string{both, answer("not booked")}}
	first, _ := newExecutor(t, r, edits(withStore(st), timed))
	if _, err := first.Do(ctx, p, "book BA117"); err == nil {
		t.Fatal("Do: the round went on after the service stopped")
	}
	// The decision on the booking goes with age; asked again, the person
	// says no.
	iSetFail(r, nil)
	clock.Advance(planexec.DefaultRetention + time.Hour)
	pruneDecisions(t, st, clock.Now)
	again, gate := newExecutor(t, r, edits(withStore(st), timed))
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Deny("dana", "not now") }
	res, err := again.Do(context.Background(), p, "book BA117")
	if err != nil || res.Answer != "not booked" {
		t.Fatalf("Do after the denial: %+v, %v", res, err)
	}
	told := p.requests()[1].History[0].Observations
	if told[0].Step != "s1" || told[0].Status != string(planexec.StepDone) || told[1].Error != "a person did not approve it" {
		t.Errorf("the planner was told %+v, want the search done and the booking denied", told)
	}
}
