// Package planexec runs typed plan-then-execute agents: a planner model writes
// a typed Plan and holds no tools; deterministic code validates the whole plan,
// clears what needs a person or a grant, and only then runs it — concurrently
// where the dependency graph allows, and never doing an effect twice.
//
// # The parts
//
// A [Contract] says what one tool takes, as a Go type, and whether its effect
// can be undone. The JSON Schema the model sees is generated from that type,
// and value rules come from its validate tags:
//
//	type Booking struct {
//		Flight string          `json:"flight" validate:"required"`
//		Seats  int             `json:"seats" validate:"min=1,max=9"`
//		Fare   decimal.Decimal `json:"fare"`
//	}
//	var bookFlight = planexec.MustContract[Booking]("book_flight", planexec.Irreversible())
//
// A [Tool] is the function a step calls, with that same type:
//
//	book := planexec.NewTool("book_flight", "Book seats on a flight.",
//		func(ctx context.Context, b Booking) (Ticket, error) { ... })
//
// An [AgentPlanner] asks a model (package llm) for a plan. It refuses to be
// built with an agent that holds tools: a planner cannot dispatch what it is
// planning.
//
// An [Executor] validates, clears and runs plans for one run:
//
//	ex, err := planexec.NewExecutor(planexec.Config{
//		Tools:     []planexec.Tool{search, book},
//		Contracts: []*planexec.Contract{searchFlights, bookFlight},
//		Agent:     planexec.Agent{Name: "courier", Tools: []string{"search_flights", "book_flight"}},
//		Gate:      gate,
//		Plans:     &planexec.MemoryPlanStore{},
//		Idempotency: &planexec.MemoryIdempotencyStore{},
//	})
//	plan, err := ex.Planned(ctx, planner, "get them to New York")
//	res, err := ex.Execute(ctx, plan)
//
// # What is checked before anything runs
//
// Validation refuses the whole plan with a [*PlanValidationError] whose
// [Reason] says why: empty, malformed, too_long, duplicate_id, unknown_tool,
// not_allowed, arguments, dependency, cycle, and replan when the planner kept
// producing invalid plans. Nothing is repaired: an undeclared argument, "2"
// for 2, or a plan too long is refused, never dropped, coerced or truncated.
//
// Then every step is cleared. Where an [AutonomyLadder] classifies the tool,
// its grants decide: ACT, ESCALATE to the [ApprovalGate], or REFUSE. Other
// steps go to the gate when their contract is irreversible or the agent lists
// the tool in ApprovalRequired. A denial anywhere means no step ran. A gate
// may answer pending: the plan is stored and [Executor.Resume] goes on once
// the decision exists.
//
// # Running, once
//
// Steps start the moment their dependencies finish, up to
// Config.Concurrency at once. With an [IdempotencyStore], each step runs
// under a key digested from its tenant, run, tool and validated arguments: a
// repeat replays the recorded outcome, and a key held in flight or left in
// doubt by an irreversible failure gives an [*IndeterminateOutcomeError]
// rather than a second run. With a [PlanStore], the plan is written before the
// first step and each step as it finishes, so Resume picks a run up where it
// died.
//
// Everything lands on the record ([Executor.Events]) in order, and can be
// watched live through Config.Observer.
//
// The errors are described together at the top of errors.go.
package planexec
