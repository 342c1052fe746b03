package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/internal/canonjson"
	"github.com/planexec/planexec/internal/dag"
	"github.com/planexec/planexec/llm"
)

// Config builds an Executor. Only Tools, Contracts and Agent are required.
type Config struct {
	// Tools is the registry of callable tools.
	Tools []Tool
	// Contracts declares what each tool takes; every tool needs exactly one.
	Contracts []*Contract
	// Agent is who acts; Agent.Tools is the allowlist.
	Agent Agent
	// Delegation is the authority the run acts under. Default: a new run id,
	// no tenant, no scope limit, no expiry.
	Delegation Delegation
	// Ladder decides the steps of classified tools; nil leaves every step to
	// its contract and the agent's ApprovalRequired list.
	Ladder *AutonomyLadder
	// Gate asks a person. Required when any step may need one.
	Gate ApprovalGate
	// Approvals keeps decisions so a resume never asks twice. Default: in
	// memory, for this executor only.
	Approvals ApprovalStore
	// Plans keeps plans and step results for Resume. Default: none.
	Plans PlanStore
	// Idempotency keeps one claim per effect. Default: none (no step is
	// deduplicated).
	Idempotency IdempotencyStore
	// Authorizer is asked before each step whether the delegation still
	// covers it (revocation). Default: none.
	Authorizer Authorizer
	// Observer sees events live. Default: none; Events reads them after.
	Observer Observer
	// Concurrency bounds how many steps run at once; 1 runs them one at a
	// time in dependency order. Default: 8.
	Concurrency int
	// MaxReplans bounds how many times Planned asks again after a refusal.
	// Default: 2; NoReplans asks once only.
	MaxReplans int
	// Limits bound what validation accepts. Zero fields take their defaults.
	Limits Limits
	// Lease is how long an idempotency claim holds without renewal; it is
	// renewed while the tool runs. Default: 1 minute.
	Lease time.Duration
	// Holder names this executor in idempotency claims. Default: host name,
	// process id and a random suffix.
	Holder string
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// NoReplans, as Config.MaxReplans, asks the planner once and never again.
const NoReplans = -1

// Executor validates plans, clears them, and runs them. It acts for one
// delegation (one run); build one per run. Building one is cheap: the costly
// parts, the contracts, are built once and shared.
//
// An Executor is safe for concurrent use, but its methods act on one run:
// call Execute or Resume one at a time.
type Executor struct {
	cfg       Config
	tools     map[string]*entry
	catalog   []ToolSpec
	approvals ApprovalStore
	rec       record
	usage     llm.Usage
}

// entry is one registered tool with its contract.
type entry struct {
	tool     Tool
	contract *Contract
	allowed  bool // by the agent's allowlist and the delegation's scope
	ask      bool // in the agent's ApprovalRequired list
}

// NewExecutor checks cfg and builds an executor. A tool without a contract, a
// contract for a tool nothing registers, a tool whose Go argument type differs
// from its contract's, an allowlist naming an unknown tool, or an
// irreversible tool with no gate to clear it is a *ConfigurationError naming
// the tool.
func NewExecutor(cfg Config) (*Executor, error) {
	ex := &Executor{tools: make(map[string]*entry, len(cfg.Tools))}
	for _, t := range cfg.Tools {
		if t.name == "" || t.call == nil {
			return nil, &ConfigurationError{Problem: "a tool without a name; build tools with NewTool"}
		}
		if _, dup := ex.tools[t.name]; dup {
			return nil, &ConfigurationError{Tool: t.name, Problem: "is registered twice"}
		}
		ex.tools[t.name] = &entry{tool: t}
	}
	for _, c := range cfg.Contracts {
		if c == nil {
			return nil, &ConfigurationError{Problem: "a nil contract"}
		}
		e, ok := ex.tools[c.tool]
		if !ok {
			return nil, &ConfigurationError{Tool: c.tool, Problem: "has a contract but no tool registers it"}
		}
		if e.contract != nil {
			return nil, &ConfigurationError{Tool: c.tool, Problem: "has two contracts"}
		}
		if e.tool.argType != c.typ {
			return nil, &ConfigurationError{Tool: c.tool, Problem: fmt.Sprintf("takes %s but its contract declares %s", e.tool.argType, c.typ)}
		}
		e.contract = c
	}
	for _, t := range cfg.Tools {
		if ex.tools[t.name].contract == nil {
			return nil, &ConfigurationError{Tool: t.name, Problem: "has no contract, so nothing could check its arguments"}
		}
	}
	if len(cfg.Agent.Tools) == 0 {
		return nil, &ConfigurationError{Problem: fmt.Sprintf("agent %q allows no tool: list the tools it may call in Agent.Tools", cfg.Agent.Name)}
	}
	for _, name := range cfg.Agent.ApprovalRequired {
		e, ok := ex.tools[name]
		if !ok {
			return nil, &ConfigurationError{Tool: name, Problem: "is in the agent's ApprovalRequired list but no tool registers it"}
		}
		e.ask = true
	}
	if cfg.Delegation.RunID == "" {
		cfg.Delegation.RunID = uuid.NewString()
	}
	for _, name := range cfg.Agent.Tools {
		e, ok := ex.tools[name]
		if !ok {
			return nil, &ConfigurationError{Tool: name, Problem: "is in the agent's allowlist but no tool registers it"}
		}
		if e.allowed || !cfg.Delegation.allows(name) {
			continue
		}
		e.allowed = true
		classified := false
		if cfg.Ladder != nil {
			_, classified = cfg.Ladder.Classify(name)
		}
		if cfg.Gate == nil && !classified && (e.contract.irreversible || e.ask) {
			return nil, &ConfigurationError{Tool: name, Problem: "needs a person's approval but no approval gate is configured"}
		}
		ex.catalog = append(ex.catalog, ToolSpec{
			Name:         name,
			Description:  e.tool.description,
			Irreversible: e.contract.irreversible,
			Schema:       e.contract.schema,
		})
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.MaxReplans == 0 {
		cfg.MaxReplans = 2
	} else if cfg.MaxReplans < 0 {
		cfg.MaxReplans = 0
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		cfg.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ex.approvals = cfg.Approvals
	if ex.approvals == nil {
		ex.approvals = &MemoryApprovalStore{}
	}
	ex.cfg = cfg
	ex.rec = record{observer: cfg.Observer, now: cfg.Now}
	return ex, nil
}

// RunID is the run this executor acts for.
func (ex *Executor) RunID() string { return ex.cfg.Delegation.RunID }

// Catalog describes the tools a plan may use: those in the agent's allowlist
// that the delegation covers, in allowlist order.
func (ex *Executor) Catalog() []ToolSpec { return slices.Clone(ex.catalog) }

// Events returns the record so far, in order.
func (ex *Executor) Events() []Event { return ex.rec.snapshot() }

// Usage is the token usage of every planning call this executor made.
func (ex *Executor) Usage() llm.Usage {
	ex.rec.mu.Lock()
	defer ex.rec.mu.Unlock()
	return ex.usage
}

// ---- validation ----

// vplan is a plan that passed validation, with what execution needs.
type vplan struct {
	plan  Plan
	steps []vstep
	graph *dag.Graph
	order []int
}

type vstep struct {
	step  *Step
	entry *entry
	args  decoded
	key   Key
}

// Validate checks the whole plan and returns a *PlanValidationError for the
// first thing wrong, in this order: empty, too_long, then per step
// (malformed id, duplicate_id, unknown_tool, not_allowed, arguments), then
// dependency and cycle. It never panics and costs O(steps + edges) plus the
// size of the arguments.
func (ex *Executor) Validate(plan Plan) error {
	if _, err := ex.validate(&plan, nil); err != nil {
		return err
	}
	return nil
}

func (ex *Executor) validate(plan *Plan, payload []byte) (*vplan, *PlanValidationError) {
	d := &ex.cfg.Delegation
	lim := ex.cfg.Limits
	refuse := func(r Reason, step, tool string, vs ...Violation) *PlanValidationError {
		return &PlanValidationError{Reason: r, Step: step, Tool: tool, Violations: vs, Payload: payload,
			RunID: d.RunID, Tenant: d.Tenant, PlanID: plan.ID, Revision: plan.Revision}
	}
	if len(plan.Steps) == 0 {
		return nil, refuse(ReasonEmpty, "", "")
	}
	if len(plan.Steps) > lim.MaxSteps {
		return nil, refuse(ReasonTooLong, "", "", Violation{Path: "/steps",
			Problem: fmt.Sprintf("%d steps, more than the %d allowed", len(plan.Steps), lim.MaxSteps)})
	}
	v := &vplan{plan: *plan, steps: make([]vstep, len(plan.Steps))}
	index := make(map[string]int, len(plan.Steps))
	for i := range plan.Steps {
		s := &plan.Steps[i]
		if problem := ex.checkID(s.ID); problem != "" {
			return nil, refuse(ReasonMalformed, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d/id", i), Problem: problem})
		}
		if _, dup := index[s.ID]; dup {
			return nil, refuse(ReasonDuplicateID, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d/id", i), Problem: "another step has this id"})
		}
		index[s.ID] = i
		e, ok := ex.tools[s.Tool]
		if !ok {
			return nil, refuse(ReasonUnknownTool, s.ID, s.Tool)
		}
		if !e.allowed {
			return nil, refuse(ReasonNotAllowed, s.ID, s.Tool)
		}
		args, vs := e.contract.decode(s.Arguments, lim)
		if vs != nil {
			return nil, refuse(ReasonArguments, s.ID, s.Tool, vs...)
		}
		v.steps[i] = vstep{step: &v.plan.Steps[i], entry: e, args: args}
	}
	deps := make([][]int, len(plan.Steps))
	for i := range plan.Steps {
		s := &plan.Steps[i]
		for j, dep := range s.DependsOn {
			k, ok := index[dep]
			if !ok {
				return nil, refuse(ReasonDependency, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d/depends_on/%d", i, j), Problem: "waits on a step nobody planned"})
			}
			if k == i {
				return nil, refuse(ReasonCycle, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d/depends_on/%d", i, j), Problem: "the step waits on itself"})
			}
			deps[i] = append(deps[i], k)
		}
	}
	v.graph = dag.New(deps)
	order, blocked := v.graph.Order()
	if blocked != nil {
		inCycle := v.graph.InCycle(blocked)
		vs := make([]Violation, len(blocked))
		first := -1
		for n, b := range blocked {
			what := "waits on a step in a cycle"
			if inCycle[n] {
				what = "is in a cycle"
				if first < 0 {
					first = b
				}
			}
			vs[n] = Violation{Path: fmt.Sprintf("/steps/%d", b), Problem: fmt.Sprintf("step %s %s", quote(plan.Steps[b].ID), what)}
		}
		s := plan.Steps[first]
		return nil, refuse(ReasonCycle, s.ID, s.Tool, vs...)
	}
	v.order = order
	return v, nil
}

// prepare renders what execution digests — canonical arguments for the
// ladder and approval records, idempotency keys — once per step, and only
// when something will read it.
func (ex *Executor) prepare(v *vplan) error {
	if ex.cfg.Idempotency == nil && ex.cfg.Ladder == nil && ex.cfg.Gate == nil {
		return nil
	}
	d := &ex.cfg.Delegation
	for i := range v.steps {
		s := &v.steps[i]
		if vs := s.entry.contract.render(&s.args); vs != nil {
			return &PlanValidationError{Reason: ReasonArguments, Step: s.step.ID, Tool: s.step.Tool, Violations: vs,
				RunID: d.RunID, Tenant: d.Tenant, PlanID: v.plan.ID, Revision: v.plan.Revision}
		}
		if ex.cfg.Idempotency == nil {
			continue
		}
		key, err := canonjson.Digest(keyMaterial{Tenant: d.Tenant, Run: d.RunID, Tool: s.step.Tool, Arguments: s.args.keyJSON})
		if err != nil {
			return fmt.Errorf("planexec: digesting the key of step %s: %w", quote(s.step.ID), err)
		}
		s.key = Key{Tenant: d.Tenant, Digest: key}
	}
	return nil
}

// firstViolation summarises a refusal for an event: paths and problems only.
func firstViolation(e *PlanValidationError) string {
	if len(e.Violations) == 0 {
		return ""
	}
	s := e.Violations[0].String()
	if n := len(e.Violations) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more)", n)
	}
	return s
}

// keyMaterial is what an idempotency key digests.
type keyMaterial struct {
	Tenant    string          `json:"tenant"`
	Run       string          `json:"run"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

func (ex *Executor) checkID(id string) string {
	switch {
	case id == "":
		return "a step needs an id"
	case len(id) > ex.cfg.Limits.MaxIDLength:
		return fmt.Sprintf("step id longer than %d bytes", ex.cfg.Limits.MaxIDLength)
	case !utf8.ValidString(id):
		return "step id is not valid UTF-8"
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return "step id holds a space or control character"
		}
	}
	return ""
}

// ---- planning ----

// Planned asks planner for a plan for task, validates it, and on refusal asks
// again with the refusal as feedback, at most MaxReplans more times. Each
// attempt is a new revision of one plan id. Malformed output counts as an
// attempt. Past the allowance it returns a *PlanValidationError with
// ReasonReplan, wrapping the last refusal. An error from the planner itself
// (a provider outage) is returned as it is.
func (ex *Executor) Planned(ctx context.Context, planner Planner, task string) (Plan, error) {
	d := &ex.cfg.Delegation
	planID := uuid.NewString()
	var refusals []*PlanValidationError
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return Plan{}, err
		}
		resp, err := planner.Plan(ctx, PlanRequest{Task: task, Tools: ex.Catalog(), Attempt: attempt, Refusals: refusals})
		if err != nil {
			return Plan{}, fmt.Errorf("planexec: planning attempt %d: %w", attempt, err)
		}
		ex.rec.mu.Lock()
		ex.usage = ex.usage.Add(resp.Usage)
		ex.rec.mu.Unlock()
		usage := resp.Usage
		plan, perr := ex.decodeAndValidate(resp.Payload, planID, attempt)
		if perr == nil {
			ex.rec.emit(Event{Kind: EventPlanned, RunID: d.RunID, Tenant: d.Tenant, PlanID: planID, Revision: attempt, Attempt: attempt, Usage: &usage,
				Detail: fmt.Sprintf("%d steps", len(plan.Steps))})
			return plan, nil
		}
		perr.Attempts = attempt
		ex.rec.emit(Event{Kind: EventPlanRefused, RunID: d.RunID, Tenant: d.Tenant, PlanID: planID, Revision: attempt, Attempt: attempt, Usage: &usage,
			StepID: perr.Step, Tool: perr.Tool, Reason: perr.Reason, Detail: firstViolation(perr)})
		refusals = append(refusals, perr)
		if attempt > ex.cfg.MaxReplans {
			return Plan{}, &PlanValidationError{Reason: ReasonReplan, Step: perr.Step, Tool: perr.Tool, Violations: perr.Violations,
				Payload: perr.Payload, Attempts: attempt, RunID: d.RunID, Tenant: d.Tenant, PlanID: planID, Revision: attempt, Err: perr}
		}
		ex.rec.emit(Event{Kind: EventReplanned, RunID: d.RunID, Tenant: d.Tenant, PlanID: planID, Revision: attempt + 1, Attempt: attempt + 1, Reason: perr.Reason})
	}
}

func (ex *Executor) decodeAndValidate(payload []byte, planID string, revision int) (Plan, *PlanValidationError) {
	plan, err := DecodePlan(payload, ex.cfg.Limits)
	if err != nil {
		perr := err.(*PlanValidationError)
		perr.RunID, perr.Tenant, perr.PlanID, perr.Revision = ex.cfg.Delegation.RunID, ex.cfg.Delegation.Tenant, planID, revision
		return Plan{}, perr
	}
	plan.ID, plan.Revision = planID, revision
	if _, perr := ex.validate(&plan, payload); perr != nil {
		return Plan{}, perr
	}
	return plan, nil
}

// ---- execution ----

// Result is what a run did.
type Result struct {
	RunID    string
	PlanID   string
	Revision int
	// Steps holds each step that finished or failed, by step id.
	Steps map[string]StepResult
	// Complete is true when every step of the plan finished.
	Complete bool
}

// StepResult is one step's result.
type StepResult struct {
	Tool   string
	Status StepStatus
	// Outcome is what the tool returned, as JSON.
	Outcome json.RawMessage
	// Replayed is true when the outcome came from the record instead of a
	// new call.
	Replayed bool
	// ApprovedBy names the person who cleared the step, if one did.
	ApprovedBy string
	// Grant names the autonomy grant the step acted under, if any.
	Grant string
	// Err is the step's error, when it failed.
	Err error
}

// Outcome decodes what step returned into v. It fails if the step did not
// finish.
func (r *Result) Outcome(step string, v any) error {
	s, ok := r.Steps[step]
	if !ok || s.Status != StepDone {
		return fmt.Errorf("planexec: step %s has no outcome", quote(step))
	}
	return json.Unmarshal(s.Outcome, v)
}

// clearance is how one step was cleared to run.
type clearance struct {
	decision *ApprovalDecision // a person's, when one cleared it
	grant    string            // the autonomy grant it acts under
	class    string            // the grant's action class
	amount   decimal.Decimal   // what it counts against the grant
}

// Execute validates plan, clears every step that needs a person or a grant,
// stores the plan, and runs it: each step starts as soon as all it depends on
// finished, up to Config.Concurrency at once. A denial or refusal anywhere
// means no step ran. A failed step stops new dispatch; running steps finish
// and are recorded; the errors are returned joined. The Result holds what
// finished, even when err is not nil.
//
// A plan without an id gets one.
func (ex *Executor) Execute(ctx context.Context, plan Plan) (*Result, error) {
	if plan.ID == "" {
		plan.ID = uuid.NewString()
	}
	if plan.Revision == 0 {
		plan.Revision = 1
	}
	v, perr := ex.validate(&plan, nil)
	if perr != nil {
		d := &ex.cfg.Delegation
		ex.rec.emit(Event{Kind: EventPlanRefused, RunID: d.RunID, Tenant: d.Tenant, PlanID: plan.ID, Revision: plan.Revision,
			StepID: perr.Step, Tool: perr.Tool, Reason: perr.Reason, Detail: firstViolation(perr)})
		return nil, perr
	}
	return ex.run(ctx, v, nil)
}

// Resume picks up this executor's run from the plan store: it revalidates the
// stored plan against the contracts as they are now (a tool whose schema
// moved refuses it with ReasonArguments), replays the steps that finished,
// clears what still needs clearing (a recorded decision is not asked again),
// and runs the rest.
func (ex *Executor) Resume(ctx context.Context) (*Result, error) {
	d := &ex.cfg.Delegation
	if ex.cfg.Plans == nil {
		return nil, &ConfigurationError{Problem: "no plan store: nothing could have been written to resume from"}
	}
	rec, err := ex.cfg.Plans.LoadPlan(ctx, d.Tenant, d.RunID)
	if errors.Is(err, ErrNoRecord) {
		return nil, fmt.Errorf("planexec: nothing to resume for run %s: %w", quote(d.RunID), err)
	}
	if err != nil {
		return nil, fmt.Errorf("planexec: loading run %s: %w", quote(d.RunID), err)
	}
	v, perr := ex.validate(&rec.Plan, nil)
	if perr != nil {
		ex.rec.emit(Event{Kind: EventPlanRefused, RunID: d.RunID, Tenant: d.Tenant, PlanID: rec.Plan.ID, Revision: rec.Plan.Revision,
			StepID: perr.Step, Tool: perr.Tool, Reason: perr.Reason, Detail: "on resume"})
		return nil, perr
	}
	ex.rec.emit(Event{Kind: EventPlanResumed, RunID: d.RunID, Tenant: d.Tenant, PlanID: rec.Plan.ID, Revision: rec.Plan.Revision,
		Detail: fmt.Sprintf("%d of %d steps on record", len(rec.Steps), len(rec.Plan.Steps))})
	return ex.run(ctx, v, rec.Steps)
}

// Forget removes this run's plan record.
func (ex *Executor) Forget(ctx context.Context) error {
	if ex.cfg.Plans == nil {
		return &ConfigurationError{Problem: "no plan store"}
	}
	return ex.cfg.Plans.Forget(ctx, ex.cfg.Delegation.Tenant, ex.cfg.Delegation.RunID)
}

// Decide records a person's decision for a pending approval, so the next
// Resume finds it instead of asking again.
func (ex *Executor) Decide(ctx context.Context, d ApprovalDecision) error {
	if d.RecordID == "" {
		return fmt.Errorf("planexec: a decision must name the record it decides")
	}
	switch d.Status {
	case ApprovalGranted, ApprovalDenied:
	default:
		return fmt.Errorf("planexec: a decision is granted or denied, not %q", d.Status)
	}
	if d.DecidedAt.IsZero() {
		d.DecidedAt = ex.cfg.Now()
	}
	return ex.approvals.SaveDecision(ctx, ex.cfg.Delegation.Tenant, d)
}

// Resolve settles an idempotency key in doubt (see
// *IndeterminateOutcomeError) once the real outcome is known: the effect
// happened (its outcome is then replayed) or it did not (the step may run
// again).
func (ex *Executor) Resolve(ctx context.Context, key Key, r Resolution) error {
	if ex.cfg.Idempotency == nil {
		return &ConfigurationError{Problem: "no idempotency store"}
	}
	return ex.cfg.Idempotency.Resolve(ctx, key, r)
}

// run clears and executes v; done holds the steps already on record.
func (ex *Executor) run(ctx context.Context, v *vplan, done map[string]StepRecord) (*Result, error) {
	d := &ex.cfg.Delegation
	ev := func(e Event) {
		e.RunID, e.Tenant, e.PlanID, e.Revision = d.RunID, d.Tenant, v.plan.ID, v.plan.Revision
		ex.rec.emit(e)
	}
	if err := ex.prepare(v); err != nil {
		return nil, err
	}
	res := &Result{RunID: d.RunID, PlanID: v.plan.ID, Revision: v.plan.Revision, Steps: make(map[string]StepResult, len(v.steps))}
	finished := make([]bool, len(v.steps))
	for i, s := range v.steps {
		if r, ok := done[s.step.ID]; ok && r.Status == StepDone {
			finished[i] = true
			res.Steps[s.step.ID] = StepResult{Tool: r.Tool, Status: StepDone, Outcome: r.Outcome, Replayed: true, ApprovedBy: r.ApprovedBy}
			ev(Event{Kind: EventStepExecuted, StepID: s.step.ID, Tool: s.step.Tool, Replayed: true, Approver: r.ApprovedBy, Detail: "from the plan record"})
		}
	}
	clr, err := ex.clear(ctx, v, finished, ev)
	var pending *ApprovalPendingError
	if errors.As(err, &pending) {
		if serr := ex.savePlan(ctx, v, PlanAwaitingApproval); serr != nil {
			return nil, errors.Join(err, serr)
		}
		return res, err
	}
	if err != nil {
		ev(Event{Kind: EventPlanFailed, Detail: "not cleared; nothing ran"})
		return nil, err
	}
	if err := ex.savePlan(ctx, v, PlanRunning); err != nil {
		return nil, err
	}
	err = ex.dispatch(ctx, v, finished, clr, res, ev)
	status := PlanCompleted
	if err != nil {
		status = PlanFailed
		ev(Event{Kind: EventPlanFailed, Detail: fmt.Sprintf("%d of %d steps finished", len(res.Steps), len(v.steps))})
	} else {
		res.Complete = true
		ev(Event{Kind: EventPlanCompleted, Detail: fmt.Sprintf("%d steps", len(v.steps))})
	}
	// The final status is written even when ctx is done: it is the record of
	// how the run ended.
	if serr := ex.savePlan(context.WithoutCancel(ctx), v, status); serr != nil {
		err = errors.Join(err, serr)
	}
	return res, err
}

func (ex *Executor) savePlan(ctx context.Context, v *vplan, status PlanStatus) error {
	if ex.cfg.Plans == nil {
		return nil
	}
	now := ex.cfg.Now()
	d := &ex.cfg.Delegation
	err := ex.cfg.Plans.SavePlan(ctx, &PlanRecord{Version: PlanRecordVersion, Tenant: d.Tenant, RunID: d.RunID, Plan: v.plan, Status: status, Created: now, Updated: now})
	if err != nil {
		return fmt.Errorf("planexec: storing the plan of run %s: %w", quote(d.RunID), err)
	}
	return nil
}

// clear decides, before any step runs, every step that needs a grant or a
// person. It returns the first refusal or denial; pending decisions are
// collected into one *ApprovalPendingError.
func (ex *Executor) clear(ctx context.Context, v *vplan, finished []bool, ev func(Event)) ([]clearance, error) {
	d := &ex.cfg.Delegation
	clr := make([]clearance, len(v.steps))
	inPlan := map[string]decimal.Decimal{}
	var pending []ApprovalRequest
	for _, i := range v.order {
		if finished[i] {
			continue
		}
		s := &v.steps[i]
		id, tool := s.step.ID, s.step.Tool
		var why, class string
		if ex.cfg.Ladder != nil {
			if c, ok := ex.cfg.Ladder.Classify(tool); ok {
				class = c.Name
				dec := ex.cfg.Ladder.decide(d.Tenant, d.User, tool, s.args.canonical, inPlan)
				switch dec.verdict {
				case Refuse:
					ev(Event{Kind: EventAutonomyRefused, StepID: id, Tool: tool, Detail: dec.why})
					return nil, &AutonomyRefusedError{Step: id, Tool: tool, Class: class, Tenant: d.Tenant, Why: dec.why}
				case Escalate:
					ev(Event{Kind: EventAutonomyEscalated, StepID: id, Tool: tool, Grant: grantID(dec.grant), Detail: dec.why})
					why = "escalated by the autonomy ladder: " + dec.why
				case Act:
					ev(Event{Kind: EventAutonomyActed, StepID: id, Tool: tool, Grant: dec.grant.ID, Level: dec.grant.Level})
					clr[i].grant, clr[i].class, clr[i].amount = dec.grant.ID, class, dec.amount
					inPlan[dec.grant.ID] = inPlan[dec.grant.ID].Add(dec.amount)
					continue
				}
			}
		}
		if why == "" {
			switch {
			case s.entry.contract.irreversible:
				why = "the tool is irreversible"
			case s.entry.ask:
				why = "the agent requires approval for this tool"
			default:
				continue
			}
		}
		if ex.cfg.Gate == nil {
			return nil, &ConfigurationError{Tool: tool, Problem: "needs a person's approval but no approval gate is configured"}
		}
		req, err := ex.approvalRequest(v, s, class, why)
		if err != nil {
			return nil, err
		}
		decision, err := ex.decision(ctx, req, ev)
		if err != nil {
			return nil, err
		}
		if decision.Status == ApprovalPending {
			pending = append(pending, req)
			continue
		}
		clr[i].decision = &decision
	}
	if pending != nil {
		return nil, &ApprovalPendingError{RunID: d.RunID, Tenant: d.Tenant, Requests: pending}
	}
	return clr, nil
}

func grantID(g *Grant) string {
	if g == nil {
		return ""
	}
	return g.ID
}

func (ex *Executor) approvalRequest(v *vplan, s *vstep, class, why string) (ApprovalRequest, error) {
	d := &ex.cfg.Delegation
	argsDigest, err := canonjson.Digest(json.RawMessage(s.args.canonical))
	if err != nil {
		return ApprovalRequest{}, err
	}
	recordID, err := canonjson.Digest(struct {
		Tenant string `json:"tenant"`
		Run    string `json:"run"`
		Step   string `json:"step"`
		Tool   string `json:"tool"`
		Args   string `json:"arguments_digest"`
	}{d.Tenant, d.RunID, s.step.ID, s.step.Tool, argsDigest})
	if err != nil {
		return ApprovalRequest{}, err
	}
	return ApprovalRequest{
		RecordID: recordID, Tenant: d.Tenant, RunID: d.RunID, User: d.User, Agent: ex.cfg.Agent.Name,
		PlanID: v.plan.ID, Revision: v.plan.Revision, StepID: s.step.ID, Tool: s.step.Tool, Intent: s.step.Intent,
		Arguments: s.args.canonical, ArgumentsDigest: argsDigest, Irreversible: s.entry.contract.irreversible,
		Class: class, Why: why,
	}, nil
}

// decision finds the recorded decision for req or asks the gate, and returns
// a granted or pending decision, or the denial as an error.
func (ex *Executor) decision(ctx context.Context, req ApprovalRequest, ev func(Event)) (ApprovalDecision, error) {
	now := ex.cfg.Now()
	deny := func(dec ApprovalDecision, why string, replayed bool) (ApprovalDecision, error) {
		ev(Event{Kind: EventApprovalDenied, StepID: req.StepID, Tool: req.Tool, RecordID: req.RecordID, Approver: dec.Approver, Replayed: replayed, Detail: why})
		return dec, &ApprovalDeniedError{Step: req.StepID, Tool: req.Tool, RecordID: req.RecordID, Approver: dec.Approver, Why: why}
	}
	recorded, err := ex.approvals.Decision(ctx, req.Tenant, req.RecordID)
	switch {
	case err == nil && recorded.Status == ApprovalGranted && !recorded.expired(now):
		ev(Event{Kind: EventApprovalGranted, StepID: req.StepID, Tool: req.Tool, RecordID: req.RecordID, Approver: recorded.Approver, Replayed: true})
		return recorded, nil
	case err == nil && recorded.Status == ApprovalDenied:
		return deny(recorded, recorded.Reason, true)
	case err != nil && !errors.Is(err, ErrNoRecord):
		return ApprovalDecision{}, fmt.Errorf("planexec: reading the approval record of step %s: %w", quote(req.StepID), err)
	}
	ev(Event{Kind: EventApprovalRequired, StepID: req.StepID, Tool: req.Tool, RecordID: req.RecordID, Detail: req.Why})
	dec, err := ex.cfg.Gate.RequestApproval(ctx, req)
	if err != nil {
		return ApprovalDecision{}, fmt.Errorf("planexec: asking approval for step %s: %w", quote(req.StepID), err)
	}
	if dec.RecordID != req.RecordID {
		return deny(dec, "the decision names another record, so it clears nothing", false)
	}
	if dec.DecidedAt.IsZero() {
		dec.DecidedAt = now
	}
	switch dec.Status {
	case ApprovalGranted:
		if dec.expired(now) {
			return deny(dec, "the decision had already expired", false)
		}
		if err := ex.approvals.SaveDecision(ctx, req.Tenant, dec); err != nil {
			return ApprovalDecision{}, fmt.Errorf("planexec: recording the approval of step %s: %w", quote(req.StepID), err)
		}
		ev(Event{Kind: EventApprovalGranted, StepID: req.StepID, Tool: req.Tool, RecordID: req.RecordID, Approver: dec.Approver})
		return dec, nil
	case ApprovalPending:
		ev(Event{Kind: EventApprovalPending, StepID: req.StepID, Tool: req.Tool, RecordID: req.RecordID})
		return dec, nil
	case ApprovalDenied:
		if err := ex.approvals.SaveDecision(ctx, req.Tenant, dec); err != nil {
			return ApprovalDecision{}, fmt.Errorf("planexec: recording the denial of step %s: %w", quote(req.StepID), err)
		}
		return deny(dec, dec.Reason, false)
	default:
		return deny(dec, fmt.Sprintf("unknown decision status %q", dec.Status), false)
	}
}

// stepDone reports one finished worker.
type stepDone struct {
	i   int
	res StepResult
	err error
}

// dispatch runs the steps not yet finished: each starts the moment the last
// of its dependencies finishes, up to the concurrency bound. Every goroutine
// it starts has ended when it returns.
func (ex *Executor) dispatch(ctx context.Context, v *vplan, finished []bool, clr []clearance, res *Result, ev func(Event)) error {
	n := len(v.steps)
	waiting := make([]int, n)
	ready := make([]int, 0, n)
	for i := range n {
		waiting[i] = v.graph.Indegree(i)
	}
	release := func(i int) {
		for _, j := range v.graph.Dependents(i) {
			waiting[j]--
			if waiting[j] == 0 && !finished[j] {
				ready = append(ready, int(j))
			}
		}
	}
	// Steps already on record release their dependents before anything is
	// queued, so no step is queued twice.
	for i := range n {
		if finished[i] {
			for _, j := range v.graph.Dependents(i) {
				waiting[j]--
			}
		}
	}
	for _, i := range v.order {
		if !finished[i] && waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	results := make(chan stepDone, n)
	var errs []error
	running, stopping := 0, false
	cancelled := ctx.Done()
	for {
		for !stopping && running < ex.cfg.Concurrency && len(ready) > 0 {
			i := ready[0]
			ready = ready[1:]
			running++
			go func() {
				r, err := ex.runStep(ctx, v, i, clr[i], ev)
				results <- stepDone{i: i, res: r, err: err}
			}()
		}
		if running == 0 {
			break
		}
		select {
		case d := <-results:
			running--
			if d.res.Status != "" {
				res.Steps[v.steps[d.i].step.ID] = d.res
			}
			if d.err != nil {
				errs = append(errs, d.err)
				stopping = true
				continue
			}
			finished[d.i] = true
			release(d.i)
		case <-cancelled:
			cancelled = nil
			stopping = true
			errs = append(errs, context.Cause(ctx))
		}
	}
	return errors.Join(errs...)
}

// runStep checks that the step may still run, claims its key, calls the tool
// and records what happened.
func (ex *Executor) runStep(ctx context.Context, v *vplan, i int, clr clearance, ev func(Event)) (StepResult, error) {
	d := &ex.cfg.Delegation
	s := &v.steps[i]
	id, tool, irreversible := s.step.ID, s.step.Tool, s.entry.contract.irreversible
	res := StepResult{Tool: tool, Grant: clr.grant}
	if clr.decision != nil {
		res.ApprovedBy = clr.decision.Approver
	}
	if err := ctx.Err(); err != nil {
		return StepResult{}, context.Cause(ctx)
	}
	now := ex.cfg.Now()
	if d.expired(now) {
		return StepResult{}, &DelegationError{RunID: d.RunID, Step: id, Tool: tool, Why: "the delegation expired"}
	}
	if ex.cfg.Authorizer != nil {
		if err := ex.cfg.Authorizer.Authorize(ctx, *d, *s.step); err != nil {
			return StepResult{}, &DelegationError{RunID: d.RunID, Step: id, Tool: tool, Why: "no longer authorized", Err: err}
		}
	}
	if clr.decision != nil && clr.decision.expired(now) {
		ev(Event{Kind: EventApprovalDenied, StepID: id, Tool: tool, RecordID: clr.decision.RecordID, Approver: clr.decision.Approver, Detail: "the decision expired before the step ran"})
		return StepResult{}, &ApprovalDeniedError{Step: id, Tool: tool, RecordID: clr.decision.RecordID, Approver: clr.decision.Approver, Why: "the decision expired before the step ran"}
	}

	store := ex.cfg.Idempotency
	var epoch int64
	if store != nil {
		c, err := store.Claim(ctx, ClaimRequest{Key: s.key, RunID: d.RunID, StepID: id, Tool: tool, Holder: ex.cfg.Holder, Lease: ex.cfg.Lease, TakeOver: !irreversible})
		if err != nil {
			return StepResult{}, fmt.Errorf("planexec: claiming step %s: %w", quote(id), err)
		}
		switch c.State {
		case ClaimCompleted:
			res.Status, res.Outcome, res.Replayed = StepDone, c.Outcome, true
			if err := ex.saveStep(ctx, id, res, ""); err != nil {
				return res, err
			}
			ev(Event{Kind: EventStepExecuted, StepID: id, Tool: tool, Replayed: true, Approver: res.ApprovedBy, Grant: res.Grant})
			return res, nil
		case ClaimHeld, ClaimInDoubt:
			err := &IndeterminateOutcomeError{Step: id, Tool: tool, Key: s.key, Holder: c.Holder, InDoubt: c.State == ClaimInDoubt, LeaseExpires: c.LeaseExpires}
			ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "outcome indeterminate; not run twice"})
			return StepResult{}, err
		case ClaimAcquired:
			epoch = c.Epoch
		default:
			return StepResult{}, fmt.Errorf("planexec: claiming step %s: unknown claim state %d", quote(id), c.State)
		}
	}
	if clr.grant != "" {
		if err := ex.cfg.Ladder.commit(clr.grant, clr.amount); err != nil {
			if store != nil {
				_ = store.Release(context.WithoutCancel(ctx), s.key, epoch, false)
			}
			ev(Event{Kind: EventAutonomyRefused, StepID: id, Tool: tool, Grant: clr.grant, Detail: err.Error()})
			return StepResult{}, &AutonomyRefusedError{Step: id, Tool: tool, Class: clr.class, Tenant: d.Tenant, Why: err.Error()}
		}
	}

	ev(Event{Kind: EventStepStarted, StepID: id, Tool: tool})
	start := ex.cfg.Now()
	out, err := ex.call(ctx, v, s, epoch)
	elapsed := ex.cfg.Now().Sub(start)
	var outcome json.RawMessage
	if err == nil {
		if outcome, err = json.Marshal(out); err != nil {
			err = fmt.Errorf("the outcome cannot be recorded as JSON: %w", err)
		}
	}
	// What follows records the step whatever happens to ctx: the effect, if
	// any, has happened.
	rctx := context.WithoutCancel(ctx)
	if err != nil {
		inDoubt := irreversible && !errors.Is(err, ErrNotApplied)
		res.Status, res.Err = StepFailed, err
		if inDoubt {
			res.Status = StepInDoubt
		}
		serr := ex.saveStep(rctx, id, res, err.Error())
		if store != nil {
			serr = errors.Join(serr, store.Release(rctx, s.key, epoch, inDoubt))
		}
		ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Duration: elapsed, Detail: string(res.Status)})
		return res, errors.Join(&StepError{Step: id, Tool: tool, Err: err}, serr)
	}
	res.Status, res.Outcome = StepDone, outcome
	if store != nil {
		if err := store.Complete(rctx, s.key, epoch, outcome); err != nil {
			res.Status, res.Err = StepInDoubt, err
			ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Duration: elapsed, Detail: "outcome not recorded"})
			return res, fmt.Errorf("planexec: recording the outcome of step %s: %w", quote(id), err)
		}
	}
	if err := ex.saveStep(rctx, id, res, ""); err != nil {
		return res, err
	}
	ev(Event{Kind: EventStepExecuted, StepID: id, Tool: tool, Duration: elapsed, Approver: res.ApprovedBy, Grant: res.Grant})
	return res, nil
}

// call runs the tool with its key and step in the context, renewing the
// claim's lease while it runs. A panic in the tool is its error.
func (ex *Executor) call(ctx context.Context, v *vplan, s *vstep, epoch int64) (out any, err error) {
	d := &ex.cfg.Delegation
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	info := &StepInfo{RunID: d.RunID, Tenant: d.Tenant, PlanID: v.plan.ID, Revision: v.plan.Revision, StepID: s.step.ID, Tool: s.step.Tool}
	tctx = context.WithValue(tctx, keyStep, info)
	if store := ex.cfg.Idempotency; store != nil {
		tctx = context.WithValue(tctx, keyIdempotency, s.key.Digest)
		lease := ex.cfg.Lease
		r := renew(lease/3, func() bool {
			err := store.Extend(tctx, s.key, epoch, lease)
			if errors.Is(err, ErrFenced) {
				cancel(fmt.Errorf("planexec: step %s lost its claim to another holder: %w", quote(s.step.ID), err))
				return false
			}
			return true
		})
		defer r.stop()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("planexec: tool %s panicked: %v", quote(s.step.Tool), p)
		}
	}()
	return s.entry.tool.call(tctx, s.args.value)
}

// renewer calls extend every period until stopped, on a timer rather than a
// goroutine of its own: most tools finish before the first renewal is due.
type renewer struct {
	mu      sync.Mutex
	stopped bool
	t       *time.Timer
	wg      sync.WaitGroup // one count per scheduled or running renewal
}

// renew starts renewing; extend returns false to stop.
func renew(period time.Duration, extend func() bool) *renewer {
	r := &renewer{}
	var fire func()
	fire = func() {
		defer r.wg.Done()
		more := extend()
		r.mu.Lock()
		defer r.mu.Unlock()
		if more && !r.stopped {
			r.wg.Add(1)
			r.t.Reset(period)
		}
	}
	r.mu.Lock()
	r.wg.Add(1)
	r.t = time.AfterFunc(period, fire)
	r.mu.Unlock()
	return r
}

// stop ends renewal and waits for one in progress, so nothing outlives the
// step.
func (r *renewer) stop() {
	r.mu.Lock()
	r.stopped = true
	if r.t.Stop() {
		r.wg.Done()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (ex *Executor) saveStep(ctx context.Context, id string, r StepResult, errText string) error {
	if ex.cfg.Plans == nil {
		return nil
	}
	d := &ex.cfg.Delegation
	err := ex.cfg.Plans.SaveStep(ctx, d.Tenant, d.RunID, StepRecord{
		StepID: id, Tool: r.Tool, Status: r.Status, Outcome: r.Outcome, Replayed: r.Replayed,
		ApprovedBy: r.ApprovedBy, Error: errText, Finished: ex.cfg.Now(),
	})
	if err != nil {
		return fmt.Errorf("planexec: recording step %s: %w", quote(id), err)
	}
	return nil
}
