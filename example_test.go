package planexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store/memory"
)

// ExampleSearch is what search_flights takes.
type ExampleSearch struct {
	Origin      string `json:"origin" validate:"len=3"`
	Destination string `json:"destination" validate:"len=3"`
}

// ExampleBooking is what book_flight takes.
type ExampleBooking struct {
	Flight string          `json:"flight"`
	Seats  int             `json:"seats" validate:"min=1,max=9"`
	Fare   decimal.Decimal `json:"fare"`
}

// exampleTools are the trip's tools: a search, and a booking that cannot be
// undone. booked, if not nil, counts the bookings made.
func exampleTools(booked *atomic.Int32) []*planexec.Tool {
	search := planexec.MustTool("search_flights", "Find flights between two airports.",
		func(ctx context.Context, s ExampleSearch) ([]string, error) {
			return []string{"BA117", "VS3"}, nil
		})
	book := planexec.MustTool("book_flight", "Book seats on a flight.",
		func(ctx context.Context, b ExampleBooking) (string, error) {
			if booked != nil {
				booked.Add(1)
			}
			return fmt.Sprintf("PNR-%s x%d at %s", b.Flight, b.Seats, b.Fare.StringFixed(2)), nil
		},
		planexec.Irreversible(), planexec.KeyArguments("flight", "seats"))
	return []*planexec.Tool{search, book}
}

// exampleApprove is a person who approves everything they are asked.
var exampleApprove = planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
	fmt.Printf("asked: %s %s (%s)\n", req.Tool, req.Arguments, req.Why)
	return req.Approve("dana"), nil
})

// A tool is a function and the contract its arguments are held to, declared
// in one call: the name once, the Go type once. The JSON Schema the model
// sees is generated from that type.
func ExampleNewTool() {
	book, err := planexec.NewTool("book_flight", "Book seats on a flight.",
		func(ctx context.Context, b ExampleBooking) (string, error) {
			return "PNR-" + b.Flight, nil
		},
		planexec.Irreversible(), planexec.KeyArguments("flight"))
	if err != nil {
		panic(err)
	}
	c := book.Contract()
	fmt.Println(book.Name(), c.Irreversible(), c.KeyArguments())
	fmt.Println(string(c.Schema()))
	// Output:
	// book_flight true [flight]
	// {"properties":{"flight":{"type":"string"},"seats":{"type":"integer","maximum":9,"minimum":1},"fare":{"type":"number"}},"additionalProperties":false,"type":"object","required":["flight","seats","fare"]}
}

// A contract can be tested on its own, without an executor: Check holds raw
// arguments to it as validation would, and names the paths that are wrong,
// never the values.
func ExampleContract_Check() {
	c, err := planexec.NewContract[ExampleBooking]("book_flight")
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Check(json.RawMessage(`{"flight":"BA117","seats":2,"fare":412.50}`)))

	for _, args := range []string{
		`{"flight":"BA117","seats":"1","fare":412.50,"Fare":1}`,
		`{"flight":"BA117","seats":10,"fare":412.50}`,
	} {
		var pv *planexec.PlanValidationError
		if errors.As(c.Check(json.RawMessage(args)), &pv) {
			fmt.Println(pv.Reason, pv.Tool, pv.Violations)
		}
	}
	// Output:
	// <nil>
	// arguments book_flight [/seats: expected integer, got string /Fare: key differs only in case from "fare"]
	// arguments book_flight [/seats: fails rule max=9]
}

// An executor is built once per process from the tools, the store and the
// policy; each job is a run of it, acting under its own delegation. Execute
// validates the whole plan, clears the irreversible step with a person, and
// runs it. The tool receives the declared Go type; the decimal arrives
// exactly as written.
func ExampleNewExecutor() {
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools: exampleTools(nil),
		Gate:  exampleApprove,
		Store: memory.New(),
	})
	if err != nil {
		panic(err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "trip-42", Tenant: "acme", User: "dana", Agent: "courier"})
	if err != nil {
		panic(err)
	}
	res, err := run.Execute(context.Background(), planexec.Plan{Goal: "get them to New York", Steps: []planexec.Step{
		{ID: "find", Tool: "search_flights", Arguments: json.RawMessage(`{"origin":"LHR","destination":"JFK"}`)},
		{ID: "book", Tool: "book_flight", Arguments: json.RawMessage(`{"flight":"BA117","seats":1,"fare":412.50}`), DependsOn: []string{"find"}},
	}})
	if err != nil {
		panic(err)
	}
	var pnr string
	if err := res.Outcome("book", &pnr); err != nil {
		panic(err)
	}
	fmt.Println(pnr, "| approved by", res.Steps["book"].ApprovedBy, "| complete:", res.Complete)
	for _, e := range run.Events() {
		fmt.Println(strings.TrimSpace(fmt.Sprint(e.Kind, " ", e.StepID)))
	}
	// Output:
	// asked: book_flight {"fare":"412.50","flight":"BA117","seats":1} (the tool is irreversible)
	// PNR-BA117 x1 at 412.50 | approved by dana | complete: true
	// PLANNED
	// APPROVAL_REQUIRED book
	// APPROVAL_GRANTED book
	// STEP_STARTED find
	// STEP_EXECUTED find
	// STEP_STARTED book
	// STEP_EXECUTED book
	// PLAN_COMPLETED
}

// Validation refuses the whole plan before anything runs, naming the step,
// the tool and the reason. A run may use only the tools its delegation's
// scope allows.
func ExampleRun_Validate() {
	ex, err := planexec.NewExecutor(planexec.Config{Tools: exampleTools(nil), Gate: exampleApprove})
	if err != nil {
		panic(err)
	}
	run, err := ex.Run(planexec.Delegation{Tenant: "acme", User: "dana", Scope: []string{"search_flights"}})
	if err != nil {
		panic(err)
	}
	for _, plan := range []planexec.Plan{
		{Steps: []planexec.Step{
			{ID: "find", Tool: "search_flights", Arguments: json.RawMessage(`{"origin":"LHR","destination":"JFK"}`)},
			{ID: "book", Tool: "book_flight", Arguments: json.RawMessage(`{"flight":"BA117","seats":1,"fare":412.50}`), DependsOn: []string{"find"}},
		}},
		{Steps: []planexec.Step{
			{ID: "find", Tool: "search_flights", Arguments: json.RawMessage(`{"origin":"LHRX","destination":"JFK"}`)},
		}},
		{Steps: []planexec.Step{
			{ID: "find", Tool: "search_flights", Arguments: json.RawMessage(`{"origin":"LHR","destination":"JFK"}`), DependsOn: []string{"find"}},
		}},
	} {
		var pv *planexec.PlanValidationError
		if err := run.Validate(plan); errors.As(err, &pv) {
			fmt.Println(pv.Reason, pv.Step, pv.Tool, pv.Violations)
		}
	}
	// Output:
	// not_allowed book book_flight []
	// arguments find search_flights [/origin: fails rule len=3]
	// cycle find search_flights [/steps/0/depends_on/0: the step waits on itself]
}

// Plan asks the model, refuses what does not validate, and asks again with
// the refusal as feedback; each attempt is a new revision. The model holds no
// tools: it only writes the plan.
func ExampleRun_Plan() {
	model := scripted.New(
		scripted.Reply{Content: `{"goal":"fly","steps":[{"id":"s1","tool":"charter_jet","arguments":{}}]}`},
		scripted.Reply{Content: `{"goal":"fly","steps":[{"id":"s1","tool":"book_flight","arguments":{"flight":"BA117","seats":1,"fare":412.50}}]}`},
	)
	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
	if err != nil {
		panic(err)
	}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: exampleTools(nil), Gate: exampleApprove})
	if err != nil {
		panic(err)
	}
	run, err := ex.Run(planexec.Delegation{Tenant: "acme", User: "dana"})
	if err != nil {
		panic(err)
	}
	plan, err := run.Plan(context.Background(), planner, "get them to New York")
	if err != nil {
		panic(err)
	}
	fmt.Println("revision", plan.Revision, "steps", len(plan.Steps))
	for _, e := range run.Events() {
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

// Do is what a service calls on every request for a job: the first call
// plans and runs it in rounds until the planner answers; a retried request
// for the same run finds the record in the store and returns the answer
// instead of planning, asking and booking again.
func ExampleRun_Do() {
	var booked atomic.Int32
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools: exampleTools(&booked),
		Gate:  exampleApprove,
		Store: memory.New(),
	})
	if err != nil {
		panic(err)
	}
	model := scripted.New(scripted.Reply{Content: `{"goal":"fly","steps":[
		{"id":"find","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}},
		{"id":"book","tool":"book_flight","arguments":{"flight":"BA117","seats":1,"fare":412.50},"depends_on":["find"]}]}`},
		scripted.Reply{Content: `{"goal":"","steps":[],"answer":"Booked BA117 for 412.50.","question":null}`})
	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
	if err != nil {
		panic(err)
	}
	job := planexec.Delegation{RunID: "trip-42", Tenant: "acme", User: "dana", Agent: "courier"}
	for request := 1; request <= 2; request++ {
		run, err := ex.Run(job)
		if err != nil {
			panic(err)
		}
		res, err := run.Do(context.Background(), planner, "get them to New York")
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: %q after %d rounds\n", request, res.Answer, res.Round)
	}
	fmt.Println("bookings made:", booked.Load(), "| model calls:", len(model.Requests()))
	// Output:
	// asked: book_flight {"fare":"412.50","flight":"BA117","seats":1} (the tool is irreversible)
	// request 1: "Booked BA117 for 412.50." after 2 rounds
	// request 2: "Booked BA117 for 412.50." after 2 rounds
	// bookings made: 1 | model calls: 2
}

// A gate may answer "pending": a service cannot park a goroutine for hours
// waiting on a person. The plan is stored and nothing runs. When the person
// decides, Decide records it, and Resume, from any process that shares the
// store, clears the step with it and runs the plan.
func ExampleRun_Resume() {
	db := memory.New()
	var asked planexec.ApprovalRequest
	later := planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
		asked = req // shown to the person, say, in a review queue
		return req.Defer(), nil
	})
	ex, err := planexec.NewExecutor(planexec.Config{Tools: exampleTools(nil), Gate: later, Store: db})
	if err != nil {
		panic(err)
	}
	job := planexec.Delegation{RunID: "trip-42", Tenant: "acme", User: "dana"}
	run, err := ex.Run(job)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_, err = run.Execute(ctx, planexec.Plan{Steps: []planexec.Step{
		{ID: "book", Tool: "book_flight", Arguments: json.RawMessage(`{"flight":"BA117","seats":1,"fare":412.50}`)},
	}})
	var pending *planexec.ApprovalPendingError
	fmt.Println(errors.As(err, &pending), pending.Stored, pending.Requests[0].StepID)

	// Later, perhaps in another process: the person approves, the run resumes.
	again, err := ex.Run(job)
	if err != nil {
		panic(err)
	}
	if err := again.Decide(ctx, asked.Approve("dana")); err != nil {
		panic(err)
	}
	res, err := again.Resume(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Steps["book"].Outcome), "| approved by", res.Steps["book"].ApprovedBy)
	// Output:
	// true true book
	// "PNR-BA117 x1 at 412.50" | approved by dana
}

// An autonomy ladder lets an agent act without asking within a grant's
// ceiling, and sends what is above it to a person. Ceilings are cumulative
// within a plan: two bookings each under the ceiling do not both act if
// together they pass it.
func ExampleAutonomyLadder() {
	ladder, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: "bookings", Tools: []string{"book_flight"}, Amount: "fare"})
	if err != nil {
		panic(err)
	}
	if err := ladder.Grant(planexec.Grant{ID: "travel-desk", Tenant: "acme", Class: "bookings", Level: planexec.LevelActWithinLimits,
		Ceiling: &planexec.Ceiling{Amount: decimal.NewFromInt(500), Currency: "GBP"}}); err != nil {
		panic(err)
	}
	gate := planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
		fmt.Println("asked about", req.StepID, "because", req.Why)
		return req.Approve("dana"), nil
	})
	ex, err := planexec.NewExecutor(planexec.Config{Tools: exampleTools(nil), Ladder: ladder, Gate: gate, Concurrency: 1})
	if err != nil {
		panic(err)
	}
	run, err := ex.Run(planexec.Delegation{Tenant: "acme", User: "dana"})
	if err != nil {
		panic(err)
	}
	res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
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
