// Package planexec runs typed plan-then-execute agents: a planner model writes
// a typed Plan and holds no tools; deterministic code validates the whole plan,
// clears what needs a person or a grant, and only then runs it — concurrently
// where the dependency graph allows, durably, and never doing an effect twice.
//
// # Tools and their contracts
//
// A [Tool] is a Go function and the contract its arguments are held to. The
// contract is generated from the argument type: the JSON Schema the model
// sees, and the value rules of its validate tags. A name is written once, a
// type once:
//
//	type Booking struct {
//		Flight string          `json:"flight" validate:"required"`
//		Seats  int             `json:"seats" validate:"min=1,max=9"`
//		Fare   decimal.Decimal `json:"fare"`
//	}
//
//	book, err := planexec.NewTool("book_flight", "Book seats on a flight.",
//		func(ctx context.Context, b Booking) (Ticket, error) { ... },
//		planexec.Irreversible(), planexec.KeyArguments("flight", "seats"))
//
// A contract is a value a test can check arguments against, with no executor:
//
//	err := book.Contract().Check(json.RawMessage(`{"flight":"BA117","seats":"1"}`))
//	// a *PlanValidationError: /seats: expected integer, got string
//
// # One executor, many runs
//
// An [Executor] holds what runs share: the tools, the store, the policy
// (autonomy ladder, approval gate, authorizer), limits and an observer. Build
// one per process; it is safe for concurrent use. A [Run] is one job under one
// [Delegation] (run id, tenant, user, agent, scope of tools, expiry): it plans,
// validates, executes and resumes, and keeps its own events and token usage.
// Runs are cheap; make one per job.
//
//	ex, err := planexec.NewExecutor(planexec.Config{
//		Tools: []*planexec.Tool{search, book},
//		Store: st, // sqlite.Open, postgres.Open; none: a store in memory
//		Gate:  gate,
//	})
//	run, err := ex.Run(planexec.Delegation{RunID: jobID, Tenant: "acme", User: "dana"})
//	res, err := run.Do(ctx, planner, "get them to New York")
//
// [Run.Do] runs the job in rounds: the planner writes the steps that can run
// now, they run, their outcomes go back to it, and it plans again until it
// answers ([Result.Answer]) or asks the person ([Run.Reply] goes on). With a
// store, Do goes on from where a stored run stands, so a retried request
// never plans (or acts) twice. [Run.Plan], [Run.Execute] and [Run.Resume] do
// the parts alone, one plan at a time. Within one plan, a step's argument
// may read an earlier step's outcome ([RefKey]), type-checked before
// anything runs. [Run.Decide],
// [Run.Resolve] and [Run.Forget] need only the store: an executor with no
// tools can do them.
//
// An [AgentPlanner] asks a model (package llm) for a plan. Its [Agent] has no
// tools to declare: a planner cannot dispatch what it is planning.
//
// # What a step reads from another
//
// A step's argument may read an earlier step's outcome: an object with the
// member [RefKey] is a reference,
//
//	{"$from": "s1", "path": "/0/flight"}
//
// the value at the JSON Pointer "/0/flight" in what step s1 returned
// ("path": "" is the whole outcome). It may stand wherever an argument
// value goes, at any depth, and makes its step depend on s1; it has exactly
// the members "$from" and "path", both strings.
//
// Before anything runs, each reference is held to the types of both tools:
// the path must exist in the type s1's tool returns, and the type there must
// fit the argument (a string where a string goes, an integer where a number
// goes, lists and objects member by member; a value that may be absent or
// null only where the argument may be). What does not fit is refused with
// ReasonReference, naming the step, the argument's path and the reference.
// A plan holds at most Limits.MaxReferences of them. What only the outcome
// can tell (an index past the end, a value of a type that says nothing of
// its shape) is checked as the step is about to run: the values are put in
// place, within Limits.MaxPlanBytes, and the arguments decoded by the
// contract again; what fails fails the step with ReasonArguments before its
// tool is called.
//
// # What is checked before anything runs
//
// Validation refuses the whole plan with a [*PlanValidationError] whose
// [Reason] says why: empty, malformed, too_long, duplicate_id, unknown_tool,
// not_allowed, arguments, duplicate_effect, dependency, cycle, reference, and replan when
// the planner kept producing invalid plans. Nothing is repaired: an undeclared
// argument, "2" for 2, or a plan too long is refused, never dropped, coerced
// or truncated.
//
// The world has its say too: a tool may declare a [Precondition], a
// read-only check of a step's arguments against current state under the
// step's delegation (the item exists, the edge closes no cycle).
// [Run.CheckPreconditions] runs it, so a plan proposed for a person is
// refused before anyone applies it (precondition, in the tool's words), and
// the gate runs it again just before the step acts: a world that changed meanwhile fails
// the step, which does nothing.
//
// Then every step is cleared. Where an [AutonomyLadder] classifies the tool,
// its grants decide: ACT within a ceiling, ESCALATE to the [ApprovalGate]
// (also when no live grant covers the step), or REFUSE where a grant says
// [LevelNever]. Other steps go to the gate when their contract is
// irreversible or requires approval. A denial of a step cleared before the
// first step runs means no step ran; a step whose arguments read another's
// outcome is cleared when it is ready, on the values it will run with. A
// gate may answer pending: the run is stored and [Run.Resume] goes on once
// the decision exists ([Run.Decide]).
//
// # Running, once: one gate
//
// Steps start the moment their dependencies finish, up to Config.Concurrency
// at once. Every step then passes through one gate (gate.go), whatever
// performs its effect, a tool the executor calls or a call handed back to
// the run's caller ([NewClientTool]): its arguments are resolved and held to
// the contract; its key, digested from its tenant, run and validated
// arguments, is claimed in the store; it is cleared (the delegation, the
// class that issues authority, the grant and its ceiling, a person's
// decision for this one effect); it acts or is handed back; and its
// outcome, record and events are written with the claim in one write. A
// repeat replays the recorded outcome, and a key held in flight or left in
// doubt by an irreversible failure gives an [*IndeterminateOutcomeError]
// rather than a second run. The plan is written before the first step and
// each step as it finishes, so Resume picks a run up where it died, under
// the delegation stored with it.
//
// A store ([store.Store], package store) keeps plans, claims, decisions and
// each step's write in one transaction: an executor takes none that keeps
// less. Without one, the executor keeps them in memory.
//
// Everything lands on the run's record ([Run.Events]) in order, and can be
// watched live through Config.Observer or [WithObserver].
//
// # Errors
//
// Every error planexec returns is one of these, possibly wrapped; ask with
// errors.As for the type and errors.Is for the sentinels and reasons.
//
//   - [*PlanValidationError]: the plan was refused before anything ran. Its
//     Reason says why; errors.Is(err, ReasonCycle) and the like work. Reason
//     replan wraps the last refusal.
//   - [*ConfigurationError]: the executor, a tool or a planner was built in a
//     way that could not be safe (a tool that needs a person with no gate to
//     ask, two tools with one name). Fix the code, not the input.
//   - [*DelegationError]: the delegation cannot be acted under (ids that
//     cannot be stored faithfully, a child that widens its parent), or no
//     longer covers a step (expired, revoked, narrowed).
//   - [*AutonomyRefusedError]: the autonomy ladder refused a step: during
//     clearance (nothing ran) or, with AtDispatch, just before the step ran.
//   - [*ApprovalDeniedError]: a person (or an expired decision) did not clear
//     a step. When it happens during clearance, nothing ran.
//   - [*ApprovalPendingError]: a gate answered pending. Nothing ran but the
//     steps Ran counts (those a step with references reads); the run is
//     stored, and Resume goes on once the decision exists.
//   - [*AwaitingReplyError]: the planner of a run of rounds asked the person
//     a question; the run is stored, and Reply goes on with their answer.
//   - [*ToolCallPendingError]: a step of a tool the caller runs
//     ([NewClientTool]) was handed back; give its result to
//     [Run.SubmitResult] and Resume.
//   - [*IndeterminateOutcomeError]: nobody can say yet whether a step's effect
//     happened. errors.Is(err, [ErrInFlight]): a live holder has it; wait.
//     errors.Is(err, [ErrInDoubt]): an irreversible tool failed without
//     promising [ErrNotApplied], or its holder vanished; resolve its Key with
//     Run.Resolve once the real outcome is known.
//   - [*StepError]: a tool returned an error; it wraps the tool's error.
//   - [*store.Error]: a store could not do what was asked (the database is
//     down, a record cannot be read). Nothing was recorded as done that was
//     not done: retry later with Resume. It wraps [store.ErrNewerRecord] or
//     [store.ErrCorruptRecord] when a record is the problem; a damaged record
//     is never replayed and never read as "not run".
//   - [ErrNotApplied]: wrap it in a tool's error to promise that the effect did
//     not happen, so an irreversible step may be tried again.
//   - [ErrNoRecord]: the store has no record of what was asked: a run never
//     stored (Resume), a key this run does not hold (Resolve), a run dropped
//     by Prune while a call had it.
//   - [ErrCompleted]: a key already recorded as done cannot be resolved.
//   - [store.ErrFenced]: a store refused a write from a holder whose claim
//     was taken over (another execution of the run has it now).
//   - [ErrRunBusy], [ErrNoOutcome], [ErrInvalidDecision]: a run asked to
//     execute while it executes (on this Run, or by another execution, on
//     any replica, that holds it in the store), an outcome read from a step
//     that did not finish, a decision that cannot be recorded.
//   - [ErrNotPending]: a decision for a request the stored run does not
//     await (another run's or tenant's, never made, already decided: the
//     first decision stands), or a second, different result for a call
//     handed back.
//   - [ErrInvalidQuery]: a listing of runs asked for a status no run can be
//     in, or with a cursor no listing gave.
//
// For example:
//
//	res, err := run.Execute(ctx, plan)
//	var refused *planexec.PlanValidationError
//	switch {
//	case errors.As(err, &refused):
//		// tell the planner (Feedback(refused)); nothing ran
//	case errors.Is(err, planexec.ErrInDoubt):
//		// find out what happened, then run.Resolve the key
//	case errors.Is(err, planexec.ErrInFlight):
//		// another process has the step; try again after its lease
//	}
package planexec
