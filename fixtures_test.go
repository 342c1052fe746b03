package planexec_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// The trip of the seed: search flights, then book one (irreversible).

type Search struct {
	Origin      string `json:"origin" validate:"len=3"`
	Destination string `json:"destination" validate:"len=3"`
}

type Booking struct {
	Flight string          `json:"flight"`
	Seats  int             `json:"seats" validate:"min=1,max=9"`
	Fare   decimal.Decimal `json:"fare,omitzero"`
	Note   string          `json:"note,omitempty"`
}

type Refund struct {
	Order    string          `json:"order"`
	Amount   decimal.Decimal `json:"amount"`
	Currency string          `json:"currency"`
}

// call is what a tool actually received.
type call struct {
	Tool string
	Args any
	Key  string
}

// recorder remembers every call the tools received, in order.
type recorder struct {
	mu    sync.Mutex
	calls []call
	// fail, if set, decides a tool's error by step tool name.
	fail func(tool string, args any) error
	// delay, if set, is how long each call takes.
	delay time.Duration
}

func (r *recorder) record(ctx context.Context, tool string, args any) error {
	key, _ := planexec.IdempotencyKey(ctx)
	r.mu.Lock()
	r.calls = append(r.calls, call{Tool: tool, Args: args, Key: key})
	fail := r.fail
	r.mu.Unlock()
	if r.delay > 0 {
		select {
		case <-time.After(r.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		return fail(tool, args)
	}
	return nil
}

func (r *recorder) Calls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// tools builds the trip's tools over the recorder. Each tool's contract
// options come from opts when given there, else from the trip's defaults:
// book_flight irreversible and keyed by flight and seats, refund keyed by
// order.
func (r *recorder) tools(opts ...map[string][]planexec.ContractOption) []*planexec.Tool {
	o := map[string][]planexec.ContractOption{
		"book_flight": {planexec.Irreversible(), planexec.KeyArguments("flight", "seats")},
		"refund":      {planexec.KeyArguments("order")},
	}
	for _, m := range opts {
		for k, v := range m {
			o[k] = v
		}
	}
	return []*planexec.Tool{
		planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s Search) ([]string, error) {
			return []string{"BA117", "VS3"}, r.record(ctx, "search_flights", s)
		}, o["search_flights"]...),
		planexec.MustTool("book_flight", "Book a flight.", func(ctx context.Context, b Booking) (string, error) {
			if err := r.record(ctx, "book_flight", b); err != nil {
				return "", err
			}
			return "PNR-" + b.Flight, nil
		}, o["book_flight"]...),
		planexec.MustTool("refund", "Refund an order.", func(ctx context.Context, f Refund) (string, error) {
			return "refunded " + f.Order, r.record(ctx, "refund", f)
		}, o["refund"]...),
	}
}

var allTools = []string{"search_flights", "book_flight", "refund"}

// approve is a gate that grants everything and remembers what it was asked.
type approve struct {
	mu    sync.Mutex
	asked []planexec.ApprovalRequest
	// answer, if set, decides instead of granting.
	answer func(planexec.ApprovalRequest) planexec.Decision
}

func (g *approve) RequestApproval(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, req)
	if g.answer != nil {
		return g.answer(req), nil
	}
	return req.Approve("dana"), nil
}

func (g *approve) Asked() []planexec.ApprovalRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]planexec.ApprovalRequest(nil), g.asked...)
}

// setup is what a test builds a run from: the executor's config, the run's
// delegation and options.
type setup struct {
	planexec.Config
	Delegation planexec.Delegation
	Options    []planexec.RunOption
}

// newExecutor builds an executor over the recorder's tools with a granting
// gate, and a run of it for run-1 of tenant acme; edit adjusts the setup
// first.
func newExecutor(t testing.TB, r *recorder, edit func(*setup)) (*planexec.Run, *approve) {
	t.Helper()
	gate := &approve{}
	s := setup{
		Config:     planexec.Config{Tools: r.tools(), Gate: gate},
		Delegation: planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "dana", Agent: "courier"},
	}
	if edit != nil {
		edit(&s)
	}
	ex, err := planexec.NewExecutor(s.Config)
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	run, err := ex.Run(s.Delegation, s.Options...)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return run, gate
}

// step builds a plan step; args is marshalled unless it is already a string.
func step(id, tool string, args any, deps ...string) planexec.Step {
	var raw json.RawMessage
	switch a := args.(type) {
	case string:
		raw = json.RawMessage(a)
	default:
		b, err := json.Marshal(a)
		if err != nil {
			panic(err)
		}
		raw = b
	}
	return planexec.Step{ID: id, Tool: tool, Arguments: raw, DependsOn: deps}
}

// tripPlan is the seed's plan: s1 searches, s2 books after it.
func tripPlan() planexec.Plan {
	return planexec.Plan{Goal: "get them to New York", Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s2", "book_flight", `{"flight":"BA117","seats":1}`, "s1"),
	}}
}

// kinds lists the kinds of events, in order.
func kinds(es []planexec.Event) []planexec.EventKind {
	out := make([]planexec.EventKind, len(es))
	for i, e := range es {
		out[i] = e.Kind
	}
	return out
}

// count counts events of kind.
func count(es []planexec.Event, kind planexec.EventKind) int {
	n := 0
	for _, e := range es {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func toolNames(cs []call) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Tool
	}
	return out
}

// patience bounds how long a test waits for something that must happen. It
// only turns a hang into a failure; no test measures time with it.
const patience = 5 * time.Second

// findEvent returns the index of the first event of kind for stepID (""
// matches any step), or -1.
func findEvent(es []planexec.Event, kind planexec.EventKind, stepID string) int {
	for i, e := range es {
		if e.Kind == kind && (stepID == "" || e.StepID == stepID) {
			return i
		}
	}
	return -1
}

// callsOf counts the calls tool received.
func callsOf(r *recorder, tool string) int {
	n := 0
	for _, c := range r.Calls() {
		if c.Tool == tool {
			n++
		}
	}
	return n
}

// holdFirst blocks the first caller of hold until open; later callers pass.
type holdFirst struct {
	entered chan struct{}
	release chan struct{}
	first   atomic.Bool
	once    sync.Once
}

func newHoldFirst() *holdFirst {
	return &holdFirst{entered: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdFirst) hold() {
	if h.first.CompareAndSwap(false, true) {
		close(h.entered)
		<-h.release
	}
}

func (h *holdFirst) open() { h.once.Do(func() { close(h.release) }) }

// edits applies several setup edits in order.
func edits(es ...func(*setup)) func(*setup) {
	return func(s *setup) {
		for _, e := range es {
			e(s)
		}
	}
}

// withStore shares a store.
func withStore(st store.Store) func(*setup) {
	return func(s *setup) { s.Store = st }
}

// withHolder names the executor in its claims.
func withHolder(name string) func(*setup) {
	return func(s *setup) { s.Holder = name }
}

// withScope narrows the run's delegation to tools.
func withScope(tools ...string) func(*setup) {
	return func(s *setup) { s.Delegation.Scope = tools }
}

// withContracts rebuilds the trip's tools with other contract options.
func withContracts(r *recorder, opts map[string][]planexec.ContractOption) func(*setup) {
	return func(s *setup) { s.Tools = r.tools(opts) }
}

// failOnce makes tool fail with err on its first call only.
func failOnce(r *recorder, tool string, err error) {
	failed := false
	r.mu.Lock()
	r.fail = func(name string, _ any) error {
		if name == tool && !failed {
			failed = true
			return err
		}
		return nil
	}
	r.mu.Unlock()
}

// oneTool builds a run of an executor over one tool, name, taking A, with a
// granting gate.
func oneTool[A any](t testing.TB, name string, call func(context.Context, A) (string, error), opts ...planexec.ContractOption) (*planexec.Run, *approve) {
	t.Helper()
	tool, err := planexec.NewTool(name, "The "+name+" tool.", call, opts...)
	if err != nil {
		t.Fatalf("NewTool: %v", err)
	}
	gate := &approve{}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tool}, Gate: gate})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-1", Tenant: "acme", Agent: "a"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return run, gate
}

// mustContract builds a contract for a test, or fails it.
func mustContract[T any](name string, opts ...planexec.ContractOption) *planexec.Contract {
	c, err := planexec.NewContract[T](name, opts...)
	if err != nil {
		panic(err)
	}
	return c
}

// storedPlan is a plan record holding p as a store would: its document,
// and the delegation of dana's courier.
func storedPlan(t testing.TB, tenant, run string, p planexec.Plan, status store.RunStatus) *store.PlanRecord {
	t.Helper()
	doc, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	d, err := json.Marshal(planexec.Delegation{RunID: run, Tenant: tenant, User: "dana", Agent: "courier"})
	if err != nil {
		t.Fatal(err)
	}
	return &store.PlanRecord{Version: store.RecordVersion, Tenant: tenant, RunID: run, PlanID: p.ID, Plan: doc, Status: status, Delegation: d}
}

// planOf decodes the plan a record holds.
func planOf(t testing.TB, rec *store.PlanRecord) planexec.Plan {
	t.Helper()
	var p planexec.Plan
	if err := json.Unmarshal(rec.Plan, &p); err != nil {
		t.Fatalf("the record's plan is not a plan document: %v", err)
	}
	return p
}
