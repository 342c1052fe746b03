package planexec_test

// Tools and their contracts: what NewTool refuses, what a contract checks on
// its own, what RequireApproval sends to a person, and which tools
// NewExecutor refuses to run without someone to ask.

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

func TestNewToolRefusesAToolWithNoFunctionOrNoName(t *testing.T) {
	_, err := planexec.NewTool[Search, []string]("search_flights", "Find flights.", nil)
	vConfigError(t, err, "search_flights")

	_, err = planexec.NewTool("", "Find flights.", func(context.Context, Search) ([]string, error) { return nil, nil })
	ce := vConfigError(t, err, "")
	if !strings.Contains(ce.Why, "name") {
		t.Errorf("Why = %q, want it to say the tool needs a name", ce.Why)
	}

	// MustTool panics with the same error.
	func() {
		defer func() {
			err, _ := recover().(error)
			vConfigError(t, err, "search_flights")
		}()
		planexec.MustTool[Search, []string]("search_flights", "Find flights.", nil)
	}()
}

func TestNewExecutorRefusesANilToolAndTwoToolsOfOneName(t *testing.T) {
	search := (&recorder{}).tools()[0]
	_, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{search, nil}})
	vConfigError(t, err, "")

	_, err = planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{search, (&recorder{}).tools()[0]}})
	vConfigError(t, err, "search_flights")
}

func TestAnExecutorWithNoToolsCanStillDecideAndForget(t *testing.T) {
	ex, err := planexec.NewExecutor(planexec.Config{Store: memory.New()})
	if err != nil {
		t.Fatalf("NewExecutor with no tools: %v", err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-1", Tenant: "acme"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	ctx := context.Background()
	// It checks a decision against what the store says the run awaits:
	// nothing, here.
	if err := run.Decide(ctx, planexec.Decision{RequestID: "req-1", Status: planexec.Approved, Approver: "dana"}); !errors.Is(err, planexec.ErrNotPending) {
		t.Errorf("Decide for a run not on record: err = %v, want ErrNotPending", err)
	}
	if err := run.Forget(ctx); err != nil {
		t.Errorf("Forget: %v", err)
	}
	// There is nothing to plan with.
	var de *planexec.DelegationError
	if _, err := run.Plan(ctx, &vNeverAsked{}, "anything"); !errors.As(err, &de) {
		t.Errorf("Plan with no tools: err = %v, want a *DelegationError", err)
	}
}

// ---- Contract.Check ----

func TestAContractChecksArgumentsOnItsOwnAsValidationWould(t *testing.T) {
	r := &recorder{}
	book := vTripContract("book_flight")
	if err := book.Check(json.RawMessage(`{"flight":"BA117","seats":2,"fare":412.50,"note":null}`)); err != nil {
		t.Fatalf("good arguments: %v", err)
	}
	order := vNewContract[vOrder](t, "order", planexec.KeyArguments("order"))
	itinerary := vNewContract[vItinerary](t, "itinerary")
	cases := []struct {
		name     string
		contract *planexec.Contract
		args     string
		path     string
		why      string
	}{
		{"an unknown key", book, `{"flight":"BA117","seats":1,"class":"J"}`, "/class", "unknown key"},
		{"a key in the wrong case", book, `{"Flight":"BA117","seats":1}`, "/Flight", "differs only in case"},
		{"a string for an integer", book, `{"flight":"BA117","seats":"1"}`, "/seats", "expected integer, got string"},
		{"a missing key", book, `{"flight":"BA117"}`, "/seats", "missing required key"},
		{"a failed rule", book, `{"flight":"BA117","seats":10}`, "/seats", "fails rule max=9"},
		{"not an object", book, `[1]`, "", "expected object"},
		{"no arguments at all", book, ``, "", ""},
		{"a missing key argument", order, `{"note":"x"}`, "/order", "key argument missing"},
		{"a rule deep inside", itinerary, `{"ref":"R","trip":"NY","passengers":[{"name":"Ann"},{"name":""}],"contact":{"email":"a@b"},"budget":1}`, "/passengers/1/name", "fails rule required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.contract.Check(json.RawMessage(c.args))
			pv := vRefusal(t, err, planexec.ReasonArguments)
			if pv.Tool != c.contract.Tool() || pv.Step != "" {
				t.Errorf("refusal names tool %q step %q, want tool %q and no step", pv.Tool, pv.Step, c.contract.Tool())
			}
			vFindViolation(t, pv.Violations, c.path, c.why)
		})
	}
	// What Check says is what validating a step says.
	run, _ := newExecutor(t, r, nil)
	args := `{"Flight":"BA117","seats":"1","class":"J"}`
	var alone, inPlan *planexec.PlanValidationError
	if !errors.As(book.Check(json.RawMessage(args)), &alone) ||
		!errors.As(run.Validate(planexec.Plan{Steps: []planexec.Step{step("s1", "book_flight", args)}}), &inPlan) {
		t.Fatal("the arguments were not refused both ways")
	}
	if !slices.Equal(alone.Violations, inPlan.Violations) {
		t.Errorf("Check says %v, Validate says %v", alone.Violations, inPlan.Violations)
	}
	if len(r.Calls()) != 0 {
		t.Errorf("checking arguments called tools: %v", toolNames(r.Calls()))
	}
}

// ---- RequireApproval ----

func TestRequireApprovalSendsAReversibleToolsStepsToAPersonFirst(t *testing.T) {
	requireRefund := map[string][]planexec.ContractOption{"refund": {planexec.KeyArguments("order"), planexec.RequireApproval()}}
	plan := planexec.Plan{Steps: []planexec.Step{
		cSearch("s1", "LHR"),
		step("s2", "refund", `{"order":"o-1","amount":5,"currency":"GBP"}`, "s1"),
	}}

	r := &recorder{}
	run, gate := newExecutor(t, r, withContracts(r, requireRefund))
	res, err := run.Execute(context.Background(), plan)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	asked := gate.Asked()
	if len(asked) != 1 || asked[0].StepID != "s2" || asked[0].Tool != "refund" || asked[0].Irreversible {
		t.Fatalf("the gate was asked %+v, want once, about the reversible refund s2", asked)
	}
	if !strings.Contains(asked[0].Why, "requires approval") {
		t.Errorf("Why = %q, want it to say the tool requires approval", asked[0].Why)
	}
	if got := res.Steps["s2"].ApprovedBy; got != "dana" {
		t.Errorf("s2 approved by %q, want dana", got)
	}
	es := run.Events()
	if req, started := findEvent(es, planexec.EventApprovalRequired, "s2"), findEvent(es, planexec.EventStepStarted, ""); req < 0 || req > started {
		t.Errorf("a step started before the person was asked: %v", kinds(es))
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "refund"}) {
		t.Errorf("calls = %v", got)
	}

	// Denied, nothing runs: not even the search the refund does not need
	// approval for.
	r = &recorder{}
	run, gate = newExecutor(t, r, withContracts(r, requireRefund))
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Deny("dana", "not this one") }
	_, err = run.Execute(context.Background(), plan)
	var denied *planexec.ApprovalDeniedError
	if !errors.As(err, &denied) || denied.Step != "s2" {
		t.Fatalf("err = %v, want the refund denied", err)
	}
	if len(r.Calls()) != 0 {
		t.Errorf("tools ran after a denial: %v", toolNames(r.Calls()))
	}

	// Without RequireApproval the same refund is nobody's to clear.
	r = &recorder{}
	run, gate = newExecutor(t, r, nil)
	if _, err := run.Execute(context.Background(), plan); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if len(gate.Asked()) != 0 {
		t.Errorf("a refund without RequireApproval was put to a person: %+v", gate.Asked())
	}
}

// ---- who NewExecutor requires ----

func TestNewExecutorRefusesAToolThatNeedsAPersonWithNoGateAndNoLadderClass(t *testing.T) {
	r := &recorder{}
	requireRefund := map[string][]planexec.ContractOption{"refund": {planexec.RequireApproval()}}
	ladderOf := func(tools ...string) *planexec.AutonomyLadder {
		l, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: "covered", Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	trip := r.tools()
	search, book := trip[0], trip[1]
	refund := r.tools(requireRefund)[2]
	cases := []struct {
		name   string
		tools  []*planexec.Tool
		ladder *planexec.AutonomyLadder
		refuse string // the tool named, or "" when the executor is built
	}{
		{"an irreversible tool", []*planexec.Tool{search, book}, nil, "book_flight"},
		{"a tool requiring approval", []*planexec.Tool{search, refund}, nil, "refund"},
		{"a ladder class over another tool", []*planexec.Tool{search, book}, ladderOf("search_flights"), "book_flight"},
		{"an irreversible tool in a ladder class", []*planexec.Tool{search, book}, ladderOf("book_flight"), ""},
		{"a tool requiring approval in a ladder class", []*planexec.Tool{search, refund}, ladderOf("refund"), ""},
		{"reversible tools only", []*planexec.Tool{search, trip[2]}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := planexec.NewExecutor(planexec.Config{Tools: c.tools, Ladder: c.ladder})
			if c.refuse == "" {
				if err != nil {
					t.Fatalf("NewExecutor: %v", err)
				}
				return
			}
			vConfigError(t, err, c.refuse)
		})
	}

	// A ladder class stands in for the gate only while a grant covers the
	// step: a step the ladder escalates, with no gate to ask, fails the run
	// and nothing runs.
	run, _ := newExecutor(t, r, func(s *setup) { s.Gate, s.Ladder = nil, ladderOf("book_flight") })
	res, err := run.Execute(context.Background(), tripPlan())
	var ce *planexec.ConfigurationError
	if !errors.As(err, &ce) || ce.Tool != "book_flight" || res != nil {
		t.Fatalf("result %+v, err %v; want a *ConfigurationError for book_flight and no result", res, err)
	}
	if len(r.Calls()) != 0 {
		t.Errorf("tools ran: %v", toolNames(r.Calls()))
	}
}
