package storetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// GuaranteeOptions sizes Guarantees.
type GuaranteeOptions struct {
	// Sequences is how many random sequences run, each in a subtest named
	// by its seed. Default 24.
	Sequences int
	// MinOperations and Operations bound the operations of one sequence.
	// Defaults 10 and 30.
	MinOperations, Operations int
	// Crashes is how many child processes one sequence may start and kill
	// mid-operation. Zero kills none: a store of one process (memory) has
	// its executions abandoned instead, which every store has too.
	Crashes int
}

func (o GuaranteeOptions) withDefaults() GuaranteeOptions {
	if o.Sequences <= 0 {
		o.Sequences = 24
	}
	if o.MinOperations <= 0 {
		o.MinOperations = 10
	}
	if o.Operations < o.MinOperations {
		o.Operations = max(30, o.MinOperations)
	}
	return o
}

// gtEnvSeed names one sequence to run again; gtEnvSpec tells a child what
// to do.
const (
	gtEnvSeed = "PLANEXEC_GUARANTEES_SEED"
	gtEnvSpec = "PLANEXEC_STORETEST_GUARANTEE_SPEC"
)

// Guarantees is a model-based property test of what the executor promises
// over a store. Each sequence drives random operations through three
// executors sharing the store: Execute of random plans, Do of scripted runs
// of rounds that ask again in later rounds for what earlier ones did,
// Resume (sometimes from two executors at once), Decide (sometimes two
// people at once), SubmitResult of calls handed back (sometimes twice,
// sometimes two results at once), Resolve of keys in doubt (by the run that
// holds them and by one that does not), Recover, Prune with the clock moved
// past retention, tools that fail before or after acting, executions
// abandoned at a random point, and, with Crashes, child processes killed at
// a random point. Then every run is resumed until it rests, and again with
// every request approved, call answered and doubt resolved, and after each
// it checks:
//
//  1. no irreversible effect was done twice in its scope (the run, or the
//     tenant for a tool once per tenant);
//  2. what acted under the windowed grant without a person never sums past
//     its ceiling within the window;
//  3. no approval cleared more than its one effect: each effect a person
//     cleared traces to one request, of its own run, plan, round, step and
//     tool, which that person approved, and no two effects trace to one;
//  4. nothing was lost: every effect is on its run's record (its step done
//     with that outcome, in the run's current plan or its earlier rounds),
//     or the run stands in doubt on that step's key, or still awaits that
//     call's result; or, for a reversible step of a run not finished, the
//     step has not ended yet (a reversible step whose holder died after
//     acting runs again when its run goes on, and its tool looks first).
//
// It checks too what operations at once promise: of two decisions or two
// results given at once only the first stands, the same result given again
// is taken, and a run that never claimed a key cannot resolve it.
//
// Tools record each effect in Effects under the sequence's tenant, with the
// clearance the executing process's observer saw for the step: the
// APPROVAL_GRANTED or AUTONOMY_CLEARED event its execution recorded before
// dispatching it. That is the request id the gate used (not one this test
// computes, which would hide a wrong binding), and it is known where the
// effect happens, even in a process killed a moment later; an earlier
// round's step record is replaced by the next round's, and a step whose
// completion was lost has none. A person's decisions name their request in
// the approver, so a step record (which keeps only the approver) names it
// too: that is how a call answered by the caller is traced.
//
// d.Open is called for each sequence, and in each child; its Effects may be
// nil when Crashes is zero (a ledger in memory is kept then). Set
// PLANEXEC_GUARANTEES_SEED to a sequence's seed to run it alone; a failing
// sequence prints its operations.
//
// As with CrashAnywhere, the test that calls it runs again in each child:
// call it from a test of its own.
func Guarantees(t *testing.T, d Durable, o GuaranteeOptions) {
	if name, ok := os.LookupEnv(crashEnvTest); ok {
		spec, mine := os.LookupEnv(gtEnvSpec)
		if name != t.Name() || !mine {
			t.Skipf("this process is the crash child of %s", name)
		}
		gtChild(t, d, spec)
		return
	}
	o = o.withDefaults()
	var seeds []uint64
	if s := os.Getenv(gtEnvSeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q is not a seed", gtEnvSeed, s)
		}
		seeds = []uint64{seed}
	} else {
		base := rand.Uint64N(1 << 40)
		t.Logf("base seed %d; run one sequence again with %s=<its seed>", base, gtEnvSeed)
		rng := rand.New(rand.NewPCG(base, 1))
		for range o.Sequences {
			seeds = append(seeds, rng.Uint64N(1<<40))
		}
	}
	top, batch := t.Name(), uuid.NewString()[:6]
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			gtSequence(t, d, o, top, batch, seed)
		})
	}
}

// The tools. Each effect names what it acts on; a few values each, so that
// runs ask for one another's effects and rounds for their earlier ones'.
const (
	gtNote    = "note"    // reversible
	gtPublish = "publish" // reversible, a person approves each
	gtShip    = "ship"    // irreversible, once per run
	gtRefund  = "refund"  // irreversible, once per tenant
	gtPay     = "pay"     // irreversible, under the grant's windowed ceiling
	gtSign    = "sign"    // irreversible, run by the caller
)

// gtTools is what a planner picks from, some more often than others.
var gtTools = []string{gtNote, gtNote, gtPublish, gtShip, gtShip, gtRefund, gtPay, gtPay, gtPay, gtSign}

// gtIrreversible: never twice in its scope. gtPersonal: a person clears
// every step (pay needs one only past its grant).
var (
	gtIrreversible = map[string]bool{gtShip: true, gtRefund: true, gtPay: true, gtSign: true}
	gtPersonal     = map[string]bool{gtPublish: true, gtShip: true, gtRefund: true, gtSign: true}
)

// Faults a tool shows on its first try of a key: refused promising it did
// nothing, failed before acting, failed after acting (irreversible only: a
// reversible tool that says it failed must not have acted).
const (
	gtNotApplied = "not_applied"
	gtBefore     = "before"
	gtAfter      = "after"
)

type gtNoteArgs struct {
	Item  string `json:"item"`
	Fault string `json:"fault,omitempty"`
}

type gtPageArgs struct {
	Page  string `json:"page"`
	Fault string `json:"fault,omitempty"`
}

type gtParcelArgs struct {
	Parcel string `json:"parcel"`
	Fault  string `json:"fault,omitempty"`
}

type gtOrderArgs struct {
	Order string `json:"order"`
	Fault string `json:"fault,omitempty"`
}

// gtPayStep is pay's arguments as a planner writes them: the amount a JSON
// number, as a decimal takes it.
type gtPayStep struct {
	Ref      string      `json:"ref"`
	Amount   json.Number `json:"amount"`
	Currency string      `json:"currency"`
	Fault    string      `json:"fault,omitempty"`
}

type gtPayArgs struct {
	Ref      string          `json:"ref"`
	Amount   decimal.Decimal `json:"amount"`
	Currency string          `json:"currency"`
	Fault    string          `json:"fault,omitempty"`
}

type gtSignArgs struct {
	Doc string `json:"doc"`
}

const gtSignSchema = `{"type":"object","properties":{"doc":{"type":"string"}},"required":["doc"],"additionalProperties":false}`

// The grant: payments act without a person up to 100 EUR an hour.
const (
	gtClass    = "payments"
	gtCurrency = "EUR"
	gtWindow   = time.Hour
)

var gtCeiling = decimal.NewFromInt(100)

func gtGrantID(tenant string) string { return "pay-" + tenant }

func gtLadder(tenant string) (*planexec.AutonomyLadder, error) {
	l, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: gtClass, Tools: []string{gtPay}, Amount: "amount", Currency: "currency"})
	if err != nil {
		return nil, err
	}
	return l, l.Grant(planexec.Grant{ID: gtGrantID(tenant), Tenant: tenant, Class: gtClass, Level: planexec.LevelActWithinLimits,
		Ceiling: &planexec.Ceiling{Amount: gtCeiling, Currency: gtCurrency, Window: gtWindow}})
}

// gtEffect is one effect as the tool (or the caller, for a call handed
// back) recorded it.
type gtEffect struct {
	ID     string    `json:"id"`
	Tenant string    `json:"tenant"`
	Run    string    `json:"run"`
	Plan   string    `json:"plan"`
	Round  int       `json:"round,omitempty"`
	Step   string    `json:"step"`
	Tool   string    `json:"tool"`
	Key    string    `json:"key,omitempty"`
	Scope  string    `json:"scope"` // what "once" is counted over
	Amount string    `json:"amount,omitempty"`
	Cur    string    `json:"currency,omitempty"`
	At     time.Time `json:"at"`
	// How its execution cleared the step: a grant, or a person's decision
	// on a request.
	Grant    string `json:"grant,omitempty"`
	Request  string `json:"request,omitempty"`
	Approver string `json:"approver,omitempty"`
	Outcome  string `json:"outcome"`
	By       string `json:"by"`
	Call     string `json:"call,omitempty"`
}

// gtList names up to four effects.
func gtList(es []gtEffect) string {
	var list []string
	for i, e := range es {
		if i == 4 {
			list = append(list, fmt.Sprintf("and %d more", len(es)-i))
			break
		}
		list = append(list, e.String())
	}
	return strings.Join(list, "; ")
}

func (e gtEffect) String() string {
	s := fmt.Sprintf("%s of run %s round %d step %s by %s at %s", e.Scope, e.Run, e.Round, e.Step, e.By, e.At.Format("15:04:05"))
	if e.Amount != "" {
		s += " amount " + e.Amount + " " + e.Cur
	}
	return s
}

// gtLedger is the effects and tries of one sequence, in Effects: effects
// under its name, each once under its own document, and tries of a key
// counted under its name and "/tries".
type gtLedger struct {
	fx   Effects
	name string
}

func (l gtLedger) add(ctx context.Context, e gtEffect) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return l.fx.Record(ctx, l.name, string(b))
}

func (l gtLedger) all(ctx context.Context) ([]gtEffect, error) {
	counts, err := l.fx.Counts(ctx, l.name)
	if err != nil {
		return nil, err
	}
	var out []gtEffect
	for doc, n := range counts {
		var e gtEffect
		if err := json.Unmarshal([]byte(doc), &e); err != nil {
			return nil, fmt.Errorf("an effect on the ledger is not one: %w", err)
		}
		for range n {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].At.Before(out[j].At) || out[i].At.Equal(out[j].At) && out[i].ID < out[j].ID
	})
	return out, nil
}

// find returns the effect done under key, if any.
func (l gtLedger) find(ctx context.Context, key string) (gtEffect, bool, error) {
	all, err := l.all(ctx)
	if err != nil {
		return gtEffect{}, false, err
	}
	for _, e := range all {
		if e.Key == key && key != "" {
			return e, true, nil
		}
	}
	return gtEffect{}, false, nil
}

// try counts a try of key and returns how many there were.
func (l gtLedger) try(ctx context.Context, key string) (int, error) {
	if err := l.fx.Record(ctx, l.name+"/tries", key); err != nil {
		return 0, err
	}
	counts, err := l.fx.Counts(ctx, l.name+"/tries")
	return counts[key], err
}

// gtMemoryEffects is a ledger for a store of one process.
type gtMemoryEffects struct {
	mu sync.Mutex
	n  map[string]map[string]int
}

func (m *gtMemoryEffects) Record(_ context.Context, run, step string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n[run] == nil {
		m.n[run] = map[string]int{}
	}
	m.n[run][step]++
	return nil
}

func (m *gtMemoryEffects) Counts(_ context.Context, run string) (map[string]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.n[run] {
		out[k] = v
	}
	return out, nil
}

// gtClearance is how an execution cleared a step, as its events said.
type gtClearance struct {
	grant, request, approver string
}

// gtSeen follows an executor's events: the round of each plan and how its
// current execution cleared each step. An execution starts with PLANNED or
// PLAN_RESUMED and records its clearances before it dispatches a step, so
// what a tool finds here is its own execution's.
type gtSeen struct {
	mu      sync.Mutex
	round   map[string]int
	cleared map[string]map[string]gtClearance // by run and plan, then step
}

func newGtSeen() *gtSeen {
	return &gtSeen{round: map[string]int{}, cleared: map[string]map[string]gtClearance{}}
}

func (s *gtSeen) observe(e planexec.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	plan := e.RunID + "\x00" + e.PlanID
	switch e.Kind {
	case planexec.EventPlanned, planexec.EventPlanResumed:
		s.round[plan] = e.Round
		s.cleared[plan] = map[string]gtClearance{}
	case planexec.EventAutonomyCleared:
		if s.cleared[plan] != nil {
			s.cleared[plan][e.StepID] = gtClearance{grant: e.Grant}
		}
	case planexec.EventApprovalGranted:
		if s.cleared[plan] != nil {
			s.cleared[plan][e.StepID] = gtClearance{request: e.Request, approver: e.Approver}
		}
	}
}

func (s *gtSeen) of(run, plan, step string) (int, gtClearance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := run + "\x00" + plan
	return s.round[k], s.cleared[k][step]
}

// gtExec is one executor over the store, its tools recording effects in
// the ledger; at marks the points of a step where an execution may be
// abandoned (in this process) or killed (in a child).
type gtExec struct {
	name   string
	tenant string
	ledger gtLedger
	now    func() time.Time
	seen   *gtSeen
	talk   func(point, string) // in a child: stop there until the parent says go on
	hook   atomic.Pointer[gtAbandon]
	ex     *planexec.Executor
	sign   *planexec.Tool
}

// gtAbandon cancels an execution at the n-th point it reaches.
type gtAbandon struct {
	left   atomic.Int64
	cancel context.CancelFunc
	where  atomic.Value // the point it was cancelled at
}

func (x *gtExec) at(p point, label string) {
	if x.talk != nil {
		x.talk(p, label)
		return
	}
	if h := x.hook.Load(); h != nil && h.left.Add(-1) == 0 {
		h.where.Store(string(p) + " " + label)
		h.cancel()
	}
}

func newGtExec(name, tenant string, st store.Store, ladder *planexec.AutonomyLadder, ledger gtLedger, now func() time.Time, talk func(point, string)) (*gtExec, error) {
	x := &gtExec{name: name, tenant: tenant, ledger: ledger, now: now, seen: newGtSeen(), talk: talk}
	wrapped, err := gtWrap(st, x.at)
	if err != nil {
		return nil, err
	}
	if x.sign, err = planexec.NewClientTool(gtSign, "Sign a document, on the caller's side.", json.RawMessage(gtSignSchema), planexec.Irreversible()); err != nil {
		return nil, err
	}
	x.ex, err = planexec.NewExecutor(planexec.Config{
		Tools:    x.tools(),
		Store:    wrapped,
		Ladder:   ladder,
		Gate:     planexec.DecideLater,
		Lease:    crashLease,
		Holder:   name,
		Now:      now,
		Observer: x.seen.observe,
	})
	return x, err
}

func (x *gtExec) run(id string) (*planexec.Run, error) {
	return x.ex.Run(planexec.Delegation{RunID: id, Tenant: x.tenant, User: "dana", Agent: "guarantees"}, planexec.WithTools(x.sign))
}

func (x *gtExec) tools() []*planexec.Tool {
	return []*planexec.Tool{
		planexec.MustTool(gtNote, "Note an item.", func(ctx context.Context, a gtNoteArgs) (string, error) {
			return x.act(ctx, gtNote, a.Item, a, "", "", a.Fault)
		}),
		planexec.MustTool(gtPublish, "Publish a page.", func(ctx context.Context, a gtPageArgs) (string, error) {
			return x.act(ctx, gtPublish, a.Page, a, "", "", a.Fault)
		}, planexec.RequireApproval()),
		planexec.MustTool(gtShip, "Ship a parcel.", func(ctx context.Context, a gtParcelArgs) (string, error) {
			return x.act(ctx, gtShip, a.Parcel, a, "", "", a.Fault)
		}, planexec.Irreversible()),
		planexec.MustTool(gtRefund, "Refund an order.", func(ctx context.Context, a gtOrderArgs) (string, error) {
			return x.act(ctx, gtRefund, a.Order, a, "", "", a.Fault)
		}, planexec.Irreversible(), planexec.OncePerTenant(), planexec.KeyArguments("order")),
		planexec.MustTool(gtPay, "Pay an amount.", func(ctx context.Context, a gtPayArgs) (string, error) {
			return x.act(ctx, gtPay, a.Ref, a, a.Amount.String(), a.Currency, a.Fault)
		}, planexec.Irreversible()),
	}
}

// gtOutcome is what a tool returns for what it acts on, and what a
// resolution records.
func gtOutcome(tool, what string) string { return tool + ":" + what }

// gtScope is what once is counted over: the tenant for a refund (its key
// argument, the order), the run and all the arguments otherwise.
func gtScope(tenant, run, tool, what string, args any) string {
	if tool == gtRefund {
		return tenant + "|" + tool + "|" + what
	}
	b, _ := json.Marshal(args)
	return run + "|" + tool + "|" + string(b)
}

// act is every tool: it checks its context before acting, fails on its
// first try of a key as fault says, and records its effect with how its
// execution cleared the step. A reversible tool looks before it acts, as a
// tool that may run again must. Writes to the ledger outlive the caller's
// context: an effect is recorded whole or not at all.
func (x *gtExec) act(ctx context.Context, tool, what string, args any, amount, currency, fault string) (string, error) {
	info, _ := planexec.CurrentStep(ctx)
	key, _ := planexec.IdempotencyKey(ctx)
	x.at(toolStart, info.StepID)
	if ctx.Err() != nil {
		return "", fmt.Errorf("not started: %w: %w", planexec.ErrNotApplied, context.Cause(ctx))
	}
	wctx := context.WithoutCancel(ctx)
	n, err := x.ledger.try(wctx, key)
	if err != nil {
		return "", fmt.Errorf("counting the try: %w: %w", planexec.ErrNotApplied, err)
	}
	outcome := gtOutcome(tool, what)
	switch {
	case n == 1 && fault == gtNotApplied:
		return "", fmt.Errorf("the first try is refused: %w", planexec.ErrNotApplied)
	case n == 1 && fault == gtBefore:
		return "", errors.New("the first try failed before acting")
	}
	if !gtIrreversible[tool] {
		_, done, err := x.ledger.find(wctx, key)
		if err != nil {
			return "", fmt.Errorf("looking: %w: %w", planexec.ErrNotApplied, err)
		}
		if done {
			x.at(toolEnd, info.StepID)
			return outcome, nil
		}
	}
	round, c := x.seen.of(info.RunID, info.PlanID, info.StepID)
	e := gtEffect{ID: uuid.NewString(), Tenant: info.Tenant, Run: info.RunID, Plan: info.PlanID, Round: round, Step: info.StepID, Tool: tool,
		Key: key, Scope: gtScope(info.Tenant, info.RunID, tool, what, args), Amount: amount, Cur: currency, At: x.now(),
		Grant: c.grant, Request: c.request, Approver: c.approver, Outcome: outcome, By: x.name}
	if err := x.ledger.add(wctx, e); err != nil {
		return "", fmt.Errorf("recording the effect: %w: %w", planexec.ErrNotApplied, err)
	}
	x.at(toolEnd, info.StepID)
	if n == 1 && fault == gtAfter {
		return "", errors.New("the first try failed after acting")
	}
	return outcome, nil
}

// gtStore marks the points of a step and of a save of a run's record, and
// keeps every capability of the store it wraps, so that executors over it
// count ceilings, keep histories, prune and recover in the store.
type gtStore struct {
	store.Store
	store.EventStore
	store.CeilingStore
	store.RunLister
	store.Pruner
	store.Recoverer
	at func(point, string)
}

func gtWrap(s store.Store, at func(point, string)) (*gtStore, error) {
	w := &gtStore{Store: s, at: at}
	var e, c, l, p, r bool
	w.EventStore, e = s.(store.EventStore)
	w.CeilingStore, c = s.(store.CeilingStore)
	w.RunLister, l = s.(store.RunLister)
	w.Pruner, p = s.(store.Pruner)
	w.Recoverer, r = s.(store.Recoverer)
	if !e || !c || !l || !p || !r {
		return nil, fmt.Errorf("the store %T lacks a capability the executor's guarantees rest on (histories %v, ceilings %v, listings %v, pruning %v, recovery %v)", s, e, c, l, p, r)
	}
	return w, nil
}

func (w *gtStore) SavePlan(ctx context.Context, rec *store.PlanRecord) error {
	return markSave(w.at, rec, func() error { return w.Store.SavePlan(ctx, rec) })
}

func (w *gtStore) Claim(ctx context.Context, req store.ClaimRequest) (store.Claim, error) {
	w.at(beforeClaim, req.StepID)
	c, err := w.Store.Claim(ctx, req)
	if err == nil && c.State == store.ClaimAcquired {
		w.at(afterClaim, req.StepID)
	}
	return c, err
}

func (w *gtStore) CompleteStep(ctx context.Context, sw *store.StepWrite) error {
	w.at(beforeRecord, sw.Record.StepID)
	err := w.Store.CompleteStep(ctx, sw)
	if err == nil {
		w.at(afterRecord, sw.Record.StepID)
	}
	return err
}

// gtRun is a run the sequence started: a plan on its own, or a run of
// rounds with its planner's script.
type gtRun struct {
	id     string
	rounds [][]planexec.Step // a run of rounds: each round's steps
	plan   planexec.Plan     // a plan on its own
	script []string
	pruned bool // dropped by Prune: its record is gone on purpose
	gone   bool // never stored: refused, or stopped before its plan was
}

func (r *gtRun) task() string { return "finish job " + r.id }

// step is the step named id in round (0: the plan on its own).
func (r *gtRun) step(round int, id string) (planexec.Step, bool) {
	steps := r.plan.Steps
	if r.rounds != nil {
		if round < 1 || round > len(r.rounds) {
			return planexec.Step{}, false
		}
		steps = r.rounds[round-1]
	}
	for _, s := range steps {
		if s.ID == id {
			return s, true
		}
	}
	return planexec.Step{}, false
}

// uses reports whether any step of the run names tool.
func (r *gtRun) uses(tool string) bool {
	for _, steps := range append([][]planexec.Step{r.plan.Steps}, r.rounds...) {
		for _, s := range steps {
			if s.Tool == tool {
				return true
			}
		}
	}
	return false
}

// gtDecision is a decision this test gave: its approver names it and the
// request it was given for.
type gtDecision struct {
	request string
	status  planexec.DecisionStatus
	req     *planexec.ApprovalRequest // what the run waiting for it said it asks
}

// gtCall is a call handed back, as the caller (this test) keeps it.
type gtCall struct {
	effect   string   // the effect performed and not yet taken, if any
	accepted []string // the results the run took
	backs    int      // how often the call had been handed back when a result was last taken
}

// gtSeq is one sequence: its store, executors, model and record.
type gtSeq struct {
	ctx     context.Context
	top     string // the test a child runs
	rng     *rand.Rand
	tenant  string
	st      store.Store
	ledger  gtLedger
	clock   *Clock
	ladder  *planexec.AutonomyLadder
	ex      [3]*gtExec
	crashes int

	runs      []*gtRun
	decisions map[string]gtDecision // by approver
	calls     map[string]*gtCall    // by call id
	decided   map[string]bool       // requests with a decision on record, as far as this test knows
	approver  map[string]string     // a caller's effect: the approver its step was cleared by
	nPerson   int
	killed    int // children killed at their point
	abandoned int // executions abandoned at their point

	mu       sync.Mutex
	ops      []string
	problems []string
	seenProb map[string]bool
}

func gtSequence(t *testing.T, d Durable, o GuaranteeOptions, top, batch string, seed uint64) {
	stores, effects := d.Open(t)
	if stores.Store == nil {
		t.Fatalf("Durable.Open returned no store")
	}
	if effects == nil {
		if o.Crashes > 0 {
			t.Fatalf("Durable.Open returned no Effects: children cannot share a ledger in memory")
		}
		effects = &gtMemoryEffects{n: map[string]map[string]int{}}
	}
	tenant := fmt.Sprintf("gt-%d-%s", seed, batch)
	s := &gtSeq{ctx: t.Context(), top: top, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		tenant: tenant, st: stores.Store, ledger: gtLedger{fx: effects, name: tenant}, clock: NewClock(), crashes: o.Crashes,
		decisions: map[string]gtDecision{}, decided: map[string]bool{}, calls: map[string]*gtCall{}, approver: map[string]string{}, seenProb: map[string]bool{}}
	var err error
	if s.ladder, err = gtLadder(tenant); err != nil {
		t.Fatal(err)
	}
	for i := range s.ex {
		if s.ex[i], err = newGtExec(fmt.Sprintf("ex%d", i), tenant, stores.Store, s.ladder, s.ledger, s.clock.Now, nil); err != nil {
			t.Fatal(err)
		}
	}
	n := o.MinOperations + s.rng.IntN(o.Operations-o.MinOperations+1)
	for i := range n {
		s.operate(i + 1)
	}
	s.logf("-- every run resumed until it rests")
	s.settle(false)
	s.check("at rest")
	s.logf("-- every request approved, call answered, doubt resolved")
	s.settle(true)
	s.check("drained")
	t.Log(s.summary(n))
	if os.Getenv(gtEnvSeed) != "" {
		t.Logf("operations:\n  %s", strings.Join(s.ops, "\n  "))
	}
	if len(s.problems) > 0 {
		t.Errorf("seed %d broke the executor's guarantees (run it alone with %s=%d):\n  %s\noperations:\n  %s",
			seed, gtEnvSeed, seed, strings.Join(s.problems, "\n  "), strings.Join(s.ops, "\n  "))
	}
}

func (s *gtSeq) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = append(s.ops, fmt.Sprintf(format, args...))
}

func (s *gtSeq) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := fmt.Sprintf(format, args...)
	if !s.seenProb[p] {
		s.seenProb[p] = true
		s.problems = append(s.problems, p)
	}
}

// gtPick returns a random element of xs.
func gtPick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// newStep is a random step of tool with id, acting on one of a few
// values; fault is a fault for the first try, or none.
func (s *gtSeq) newStep(id, tool string) planexec.Step {
	fault := ""
	if s.rng.IntN(100) < 15 && tool != gtSign {
		faults := []string{gtNotApplied, gtBefore}
		if gtIrreversible[tool] {
			faults = append(faults, gtAfter)
		}
		fault = gtPick(s.rng, faults)
	}
	var args any
	switch tool {
	case gtNote:
		args = gtNoteArgs{Item: gtPick(s.rng, []string{"n1", "n2", "n3"}), Fault: fault}
	case gtPublish:
		args = gtPageArgs{Page: gtPick(s.rng, []string{"w1", "w2"}), Fault: fault}
	case gtShip:
		args = gtParcelArgs{Parcel: gtPick(s.rng, []string{"p1", "p2", "p3"}), Fault: fault}
	case gtRefund:
		args = gtOrderArgs{Order: gtPick(s.rng, []string{"o1", "o2", "o3"}), Fault: fault}
	case gtPay:
		cur := gtCurrency
		if s.rng.IntN(10) == 0 {
			cur = "USD"
		}
		args = gtPayStep{Ref: gtPick(s.rng, []string{"r1", "r2", "r3", "r4"}), Amount: json.Number(gtPick(s.rng, []string{"10", "25", "40", "55"})),
			Currency: cur, Fault: fault}
	case gtSign:
		args = gtSignArgs{Doc: gtPick(s.rng, []string{"d1", "d2"})}
	}
	b, _ := json.Marshal(args)
	return planexec.Step{ID: id, Tool: tool, Arguments: b}
}

// gtWhat names what a step acts on, for keeping two steps of one plan from
// being one effect.
func gtWhat(st planexec.Step) string {
	var m map[string]any
	_ = json.Unmarshal(st.Arguments, &m)
	for _, k := range []string{"item", "page", "parcel", "order", "ref", "doc"} {
		if v, ok := m[k].(string); ok {
			return st.Tool + ":" + v
		}
	}
	return st.Tool
}

// newSteps is up to n random steps with ids prefix1..., none of them one
// effect with another or with taken, some waiting on earlier ones.
func (s *gtSeq) newSteps(prefix string, n int, taken map[string]bool) []planexec.Step {
	var steps []planexec.Step
	for i := 1; len(steps) < n && i <= 3*n; i++ {
		st := s.newStep(fmt.Sprintf("%s%d", prefix, len(steps)+1), gtPick(s.rng, gtTools))
		if taken[gtWhat(st)] {
			continue
		}
		taken[gtWhat(st)] = true
		for _, before := range steps {
			if s.rng.IntN(100) < 30 {
				st.DependsOn = append(st.DependsOn, before.ID)
			}
		}
		steps = append(steps, st)
	}
	return steps
}

// newRun starts a run in the model: a plan on its own, or a run of two or
// three rounds, each after the first asking again for some of the steps
// before it (the same id, tool and arguments) beside new ones.
func (s *gtSeq) newRun(rounds bool) *gtRun {
	r := &gtRun{id: fmt.Sprintf("%s-r%d", s.tenant, len(s.runs)+1)}
	if !rounds {
		r.plan = planexec.Plan{ID: "plan-" + r.id, Goal: "job " + r.id, Revision: 1, Steps: s.newSteps("s", 1+s.rng.IntN(4), map[string]bool{})}
	} else {
		n := 2 + s.rng.IntN(2)
		prev := s.newSteps("a", 1+s.rng.IntN(3), map[string]bool{})
		r.rounds = append(r.rounds, prev)
		for k := 1; k < n; k++ {
			taken := map[string]bool{}
			var steps []planexec.Step
			for _, st := range prev {
				if s.rng.IntN(100) < 60 {
					st.DependsOn = nil
					steps = append(steps, st)
					taken[gtWhat(st)] = true
				}
			}
			for _, st := range s.newSteps(string(rune('a'+k)), 1+s.rng.IntN(2), taken) {
				if slices.ContainsFunc(steps, func(o planexec.Step) bool { return o.ID == st.ID }) {
					continue
				}
				st.DependsOn = nil
				steps = append(steps, st)
			}
			r.rounds = append(r.rounds, steps)
			prev = steps
		}
		for k, steps := range r.rounds {
			r.script = append(r.script, roundPayload(fmt.Sprintf("round %d of %s", k+1, r.id), steps...))
		}
		r.script = append(r.script, answerPayload("done: "+r.id))
	}
	s.runs = append(s.runs, r)
	return r
}

func gtDescribeSteps(steps []planexec.Step) string {
	var parts []string
	for _, st := range steps {
		p := st.ID + " " + st.Tool + string(st.Arguments)
		if len(st.DependsOn) > 0 {
			p += " after " + strings.Join(st.DependsOn, ",")
		}
		parts = append(parts, p)
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func (r *gtRun) describe() string {
	if r.rounds == nil {
		return "plan " + gtDescribeSteps(r.plan.Steps)
	}
	var parts []string
	for k, steps := range r.rounds {
		parts = append(parts, fmt.Sprintf("round %d %s", k+1, gtDescribeSteps(steps)))
	}
	return "rounds " + strings.Join(parts, " ")
}

// live are the runs with a record: neither pruned nor never stored.
func (s *gtSeq) live() []*gtRun {
	var out []*gtRun
	for _, r := range s.runs {
		if !r.pruned && !r.gone {
			out = append(out, r)
		}
	}
	return out
}

// info is where run stands in the store; ok is false when it has no record.
func (s *gtSeq) info(r *gtRun) (planexec.RunInfo, bool) {
	run, err := s.ex[0].run(r.id)
	if err != nil {
		s.problem("op: making run %s: %v", r.id, err)
		return planexec.RunInfo{}, false
	}
	info, err := run.Info(s.ctx)
	if err != nil {
		if !errors.Is(err, planexec.ErrNoRecord) {
			s.logf("   info of %s: %v", r.id, err)
		}
		return planexec.RunInfo{}, false
	}
	return info, true
}

// standing are the live runs with a record, with where each stands.
func (s *gtSeq) standing() ([]*gtRun, []planexec.RunInfo) {
	var runs []*gtRun
	var infos []planexec.RunInfo
	for _, r := range s.live() {
		if info, ok := s.info(r); ok {
			runs = append(runs, r)
			infos = append(infos, info)
		}
	}
	return runs, infos
}

// gtSummary says in a few words how a call ended.
func gtSummary(err error) string {
	if err == nil {
		return "ok"
	}
	var (
		pending *planexec.ApprovalPendingError
		calls   *planexec.ToolCallPendingError
		ind     *planexec.IndeterminateOutcomeError
		perr    *planexec.PlanValidationError
	)
	out := string(planexec.StatusOf(err))
	switch {
	case errors.As(err, &pending):
		var steps []string
		for _, q := range pending.Requests {
			steps = append(steps, q.StepID)
		}
		return out + " " + strings.Join(steps, ",")
	case errors.As(err, &calls):
		var steps []string
		for _, c := range calls.Calls {
			steps = append(steps, c.StepID)
		}
		return out + " " + strings.Join(steps, ",")
	case errors.As(err, &ind):
		out += fmt.Sprintf(" (step %s, in doubt %v)", ind.Step, ind.InDoubt)
	case errors.As(err, &perr):
		out += " (refused: " + string(perr.Reason) + ")"
	}
	line := []rune(strings.ReplaceAll(oneLine(err.Error()), "planexec: ", ""))
	if len(line) > 160 {
		return out + ": " + string(line[:160]) + "…"
	}
	return out + ": " + string(line)
}

// gtExecute runs r on x once: Execute for a new plan on its own, Do for a
// run of rounds, Resume for a stored plan on its own.
func gtExecute(ctx context.Context, x *gtExec, r *gtRun, first bool) error {
	run, err := x.run(r.id)
	if err != nil {
		return err
	}
	switch {
	case r.rounds != nil:
		_, err = run.Do(ctx, &scriptedPlanner{script: r.script}, r.task())
	case first:
		_, err = run.Execute(ctx, r.plan)
	default:
		_, err = run.Resume(ctx)
	}
	return err
}

// gtWaiting is one thing a stored run waits for.
type gtWaiting struct {
	r *gtRun
	w planexec.Wait
}

// operate does one random operation, among those that apply to where the
// runs stand.
func (s *gtSeq) operate(n int) {
	x := gtPick(s.rng, s.ex[:])
	runs, infos := s.standing()
	var open, ready []*gtRun
	var requests, calls, doubts []gtWaiting
	for i, r := range runs {
		if infos[i].Status != planexec.RunCompleted {
			open = append(open, r)
			if s.ready(infos[i]) {
				ready = append(ready, r)
			}
		}
		for _, w := range infos[i].Waiting {
			switch {
			case w.Request != "":
				// A decided request stays on the run's list until it is
				// resumed: deciding it again is only now and then worth it.
				if !s.decided[w.Request] || s.rng.IntN(10) == 0 {
					requests = append(requests, gtWaiting{r, w})
				}
			case w.Call != "":
				calls = append(calls, gtWaiting{r, w})
			case w.Key.Digest != "":
				doubts = append(doubts, gtWaiting{r, w})
			}
		}
	}
	// Executions mostly go where something can run.
	if len(ready) > 0 && s.rng.IntN(4) > 0 {
		open = ready
	}
	room := len(s.runs) < 10
	when := func(ok bool, w int) int {
		if ok {
			return w
		}
		return 0
	}
	ops := []struct {
		weight int
		do     func()
	}{
		{when(room, 10), func() { s.opNew(n, x, false) }},
		{when(room, 7), func() { s.opNew(n, x, true) }},
		{when(len(open) > 0, 10), func() { s.opResume(n, x, gtPick(s.rng, open)) }},
		{when(len(open) > 0, 3), func() { s.opResumeTwice(n, gtPick(s.rng, open)) }},
		{when(len(requests) > 0, 18), func() { s.opDecide(n, x, gtPick(s.rng, requests)) }},
		{when(len(calls) > 0, 10), func() { s.opSubmit(n, x, gtPick(s.rng, calls)) }},
		{when(len(doubts) > 0, 10), func() { s.opResolve(n, x, gtPick(s.rng, doubts)) }},
		{3, func() { s.opRecover(n, x) }},
		{2, func() { s.opPrune(n, x) }},
		{4, func() { s.opAdvance(n) }},
		{when(room || len(open) > 0, 8), func() { s.opAbandon(n, x, open) }},
		{when(s.crashes > 0 && (room || len(open) > 0), 6), func() { s.opCrash(n, open) }},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	k := s.rng.IntN(total)
	for _, o := range ops {
		if k < o.weight {
			o.do()
			return
		}
		k -= o.weight
	}
}

// ready reports whether a resume of a run standing as info says can run
// something: it waits for nothing this test has not given it.
func (s *gtSeq) ready(info planexec.RunInfo) bool {
	for _, w := range info.Waiting {
		switch {
		case w.Request != "" && !s.decided[w.Request]:
			return false
		case w.Call != "" && (s.calls[w.Call] == nil || len(s.calls[w.Call].accepted) == 0):
			return false
		case w.Key.Digest != "":
			return false
		}
	}
	return true
}

// started books a run just started as gone when it left no record (it
// was refused, or stopped before its plan was stored): nothing ran.
func (s *gtSeq) started(r *gtRun) {
	if _, ok := s.info(r); !ok {
		r.gone = true
	}
}

func (s *gtSeq) opNew(n int, x *gtExec, rounds bool) {
	r := s.newRun(rounds)
	err := gtExecute(s.ctx, x, r, true)
	s.started(r)
	verb := "execute"
	if rounds {
		verb = "do"
	}
	s.logf("%02d %s %s %s %s -> %s", n, x.name, verb, r.id, r.describe(), gtSummary(err))
}

func (s *gtSeq) opResume(n int, x *gtExec, r *gtRun) {
	err := gtExecute(s.ctx, x, r, false)
	s.logf("%02d %s resume %s -> %s", n, x.name, r.id, gtSummary(err))
}

// opResumeTwice resumes one run from two executors at once.
func (s *gtSeq) opResumeTwice(n int, r *gtRun) {
	i := s.rng.IntN(3)
	a, b := s.ex[i], s.ex[(i+1)%3]
	var errs [2]error
	var wg sync.WaitGroup
	for k, x := range []*gtExec{a, b} {
		wg.Go(func() { errs[k] = gtExecute(s.ctx, x, r, false) })
	}
	wg.Wait()
	s.logf("%02d %s+%s resume %s at once -> %s | %s", n, a.name, b.name, r.id, gtSummary(errs[0]), gtSummary(errs[1]))
}

// decide records a decision of person on w's request through x, under an
// approver that names the decision and the request.
func (s *gtSeq) decide(x *gtExec, r *gtRun, w planexec.Wait, person string, status planexec.DecisionStatus) (string, error) {
	s.mu.Lock()
	s.nPerson++
	approver := fmt.Sprintf("%s#%d/%s", person, s.nPerson, w.Request)
	s.decisions[approver] = gtDecision{request: w.Request, status: status, req: w.Approval}
	s.mu.Unlock()
	run, err := x.run(r.id)
	if err != nil {
		return approver, err
	}
	dec := planexec.Decision{RequestID: w.Request, Status: status, Approver: approver}
	if status == planexec.Denied {
		dec.Why = "not now"
	}
	if err = run.Decide(s.ctx, dec); err == nil {
		s.mu.Lock()
		s.decided[w.Request] = true
		s.mu.Unlock()
	}
	return approver, err
}

func gtWaitName(w planexec.Wait) string {
	round := 0
	if w.Approval != nil {
		round = w.Approval.Round
	}
	return fmt.Sprintf("%s %s round %d", w.Step, w.Tool, round)
}

func (s *gtSeq) opDecide(n int, x *gtExec, on gtWaiting) {
	r, w := on.r, on.w
	k := s.rng.IntN(100)
	if k < 30 {
		// A person goes through what the run waits for and approves it.
		info, _ := s.info(r)
		var said []string
		for _, w := range info.Waiting {
			if w.Request != "" && !s.decided[w.Request] {
				_, err := s.decide(x, r, w, "carol", planexec.Approved)
				said = append(said, w.Step+" "+gtSummary(err))
			}
		}
		s.logf("%02d %s approve all of %s -> %s", n, x.name, r.id, strings.Join(said, ", "))
		return
	}
	if k < 70 {
		status := planexec.Approved
		if k >= 55 {
			status = planexec.Denied
		}
		_, err := s.decide(x, r, w, "alice", status)
		s.logf("%02d %s decide %s %s of %s -> %s", n, x.name, status, gtWaitName(w), r.id, gtSummary(err))
		return
	}
	// Two people at once, from two executors: the first decision stands.
	statuses := [2]planexec.DecisionStatus{planexec.Approved, planexec.Denied}
	if k >= 88 {
		statuses[1] = planexec.Approved
	}
	i := s.rng.IntN(3)
	xs := [2]*gtExec{s.ex[i], s.ex[(i+1)%3]}
	var errs [2]error
	var wg sync.WaitGroup
	for j := range 2 {
		wg.Go(func() { _, errs[j] = s.decide(xs[j], r, w, []string{"alice", "bob"}[j], statuses[j]) })
	}
	wg.Wait()
	s.logf("%02d %s+%s decide %s and %s at once %s of %s -> %s | %s", n, xs[0].name, xs[1].name, statuses[0], statuses[1], gtWaitName(w), r.id,
		gtSummary(errs[0]), gtSummary(errs[1]))
	if errs[0] == nil && errs[1] == nil {
		s.problem("op %02d: two decisions at once on request %s were both taken; the first must stand", n, w.Request)
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, planexec.ErrNotPending) {
			s.problem("op %02d: a decision at once with another failed otherwise than ErrNotPending: %v", n, err)
		}
	}
}

// perform runs call w of run r as its caller, unless the caller ran it and
// its result is not in yet, and returns the call and its true result.
func (s *gtSeq) perform(r *gtRun, w planexec.Wait) (*gtCall, string, error) {
	rec, err := s.st.LoadPlan(s.ctx, s.tenant, r.id)
	if err != nil {
		return nil, "", err
	}
	round := gtRoundOf(rec.Plan)
	st, ok := r.step(round, w.Step)
	if !ok {
		return nil, "", fmt.Errorf("call %s is of step %s of round %d, which the run never planned", w.Call, w.Step, round)
	}
	var a gtSignArgs
	_ = json.Unmarshal(st.Arguments, &a)
	outcome := gtOutcome(gtSign, a.Doc)
	c := s.calls[w.Call]
	if c == nil {
		c = &gtCall{}
		s.calls[w.Call] = c
	}
	if c.effect != "" {
		return c, outcome, nil // performed already: its result is not in yet
	}
	if len(c.accepted) > 0 {
		// A run keeps naming a call it awaited until it is resumed: only a
		// call handed back again since its result was taken is run again.
		backs, err := s.handBacks(r, w.Call)
		if err != nil || backs <= c.backs {
			return c, outcome, err
		}
	}
	e := gtEffect{ID: uuid.NewString(), Tenant: s.tenant, Run: r.id, Plan: rec.PlanID, Round: round, Step: w.Step, Tool: gtSign,
		Scope: gtScope(s.tenant, r.id, gtSign, a.Doc, a), At: s.clock.Now(), Outcome: outcome, By: "caller", Call: w.Call}
	if err := s.ledger.add(s.ctx, e); err != nil {
		return nil, "", err
	}
	c.effect = e.ID
	return c, outcome, nil
}

// taken books outcome as taken for call c of step in run r, and the
// approver the step's record names as what cleared the caller's effect.
func (s *gtSeq) taken(r *gtRun, step, call string, c *gtCall, outcome string) {
	c.accepted = append(c.accepted, outcome)
	if backs, err := s.handBacks(r, call); err == nil {
		c.backs = backs
	}
	if c.effect == "" {
		return
	}
	rec, err := s.st.LoadPlan(s.ctx, s.tenant, r.id)
	if err == nil {
		s.approver[c.effect] = rec.Steps[step].ApprovedBy
	}
	c.effect = ""
}

func (s *gtSeq) opSubmit(n int, x *gtExec, on gtWaiting) {
	r, w := on.r, on.w
	c, outcome, err := s.perform(r, w)
	if err != nil {
		s.problem("op %02d: performing call %s of %s: %v", n, w.Call, r.id, err)
		return
	}
	result, _ := json.Marshal(outcome)
	switch k := s.rng.IntN(4); {
	case k < 2:
		run, _ := x.run(r.id)
		err := run.SubmitResult(s.ctx, w.Call, result)
		if err == nil {
			s.taken(r, w.Step, w.Call, c, outcome)
		}
		s.logf("%02d %s submit %s of %s -> %s", n, x.name, w.Step, r.id, gtSummary(err))
	case k == 2:
		// A retried request gives the same result again: it is taken.
		run, _ := x.run(r.id)
		err1 := run.SubmitResult(s.ctx, w.Call, result)
		err2 := run.SubmitResult(s.ctx, w.Call, result)
		if err1 == nil {
			s.taken(r, w.Step, w.Call, c, outcome)
			if err2 != nil {
				s.problem("op %02d: the same result given again for call %s was refused: %v", n, w.Call, err2)
			}
		}
		s.logf("%02d %s submit %s of %s twice -> %s | %s", n, x.name, w.Step, r.id, gtSummary(err1), gtSummary(err2))
	default:
		// Two results at once, from two executors: the first stands.
		other := outcome + " (disputed)"
		bogus, _ := json.Marshal(other)
		i := s.rng.IntN(3)
		xs := [2]*gtExec{s.ex[i], s.ex[(i+1)%3]}
		results := [2]json.RawMessage{result, bogus}
		var errs [2]error
		var wg sync.WaitGroup
		for j := range 2 {
			wg.Go(func() {
				run, err := xs[j].run(r.id)
				if err == nil {
					err = run.SubmitResult(s.ctx, w.Call, results[j])
				}
				errs[j] = err
			})
		}
		wg.Wait()
		s.logf("%02d %s+%s submit two results at once for %s of %s -> %s | %s", n, xs[0].name, xs[1].name, w.Step, r.id, gtSummary(errs[0]), gtSummary(errs[1]))
		switch {
		case errs[0] == nil && errs[1] == nil:
			s.problem("op %02d: two different results for call %s were both taken", n, w.Call)
		case errs[0] == nil || errs[1] == nil:
			won := 0
			if errs[0] != nil {
				won = 1
			}
			if !errors.Is(errs[1-won], planexec.ErrNotPending) {
				s.problem("op %02d: the result that lost the race for call %s failed otherwise than ErrNotPending: %v", n, w.Call, errs[1-won])
			}
			s.taken(r, w.Step, w.Call, c, []string{outcome, other}[won])
			if rec, err := s.st.LoadPlan(s.ctx, s.tenant, r.id); err == nil {
				if got := rec.Steps[w.Step]; !jsonEqual(got.Outcome, results[won]) {
					s.problem("op %02d: call %s took result %s but its step records %s", n, w.Call, results[won], got.Outcome)
				}
			}
		}
	}
}

// handBacks counts the times run r handed call back, in its history.
func (s *gtSeq) handBacks(r *gtRun, call string) (int, error) {
	run, err := s.ex[0].run(r.id)
	if err != nil {
		return 0, err
	}
	n := 0
	var after int64
	for {
		events, err := run.History(s.ctx, after, 500)
		if err != nil {
			return 0, err
		}
		for _, e := range events {
			if e.Kind == planexec.EventToolCallHandedBack && e.Call == call {
				n++
			}
			after = e.Seq
		}
		if len(events) < 500 {
			return n, nil
		}
	}
}

// truth is what the ledger says of key: applied, with the outcome the
// tool returned.
func (s *gtSeq) truth(key planexec.Key) (planexec.Resolution, error) {
	e, done, err := s.ledger.find(s.ctx, key.Digest)
	if err != nil || !done {
		return planexec.Resolution{}, err
	}
	out, _ := json.Marshal(e.Outcome)
	return planexec.Resolution{Applied: true, Outcome: out}, nil
}

// resolve settles key by what the ledger says, through the run holding it:
// r, or else the first run that does not say it holds none.
func (s *gtSeq) resolve(x *gtExec, r *gtRun, key planexec.Key) string {
	res, err := s.truth(key)
	if err != nil {
		return err.Error()
	}
	order := append([]*gtRun{r}, slices.DeleteFunc(s.live(), func(o *gtRun) bool { return o == r })...)
	for _, o := range order {
		run, err := x.run(o.id)
		if err != nil {
			return err.Error()
		}
		err = run.Resolve(s.ctx, key, res)
		if errors.Is(err, planexec.ErrNoRecord) {
			continue
		}
		return fmt.Sprintf("by %s applied %v -> %s", o.id, res.Applied, gtSummary(err))
	}
	return "no run holds it"
}

func (s *gtSeq) opResolve(n int, x *gtExec, on gtWaiting) {
	r, w := on.r, on.w
	if s.rng.IntN(10) < 3 {
		// By a run that never asked for anything of that tool: it holds
		// nothing to settle.
		var wrong []*gtRun
		for _, o := range s.live() {
			if o != r && !o.uses(w.Tool) {
				wrong = append(wrong, o)
			}
		}
		if len(wrong) > 0 {
			o := gtPick(s.rng, wrong)
			res, err := s.truth(w.Key)
			if err == nil {
				var run *planexec.Run
				if run, err = x.run(o.id); err == nil {
					err = run.Resolve(s.ctx, w.Key, res)
				}
			}
			s.logf("%02d %s resolve %s of %s by the wrong run %s -> %s", n, x.name, w.Step, r.id, o.id, gtSummary(err))
			if !errors.Is(err, planexec.ErrNoRecord) {
				s.problem("op %02d: run %s, which never claimed key %s, resolving it got %v, want ErrNoRecord", n, o.id, w.Key.Digest, err)
			}
			return
		}
	}
	s.logf("%02d %s resolve %s of %s %s", n, x.name, w.Step, r.id, s.resolve(x, r, w.Key))
}

func (s *gtSeq) opRecover(n int, x *gtExec) {
	rec, err := x.ex.Recover(s.ctx, 0)
	var got []string
	for _, r := range rec {
		if r.Tenant == s.tenant {
			got = append(got, r.RunID+": "+gtSummary(r.Err))
		}
	}
	s.logf("%02d %s recover -> %v %s", n, x.name, err, strings.Join(got, "; "))
}

func (s *gtSeq) opPrune(n int, x *gtExec) {
	s.clock.Advance(gtWindow + time.Duration(1+s.rng.IntN(30))*time.Minute)
	p, err := x.ex.Prune(s.ctx, s.tenant, gtWindow)
	clear(s.decided) // every decision is older than retention now
	var gone []string
	for _, r := range s.live() {
		if _, ok := s.info(r); !ok {
			r.pruned = true
			gone = append(gone, r.id)
		}
	}
	s.logf("%02d %s prune after moving the clock past retention -> %+v %v; gone: %v", n, x.name, p, err, gone)
}

func (s *gtSeq) opAdvance(n int) {
	d := time.Duration(1+s.rng.IntN(40)) * time.Minute
	s.clock.Advance(d)
	s.logf("%02d clock +%v", n, d)
}

// opAbandon runs an execution whose caller gives up at a random point of
// it: its context is cancelled there.
func (s *gtSeq) opAbandon(n int, x *gtExec, live []*gtRun) {
	var r *gtRun
	first := len(live) == 0 || (len(s.runs) < 10 && s.rng.IntN(3) == 0)
	if first {
		r = s.newRun(s.rng.IntN(2) == 0)
	} else {
		r = gtPick(s.rng, live)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	h := &gtAbandon{cancel: cancel}
	h.left.Store(int64(1 + s.rng.IntN(12)))
	x.hook.Store(h)
	err := gtExecute(ctx, x, r, first)
	x.hook.Store(nil)
	if first {
		s.started(r)
	}
	where, _ := h.where.Load().(string)
	if where == "" {
		where = "nowhere: it ended first"
	} else {
		s.abandoned++
	}
	what := r.id
	if first {
		what += " " + r.describe()
	}
	s.logf("%02d %s abandon %s at %s -> %s", n, x.name, what, where, gtSummary(err))
}

// gtSpec is what a child does: one execution of one run.
type gtSpec struct {
	Tenant string         `json:"tenant"`
	Run    string         `json:"run"`
	First  bool           `json:"first"`
	Plan   *planexec.Plan `json:"plan,omitempty"`
	Script []string       `json:"script,omitempty"`
	Clock  time.Time      `json:"clock"`
}

// opCrash runs an execution in a child process and kills it at a random
// point.
func (s *gtSeq) opCrash(n int, live []*gtRun) {
	s.crashes--
	var r *gtRun
	first := len(live) == 0 || (len(s.runs) < 10 && s.rng.IntN(2) == 0)
	if first {
		r = s.newRun(s.rng.IntN(2) == 0)
	} else {
		r = gtPick(s.rng, live)
	}
	spec := gtSpec{Tenant: s.tenant, Run: r.id, First: first, Clock: s.clock.Now(), Script: r.script}
	if r.rounds == nil {
		spec.Plan = &r.plan
	}
	killAt := 1 + s.rng.IntN(30)
	what := r.id
	if first {
		what += " " + r.describe()
	}
	s.logf("%02d child runs %s, killed at its point %d -> %s", n, what, killAt, s.child(spec, killAt))
	if first {
		s.started(r)
	}
}

// child starts a child doing spec, and kills it with SIGKILL at the
// killAt-th point it reaches, if it gets that far.
func (s *gtSeq) child(spec gtSpec, killAt int) string {
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run="+exactRun(s.top), "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvTest+"="+s.top, gtEnvSpec+"="+string(b))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		s.problem("op: %v", err)
		return err.Error()
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.problem("op: %v", err)
		return err.Error()
	}
	if err := cmd.Start(); err != nil {
		s.problem("op: starting a child: %v", err)
		return err.Error()
	}
	var hung atomic.Bool
	timer := time.AfterFunc(crashPatience, func() {
		hung.Store(true)
		_ = cmd.Process.Kill()
	})
	reached, end, where := 0, "", ""
	var said []string
	sc := bufio.NewScanner(stdout)
read:
	for sc.Scan() {
		words := strings.Fields(sc.Text())
		if len(words) < 2 || words[0] != crashWord {
			said = append(said, sc.Text())
			continue
		}
		switch words[1] {
		case "at":
			reached++
			if reached == killAt {
				_ = cmd.Process.Kill()
				where = strings.Join(words[2:], " ")
				break read
			}
			_, _ = io.WriteString(stdin, "\n")
		case "end":
			end = strings.Join(words[2:], " ")
		}
	}
	_ = stdin.Close()
	waitErr := cmd.Wait()
	timer.Stop()
	switch {
	case hung.Load():
		s.problem("op: a child was still running after %v; it printed: %s", crashPatience, tail(said, stderr.String()))
		return "hung"
	case where != "":
		s.killed++
		return "killed at " + where
	case end != "" && waitErr == nil:
		return "ended first: " + end
	default:
		s.problem("op: a child failed (%v): %s %s", waitErr, end, tail(said, stderr.String()))
		return "failed"
	}
}

// gtChild does what the parent's spec says, stopping at each point until
// the parent says go on, and exits the process.
func gtChild(t *testing.T, d Durable, raw string) {
	c := newChildTalk()
	var spec gtSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		c.end(1, "the spec: "+err.Error())
	}
	stores, effects := d.Open(t)
	if stores.Store == nil || effects == nil {
		c.end(1, "Durable.Open returned a nil store or nil Effects")
	}
	ladder, err := gtLadder(spec.Tenant)
	if err != nil {
		c.end(1, err.Error())
	}
	x, err := newGtExec("child", spec.Tenant, stores.Store, ladder, gtLedger{fx: effects, name: spec.Tenant}, func() time.Time { return spec.Clock }, c.at)
	if err != nil {
		c.end(1, err.Error())
	}
	r := &gtRun{id: spec.Run, script: spec.Script}
	if spec.Plan != nil {
		r.plan = *spec.Plan
	} else {
		r.rounds = [][]planexec.Step{} // its script is what matters here
	}
	err = gtExecute(context.Background(), x, r, spec.First)
	c.end(0, gtSummary(err))
}

// settle resumes every live run until none is left running, interrupted or
// between rounds; drain also approves every request, answers every call and
// resolves every doubt by the ledger, and resumes failed runs, so that the
// runs finish where they can.
func (s *gtSeq) settle(drain bool) {
	x := s.ex[0]
	tried := map[string]int{}
	for pass := range 12 {
		moved := false
		var wait time.Duration
		runs, infos := s.standing()
		for i, r := range runs {
			info, again := infos[i], false
			switch info.Status {
			case planexec.RunRunning, planexec.RunInterrupted, planexec.RunPlanning:
				again = true
			case planexec.RunFailed:
				tried[r.id]++
				again = drain && tried[r.id] <= 2
			case planexec.RunAwaitingApproval, planexec.RunAwaitingTool, planexec.RunInDoubt:
				if !drain {
					continue
				}
				again = true
				for _, w := range info.Waiting {
					switch {
					case w.Request != "":
						_, err := s.decide(x, r, w, "drain", planexec.Approved)
						s.logf("   approve %s of %s -> %s", gtWaitName(w), r.id, gtSummary(err))
					case w.Call != "":
						c, outcome, err := s.perform(r, w)
						if err == nil {
							result, _ := json.Marshal(outcome)
							run, _ := x.run(r.id)
							if err = run.SubmitResult(s.ctx, w.Call, result); err == nil {
								s.taken(r, w.Step, w.Call, c, outcome)
							}
						}
						s.logf("   answer %s of %s -> %s", w.Step, r.id, gtSummary(err))
					case w.Key.Digest != "":
						s.logf("   resolve %s of %s %s", w.Step, r.id, s.resolve(x, r, w.Key))
					}
				}
			}
			if !again {
				continue
			}
			moved = true
			err := gtExecute(s.ctx, x, r, false)
			s.logf("   pass %d: resume %s (%s) -> %s", pass+1, r.id, info.Status, gtSummary(err))
			var ind *planexec.IndeterminateOutcomeError
			switch {
			case errors.As(err, &ind) && !ind.InDoubt:
				wait = max(wait, time.Until(ind.LeaseExpires))
			case errors.Is(err, planexec.ErrRunBusy):
				// A dead execution holds the run until its lease runs out,
				// by the executors' clock.
				s.clock.Advance(crashLease)
			}
		}
		if !moved {
			return
		}
		if wait > 0 {
			time.Sleep(min(wait, time.Second) + 5*time.Millisecond)
		}
	}
}

// gtRoundOf is the round a stored plan document is of; 0 for a plan on
// its own.
func gtRoundOf(doc json.RawMessage) int {
	var d struct {
		Round int `json:"round"`
	}
	_ = json.Unmarshal(doc, &d)
	return d.Round
}

// gtPastRounds are the earlier rounds of a stored run of rounds, as its
// planner is told them.
func gtPastRounds(doc json.RawMessage) []planexec.Round {
	var d struct {
		Rounds *struct {
			Past []planexec.Round `json:"past"`
		} `json:"rounds"`
	}
	if json.Unmarshal(doc, &d) != nil || d.Rounds == nil {
		return nil
	}
	return d.Rounds.Past
}

// check checks the four properties over the ledger and the store.
func (s *gtSeq) check(phase string) {
	all, err := s.ledger.all(s.ctx)
	if err != nil {
		s.problem("reading the ledger: %v", err)
		return
	}
	var effects []gtEffect
	for _, e := range all {
		if e.Tenant == s.tenant {
			effects = append(effects, e)
		}
	}
	s.checkOnce(phase, effects)
	s.checkApprovals(phase, effects)
	s.checkCeiling(phase, effects)
	s.checkRecorded(phase, effects)
}

// summary says what a sequence did, to see that it did something.
func (s *gtSeq) summary(ops int) string {
	all, _ := s.ledger.all(s.ctx)
	by := map[string]int{}
	person, grant := 0, 0
	for _, e := range all {
		by[e.Tool]++
		if _, approver := s.clearedBy(e); approver != "" {
			person++
		}
		if e.Grant != "" {
			grant++
		}
	}
	completed := 0
	runs, infos := s.standing()
	for i := range runs {
		if infos[i].Status == planexec.RunCompleted {
			completed++
		}
	}
	return fmt.Sprintf("%d operations, %d runs (%d completed at the end), %d effects %v (%d cleared by a person, %d under the grant), %d decisions, %d executions abandoned, %d children killed",
		ops, len(s.runs), completed, len(all), by, person, grant, s.nPerson, s.abandoned, s.killed)
}

// checkOnce: no irreversible effect twice in its scope.
func (s *gtSeq) checkOnce(phase string, effects []gtEffect) {
	byScope := map[string][]gtEffect{}
	for _, e := range effects {
		if gtIrreversible[e.Tool] {
			byScope[e.Scope] = append(byScope[e.Scope], e)
		}
	}
	for scope, es := range byScope {
		if len(es) > 1 {
			s.problem("(1) %s: irreversible effect %s was done %d times: %s", phase, scope, len(es), gtList(es))
		}
	}
}

// clearedBy is the request and approver of the decision that cleared e,
// if a person's did.
func (s *gtSeq) clearedBy(e gtEffect) (request, approver string) {
	if e.Call == "" {
		return e.Request, e.Approver
	}
	approver = s.approver[e.ID]
	if d, ok := s.decisions[approver]; ok {
		request = d.request
	}
	return request, approver
}

// checkApprovals: every effect a person cleared traces to one request of
// its own step, approved by that person; no two effects to one request;
// and what needs a person had one.
func (s *gtSeq) checkApprovals(phase string, effects []gtEffect) {
	byRequest := map[string][]gtEffect{}
	for _, e := range effects {
		request, approver := s.clearedBy(e)
		if e.Call != "" {
			if _, taken := s.approver[e.ID]; !taken {
				continue // its result is not in: nothing cleared it yet
			}
		}
		if approver == "" {
			if gtPersonal[e.Tool] || (e.Tool == gtPay && e.Grant == "") {
				s.problem("(3) %s: effect %s acted with neither a person's approval nor a grant", phase, e)
			}
			continue
		}
		byRequest[request] = append(byRequest[request], e)
		d, ok := s.decisions[approver]
		switch {
		case !ok:
			s.problem("(3) %s: effect %s was cleared by approver %q, a decision nobody gave", phase, e, approver)
			continue
		case d.request != request:
			s.problem("(3) %s: effect %s was cleared as request %s by the decision given for request %s", phase, e, request, d.request)
		case d.status != planexec.Approved:
			s.problem("(3) %s: effect %s was cleared by a decision that said %s", phase, e, d.status)
		}
		if q := d.req; q != nil && (q.RunID != e.Run || q.PlanID != e.Plan || q.Round != e.Round || q.StepID != e.Step || q.Tool != e.Tool) {
			s.problem("(3) %s: effect %s (plan %s) was cleared by request %s, which asked for run %s plan %s round %d step %s tool %s",
				phase, e, e.Plan, request, q.RunID, q.PlanID, q.Round, q.StepID, q.Tool)
		}
	}
	for request, es := range byRequest {
		if len(es) > 1 {
			s.problem("(3) %s: one approval, request %s, cleared %d effects: %s", phase, request, len(es), gtList(es))
		}
	}
}

// checkCeiling: what acted under the grant, with no person, within any
// window of the grant's length, sums to at most its ceiling. A window ends
// at each such act and holds the acts after its start (as the stores
// count a spend in the window of a later one).
func (s *gtSeq) checkCeiling(phase string, effects []gtEffect) {
	var acts []gtEffect
	for _, e := range effects {
		if e.Tool == gtPay && e.Grant != "" && e.Request == "" {
			acts = append(acts, e)
			if !strings.EqualFold(e.Cur, gtCurrency) {
				s.problem("(2) %s: effect %s in %s acted under a grant in %s", phase, e, e.Cur, gtCurrency)
			}
		}
	}
	for _, last := range acts {
		sum := decimal.Zero
		var in []string
		for _, e := range acts {
			if e.At.After(last.At.Add(-gtWindow)) && !e.At.After(last.At) {
				a, _ := decimal.NewFromString(e.Amount)
				sum = sum.Add(a)
				in = append(in, e.String())
			}
		}
		if sum.GreaterThan(gtCeiling) {
			s.problem("(2) %s: %s %s acted under grant %s without a person within %v of %s, past its ceiling of %s: %s",
				phase, sum, gtCurrency, gtGrantID(s.tenant), gtWindow, last.At.Format("15:04:05"), gtCeiling, strings.Join(in, "; "))
		}
	}
}

// checkRecorded: every effect is on its run's record, or its run stands in
// doubt on its key, or awaits its call's result.
func (s *gtSeq) checkRecorded(phase string, effects []gtEffect) {
	byID := map[string]*gtRun{}
	for _, r := range s.runs {
		byID[r.id] = r
	}
	recs := map[string]*store.PlanRecord{}
	for _, e := range effects {
		r := byID[e.Run]
		if r == nil || r.pruned {
			continue // pruned: its record was dropped on purpose
		}
		rec, ok := recs[e.Run]
		if !ok {
			var err error
			if rec, err = s.st.LoadPlan(s.ctx, s.tenant, e.Run); err != nil {
				s.problem("(4) %s: effect %s: the run's record cannot be read: %v", phase, e, err)
				recs[e.Run] = nil
				continue
			}
			recs[e.Run] = rec
		}
		if rec == nil {
			continue
		}
		outcomes := []string{e.Outcome}
		if e.Call != "" {
			outcomes = nil
			if c := s.calls[e.Call]; c != nil {
				outcomes = c.accepted
			}
		}
		same := func(raw json.RawMessage) bool {
			for _, o := range outcomes {
				b, _ := json.Marshal(o)
				if jsonEqual(raw, b) {
					return true
				}
			}
			return false
		}
		waits := func(match func(store.Wait) bool) bool { return slices.ContainsFunc(rec.Waiting, match) }
		if rec.PlanID == e.Plan {
			st, ok := rec.Steps[e.Step]
			switch {
			case ok && st.PlanID == e.Plan && st.Status == planexec.StepDone && same(st.Outcome):
			case rec.Status == store.RunInDoubt && e.Key != "" && waits(func(w store.Wait) bool { return w.Key == e.Key }):
			case e.Call != "" && waits(func(w store.Wait) bool { return w.Call == e.Call }):
			case !gtIrreversible[e.Tool] && rec.Status != store.RunCompleted && !(ok && st.PlanID == e.Plan && st.Status == planexec.StepDone):
				// A reversible step whose holder vanished after acting runs
				// again when its run goes on (its tool looks first): not yet.
			default:
				s.problem("(4) %s: effect %s is lost: the run is %s and its step's record is %+v", phase, e, rec.Status, st)
			}
			continue
		}
		found, told := false, "not in it"
		for _, round := range gtPastRounds(rec.Plan) {
			if round.Number != e.Round {
				continue
			}
			for _, o := range round.Observations {
				if o.Step == e.Step {
					found = found || o.Status == string(planexec.StepDone) && same(o.Outcome)
					told = fmt.Sprintf("%s %s %s", o.Status, o.Outcome, o.Error)
				}
			}
		}
		if !found {
			s.problem("(4) %s: effect %s of plan %s is lost: the run is %s in plan %s, and its round's record says of the step: %s",
				phase, e, e.Plan, rec.Status, rec.PlanID, told)
		}
	}
}
