package planexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm/scripted"
)

type ExampleBooking struct {
	Flight string          `json:"flight"`
	Seats  int             `json:"seats" validate:"min=1,max=9"`
	Fare   decimal.Decimal `json:"fare"`
}

func exampleExecutor(gate planexec.ApprovalGate) *planexec.Executor {
	if gate == nil {
		gate = planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.ApprovalDecision, error) {
			return req.Deny("nobody", "no one to ask"), nil
		})
	}
	book := planexec.NewTool("book_flight", "Book seats on a flight.",
		func(ctx context.Context, b ExampleBooking) (string, error) {
			return fmt.Sprintf("PNR-%s x%d at %s", b.Flight, b.Seats, b.Fare.StringFixed(2)), nil
		})
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools:     []planexec.Tool{book},
		Contracts: []*planexec.Contract{planexec.MustContract[ExampleBooking]("book_flight", planexec.Irreversible())},
		Agent:     planexec.Agent{Name: "courier", Tools: []string{"book_flight"}},
		Gate:      gate,
	})
	if err != nil {
		panic(err)
	}
	return ex
}

// A contract is declared from a Go type; the schema the model sees is
// generated from it, strict-mode ready.
func ExampleNewContract() {
	c, err := planexec.NewContract[ExampleBooking]("book_flight", planexec.Irreversible(), planexec.KeyArguments("flight"))
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Tool(), c.Irreversible(), c.KeyArguments())
	fmt.Println(string(c.Schema()))
	// Output:
	// book_flight true [flight]
	// {"properties":{"flight":{"type":"string"},"seats":{"type":"integer","maximum":9,"minimum":1},"fare":{"type":"number"}},"additionalProperties":false,"type":"object","required":["flight","seats","fare"]}
}

// Validation refuses the whole plan, naming the step, the tool, the reason
// and the paths that were wrong, never the values.
func ExampleExecutor_Validate() {
	ex := exampleExecutor(nil)
	err := ex.Validate(planexec.Plan{Steps: []planexec.Step{
		{ID: "s1", Tool: "book_flight", Arguments: json.RawMessage(`{"flight":"BA117","seats":"1","fare":412.50,"Fare":1}`)},
	}})
	var pv *planexec.PlanValidationError
	if errors.As(err, &pv) {
		fmt.Println(pv.Reason, pv.Step, pv.Tool)
		for _, v := range pv.Violations {
			fmt.Println(v)
		}
	}
	fmt.Println(errors.Is(err, planexec.ReasonArguments))
	// Output:
	// arguments s1 book_flight
	// /seats: expected integer, got string
	// /Fare: key differs only in case from "fare"
	// true
}

// Execute clears the irreversible step with a person, then runs it. The tool
// receives the declared Go type; the decimal arrives exactly as written.
func ExampleExecutor_Execute() {
	gate := planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.ApprovalDecision, error) {
		fmt.Printf("asked: %s %s (%s)\n", req.Tool, req.Arguments, req.Why)
		return req.Grant("dana"), nil
	})
	ex := exampleExecutor(gate)
	res, err := ex.Execute(context.Background(), planexec.Plan{Goal: "get them to New York", Steps: []planexec.Step{
		{ID: "s1", Tool: "book_flight", Arguments: json.RawMessage(`{"flight":"BA117","seats":1,"fare":412.50}`)},
	}})
	if err != nil {
		panic(err)
	}
	var pnr string
	if err := res.Outcome("s1", &pnr); err != nil {
		panic(err)
	}
	fmt.Println(pnr, "approved by", res.Steps["s1"].ApprovedBy, "complete:", res.Complete)
	// Output:
	// asked: book_flight {"fare":"412.50","flight":"BA117","seats":1} (the tool is irreversible)
	// PNR-BA117 x1 at 412.50 approved by dana complete: true
}

// Planned asks the model, refuses what does not validate, and asks again
// with the refusal as feedback; each attempt is a new revision.
func ExampleExecutor_Planned() {
	model := scripted.New(
		scripted.Reply{Content: `{"goal":"fly","steps":[{"id":"s1","tool":"charter_jet","arguments":{}}]}`},
		scripted.Reply{Content: `{"goal":"fly","steps":[{"id":"s1","tool":"book_flight","arguments":{"flight":"BA117","seats":1,"fare":412.50}}]}`},
	)
	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
	if err != nil {
		panic(err)
	}
	ex := exampleExecutor(nil)
	plan, err := ex.Planned(context.Background(), planner, "get them to New York")
	if err != nil {
		panic(err)
	}
	fmt.Println("revision", plan.Revision, "steps", len(plan.Steps))
	for _, e := range ex.Events() {
		fmt.Println(strings.TrimSpace(fmt.Sprint(e.Revision, " ", e.Kind, " ", e.Reason)))
	}
	fmt.Println(model.Requests()[1].Messages[2].Content)
	// Output:
	// revision 2 steps 1
	// 1 PLAN_REFUSED unknown_tool
	// 2 REPLANNED unknown_tool
	// 2 PLANNED
	// That plan was refused (unknown_tool) at step "s1" (tool "charter_jet").
	// Write the whole plan again, corrected. Nothing from the refused plan was executed.
}

// A planning agent that holds a tool could dispatch what it is planning: the
// planner refuses to be built with it.
func ExampleNewAgentPlanner() {
	_, err := planexec.NewAgentPlanner(scripted.New(), planexec.Agent{Name: "greedy", Tools: []string{"book_flight"}})
	var ce *planexec.ConfigurationError
	fmt.Println(errors.As(err, &ce), ce.Tool)
	// Output:
	// true book_flight
}

// A gate may answer "pending": the plan is stored and nothing runs. Once the
// person decides, any executor for the same run resumes it.
func ExampleExecutor_Resume() {
	store := &planexec.MemoryPlanStore{} // keeps plans and decisions
	var asked planexec.ApprovalRequest
	pending := planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.ApprovalDecision, error) {
		asked = req
		return req.Pending(), nil
	})
	build := func() *planexec.Executor {
		book := planexec.NewTool("book_flight", "Book seats on a flight.",
			func(ctx context.Context, b ExampleBooking) (string, error) { return "PNR-" + b.Flight, nil })
		ex, err := planexec.NewExecutor(planexec.Config{
			Tools:      []planexec.Tool{book},
			Contracts:  []*planexec.Contract{planexec.MustContract[ExampleBooking]("book_flight", planexec.Irreversible())},
			Agent:      planexec.Agent{Name: "courier", Tools: []string{"book_flight"}},
			Delegation: planexec.Delegation{RunID: "trip-42", Tenant: "acme"},
			Gate:       pending,
			Plans:      store,
		})
		if err != nil {
			panic(err)
		}
		return ex
	}
	ctx := context.Background()
	_, err := build().Execute(ctx, planexec.Plan{Steps: []planexec.Step{
		{ID: "s1", Tool: "book_flight", Arguments: json.RawMessage(`{"flight":"BA117","seats":1,"fare":412.50}`)},
	}})
	fmt.Println(err)

	// Later, perhaps in another process: the person approves, the run resumes.
	later := build()
	if err := later.Decide(ctx, asked.Grant("dana")); err != nil {
		panic(err)
	}
	res, err := later.Resume(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Steps["s1"].Outcome), "approved by", res.Steps["s1"].ApprovedBy)
	// Output:
	// planexec: approval pending for step "s1" of run "trip-42"; nothing ran; the plan is stored: resume it once decided
	// "PNR-BA117" approved by dana
}

// An autonomy ladder lets an agent act without asking within a grant's
// ceiling, and sends what is above it to a person.
func ExampleAutonomyLadder() {
	ladder, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: "bookings", Tools: []string{"book_flight"}, Amount: "fare"})
	if err != nil {
		panic(err)
	}
	if err := ladder.Grant(planexec.Grant{ID: "travel-desk", Tenant: "acme", Class: "bookings", Level: planexec.LevelActWithinLimits,
		Ceiling: &planexec.Ceiling{Amount: decimal.NewFromInt(500), Currency: "GBP"}}); err != nil {
		panic(err)
	}
	gate := planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.ApprovalDecision, error) {
		fmt.Println("asked about", req.StepID, "because", req.Why)
		return req.Grant("dana"), nil
	})
	book := planexec.NewTool("book_flight", "Book seats on a flight.",
		func(ctx context.Context, b ExampleBooking) (string, error) { return "PNR-" + b.Flight, nil })
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools:       []planexec.Tool{book},
		Contracts:   []*planexec.Contract{planexec.MustContract[ExampleBooking]("book_flight", planexec.Irreversible())},
		Agent:       planexec.Agent{Name: "courier", Tools: []string{"book_flight"}},
		Delegation:  planexec.Delegation{Tenant: "acme"},
		Ladder:      ladder,
		Gate:        gate,
		Concurrency: 1,
	})
	if err != nil {
		panic(err)
	}
	res, err := ex.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		{ID: "out", Tool: "book_flight", Arguments: json.RawMessage(`{"flight":"BA117","seats":1,"fare":412.50}`)},
		{ID: "back", Tool: "book_flight", Arguments: json.RawMessage(`{"flight":"BA112","seats":1,"fare":398.00}`)},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println("out: grant", res.Steps["out"].Grant, "| back: approved by", res.Steps["back"].ApprovedBy)
	// Output:
	// asked about back because escalated by the autonomy ladder: over the ceiling of 500 GBP
	// out: grant travel-desk | back: approved by dana
}
