package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

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
	// Gate asks a person. NewExecutor requires one when an allowed tool is
	// irreversible or approval-required and no autonomy class covers it; a
	// ladder that escalates with no gate fails at Execute with a
	// *ConfigurationError.
	Gate ApprovalGate
	// Approvals keeps decisions so a resume never asks twice. Default: the
	// plan store, when it is also an ApprovalStore (MemoryPlanStore and the
	// durable stores are); otherwise in memory, for this executor only.
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
	steps     StepStore // when Plans and Idempotency are one StepStore
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
			Strict:       e.contract.strict,
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
	if ss, ok := cfg.Plans.(StepStore); ok && cfg.Idempotency != nil && reflect.TypeOf(cfg.Plans).Comparable() && any(cfg.Plans) == any(cfg.Idempotency) {
		ex.steps = ss
	}
	if len(ex.catalog) == 0 {
		return nil, &ConfigurationError{Problem: fmt.Sprintf("the delegation's scope leaves agent %q no tool to plan with", cfg.Agent.Name)}
	}
	ex.approvals = cfg.Approvals
	if ex.approvals == nil {
		ex.approvals, _ = cfg.Plans.(ApprovalStore)
	}
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
	// Key is the step's idempotency key: what Executor.Resolve takes if the
	// step is left in doubt.
	Key Key
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

// Execute validates plan, clears every step that needs a person or a grant,
// stores the plan, and runs it: each step starts as soon as all it depends on
// finished, up to Config.Concurrency at once. A denial or refusal during
// clearance means no step ran. Just before each step runs, the delegation,
// its grant and its approval are checked again (expiry, revocation). A failed
// step stops new dispatch; running steps finish and are recorded; the errors
// are returned joined.
//
// The Result is nil when nothing ran: the plan was refused, not cleared, or
// awaits a person. Otherwise it holds what finished, even when err is not nil.
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

// Resolve settles an effect in doubt (see *IndeterminateOutcomeError) once
// the real outcome is known: it happened (r.Outcome is then replayed as the
// step's outcome) or it did not (the step may run again). It settles the key
// in the idempotency store and the step's record in the plan store, whichever
// this executor has. A key this run has no record of is ErrNoRecord.
func (ex *Executor) Resolve(ctx context.Context, key Key, r Resolution) error {
	d := &ex.cfg.Delegation
	if ex.cfg.Idempotency == nil && ex.cfg.Plans == nil {
		return &ConfigurationError{Problem: "no idempotency store and no plan store: nothing records an outcome to resolve"}
	}
	if key.Tenant != d.Tenant {
		return fmt.Errorf("planexec: key %s: %w", key.Digest, ErrNoRecord)
	}
	if r.Applied {
		if len(r.Outcome) == 0 {
			r.Outcome = json.RawMessage("null")
		}
		if !json.Valid(r.Outcome) {
			return fmt.Errorf("planexec: the outcome of a resolution must be JSON")
		}
	}
	found := false
	if store := ex.cfg.Idempotency; store != nil {
		err := store.Resolve(ctx, key, r)
		switch {
		case err == nil:
			found = true
		case !errors.Is(err, ErrNoRecord):
			return fmt.Errorf("planexec: resolving key %s: %w", key.Digest, err)
		}
	}
	if ex.cfg.Plans != nil {
		rec, err := ex.cfg.Plans.LoadPlan(ctx, d.Tenant, d.RunID)
		if err != nil && !errors.Is(err, ErrNoRecord) {
			return fmt.Errorf("planexec: resolving key %s: %w", key.Digest, err)
		}
		if rec != nil {
			for _, st := range rec.Steps {
				if st.Key != key.Digest || st.Status != StepInDoubt {
					continue
				}
				st.Status, st.Outcome, st.Error = StepFailed, nil, "resolved: not applied"
				if r.Applied {
					st.Status, st.Outcome, st.Error = StepDone, r.Outcome, ""
				}
				st.Finished = ex.cfg.Now()
				if err := ex.cfg.Plans.SaveStep(ctx, d.Tenant, d.RunID, st); err != nil {
					return fmt.Errorf("planexec: resolving step %s: %w", quote(st.StepID), err)
				}
				found = true
			}
		}
	}
	if !found {
		return fmt.Errorf("planexec: key %s: %w", key.Digest, ErrNoRecord)
	}
	return nil
}

// run clears and executes v; done holds the steps already on record.
func (ex *Executor) run(ctx context.Context, v *vplan, done map[string]StepRecord) (*Result, error) {
	d := &ex.cfg.Delegation
	ev := func(e Event) {
		e.RunID, e.Tenant, e.PlanID, e.Revision = d.RunID, d.Tenant, v.plan.ID, v.plan.Revision
		ex.rec.emit(e)
	}
	ex.rec.reserve(4 * len(v.steps))
	res := &Result{RunID: d.RunID, PlanID: v.plan.ID, Revision: v.plan.Revision, Steps: make(map[string]StepResult, len(v.steps))}
	finished := make([]bool, len(v.steps))
	// What finished steps put against each grant still counts: ceilings are
	// cumulative over the whole plan, across resumes.
	spent := map[string]decimal.Decimal{}
	for i, s := range v.steps {
		r, ok := done[s.step.ID]
		if !ok || r.PlanID != v.plan.ID || r.Tool != s.step.Tool {
			continue
		}
		switch r.Status {
		case StepDone:
			finished[i] = true
			res.Steps[s.step.ID] = StepResult{Tool: r.Tool, Status: StepDone, Outcome: r.Outcome, Replayed: true,
				ApprovedBy: r.ApprovedBy, Grant: r.Grant, Key: Key{Tenant: d.Tenant, Digest: r.Key}}
			if r.Grant != "" {
				spent[r.Grant] = spent[r.Grant].Add(r.Amount)
			}
			ev(Event{Kind: EventStepExecuted, StepID: s.step.ID, Tool: s.step.Tool, Replayed: true, Approver: r.ApprovedBy, Detail: "from the plan record"})
		case StepInDoubt:
			// The effect may have landed: nothing runs until it is resolved.
			ev(Event{Kind: EventStepFailed, StepID: s.step.ID, Tool: s.step.Tool, Detail: "in doubt on the record; resolve it before resuming"})
			ev(Event{Kind: EventPlanFailed, Detail: "a step is in doubt; nothing ran"})
			return nil, &IndeterminateOutcomeError{Step: s.step.ID, Tool: s.step.Tool, Key: Key{Tenant: d.Tenant, Digest: r.Key}, InDoubt: true}
		}
	}
	clr, err := ex.clear(ctx, v, finished, spent, ev)
	var pending *ApprovalPendingError
	if errors.As(err, &pending) {
		if serr := ex.savePlan(ctx, v, PlanAwaitingApproval); serr != nil {
			return nil, errors.Join(err, serr)
		}
		pending.Stored = ex.cfg.Plans != nil
		return nil, err
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
		ev(Event{Kind: EventPlanFailed, Detail: fmt.Sprintf("%d of %d steps finished", countDone(res), len(v.steps))})
	} else {
		res.Complete = true
		ev(Event{Kind: EventPlanCompleted, Detail: fmt.Sprintf("%d steps", len(v.steps))})
	}
	// The final status is written even when ctx is done: it is the record of
	// how the run ended. A run that lost a claim to another holder leaves
	// the status to that holder.
	if !errors.Is(err, ErrFenced) {
		if serr := ex.savePlan(context.WithoutCancel(ctx), v, status); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	return res, err
}

func countDone(res *Result) int {
	n := 0
	for _, s := range res.Steps {
		if s.Status == StepDone {
			n++
		}
	}
	return n
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

// stepDone reports one finished worker.
type stepDone struct {
	i   int
	res StepResult
	err error
}

// errNotStarted marks a step that was dispatched but found the run already
// cancelled; the cancellation itself is reported once, by dispatch.
var errNotStarted = errors.New("planexec: not started: the run was cancelled")

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
	running, stopping, cancelled := 0, false, false
	done := ctx.Done()
	for {
		for !stopping && running < ex.cfg.Concurrency && len(ready) > 0 {
			i := ready[0]
			ready = ready[1:]
			running++
			go func() {
				// Sent from a deferred call so that a tool ending its
				// goroutine (runtime.Goexit) still reports.
				d := stepDone{i: i}
				defer func() { results <- d }()
				d.res, d.err = ex.runStep(ctx, v, i, clr[i], ev, &d)
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
				if d.err != errNotStarted {
					errs = append(errs, d.err)
				}
				stopping = true
				continue
			}
			finished[d.i] = true
			for _, j := range v.graph.Dependents(d.i) {
				waiting[j]--
				if waiting[j] == 0 && !finished[j] {
					ready = append(ready, int(j))
				}
			}
		case <-done:
			done = nil
			stopping, cancelled = true, true
			errs = append(errs, context.Cause(ctx))
		}
	}
	if !cancelled && ctx.Err() != nil && len(ready) > 0 {
		errs = append(errs, context.Cause(ctx))
	}
	return errors.Join(errs...)
}

// runStep checks that the step may still run, claims its key, calls the tool
// and records what happened.
//
// out receives the result instead when the tool ends its goroutine.
func (ex *Executor) runStep(ctx context.Context, v *vplan, i int, clr clearance, ev func(Event), out *stepDone) (StepResult, error) {
	d := &ex.cfg.Delegation
	s := &v.steps[i]
	id, tool, irreversible := s.step.ID, s.step.Tool, s.entry.contract.irreversible
	res := StepResult{Tool: tool, Key: s.key}
	if clr.grant != nil {
		res.Grant = clr.grant.ID
	}
	if clr.decision != nil {
		res.ApprovedBy = clr.decision.Approver
	}
	if ctx.Err() != nil {
		return StepResult{}, errNotStarted
	}
	if err := ex.recheck(ctx, s, clr, ev); err != nil {
		return StepResult{}, err
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
			if err := ex.saveStep(ctx, v, id, res, clr, ""); err != nil {
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
	if clr.grant != nil {
		if err := ex.cfg.Ladder.commit(clr.grant, clr.amount); err != nil {
			if store != nil {
				_ = store.Release(context.WithoutCancel(ctx), s.key, epoch, false)
			}
			ev(Event{Kind: EventAutonomyRefused, StepID: id, Tool: tool, Grant: clr.grant.ID, Detail: err.Error()})
			return StepResult{}, &AutonomyRefusedError{Step: id, Tool: tool, Class: clr.class, Tenant: d.Tenant, Why: err.Error(), AtDispatch: true}
		}
	}

	ev(Event{Kind: EventStepStarted, StepID: id, Tool: tool})
	// What follows the call records the step whatever happens to ctx: the
	// effect, if any, has happened.
	rctx := context.WithoutCancel(ctx)
	start := ex.cfg.Now()
	// A tool that ends its goroutine (runtime.Goexit) skips the rest of
	// this function but not its deferred calls: record it as a failure.
	exited := true
	defer func() {
		if exited {
			out.res, out.err = ex.failed(rctx, v, s, clr, res, epoch, ex.cfg.Now().Sub(start), errToolExited)
		}
	}()
	outcome, err := ex.call(ctx, v, s, epoch)
	exited = false
	elapsed := ex.cfg.Now().Sub(start)
	if err != nil {
		return ex.failed(rctx, v, s, clr, res, epoch, elapsed, err)
	}
	res.Status, res.Outcome = StepDone, outcome
	if store != nil {
		var err error
		if ex.steps != nil {
			err = ex.steps.CompleteStep(rctx, s.key, epoch, outcome, d.RunID, ex.stepRecord(v, id, res, clr, ""))
		} else {
			err = store.Complete(rctx, s.key, epoch, outcome)
		}
		if errors.Is(err, ErrFenced) {
			// Another holder took the step over and owns its record now:
			// write nothing over it.
			ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Duration: elapsed, Detail: "claim taken over by another holder; its record stands"})
			return StepResult{}, fmt.Errorf("planexec: recording the outcome of step %s: %w", quote(id), err)
		}
		if err != nil {
			// The effect happened but is not on the idempotency record.
			err = fmt.Errorf("planexec: recording the outcome of step %s: %w", quote(id), err)
			res.Status, res.Outcome, res.Err = StepFailed, nil, err
			if irreversible {
				res.Status = StepInDoubt
				err = &IndeterminateOutcomeError{Step: id, Tool: tool, Key: s.key, InDoubt: true, Err: err}
			}
			ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Duration: elapsed, Detail: "outcome not recorded"})
			return res, errors.Join(err, ex.saveStep(rctx, v, id, res, clr, err.Error()))
		}
	}
	if ex.steps == nil {
		if err := ex.saveStep(rctx, v, id, res, clr, ""); err != nil {
			return res, err
		}
	}
	ev(Event{Kind: EventStepExecuted, StepID: id, Tool: tool, Duration: elapsed, Approver: res.ApprovedBy, Grant: res.Grant})
	if clr.grant != nil && clr.grant.Level == LevelActAndReport {
		ev(Event{Kind: EventAutonomyReported, StepID: id, Tool: tool, Grant: clr.grant.ID, Level: clr.grant.Level})
	}
	return res, nil
}

// errToolExited is the failure of a tool that ended its goroutine without
// returning.
var errToolExited = errors.New("the tool exited its goroutine without returning")

// failed records a tool's failure: in doubt when the tool is irreversible and
// the error does not promise ErrNotApplied, failed (and its key freed)
// otherwise.
func (ex *Executor) failed(ctx context.Context, v *vplan, s *vstep, clr clearance, res StepResult, epoch int64, elapsed time.Duration, err error) (StepResult, error) {
	id, tool := s.step.ID, s.step.Tool
	inDoubt := s.entry.contract.irreversible && !errors.Is(err, ErrNotApplied)
	res.Status, res.Err = StepFailed, err
	if inDoubt {
		res.Status = StepInDoubt
	}
	var serr error
	switch store := ex.cfg.Idempotency; {
	case ex.steps != nil:
		if serr = ex.steps.ReleaseStep(ctx, s.key, epoch, inDoubt, ex.cfg.Delegation.RunID, ex.stepRecord(v, id, res, clr, err.Error())); serr != nil {
			serr = fmt.Errorf("planexec: recording the failure of step %s: %w", quote(id), serr)
		}
	case store != nil:
		// Release first: a holder whose claim was taken over writes no
		// record over the new holder's.
		if serr = store.Release(ctx, s.key, epoch, inDoubt); !errors.Is(serr, ErrFenced) {
			serr = errors.Join(serr, ex.saveStep(ctx, v, id, res, clr, err.Error()))
		}
	default:
		serr = ex.saveStep(ctx, v, id, res, clr, err.Error())
	}
	ex.rec.emit(Event{Kind: EventStepFailed, RunID: ex.cfg.Delegation.RunID, Tenant: ex.cfg.Delegation.Tenant, PlanID: v.plan.ID, Revision: v.plan.Revision,
		StepID: id, Tool: tool, Duration: elapsed, Detail: string(res.Status)})
	var failure error = &StepError{Step: id, Tool: tool, Err: err}
	if inDoubt {
		failure = &IndeterminateOutcomeError{Step: id, Tool: tool, Key: s.key, InDoubt: true, Err: failure}
	}
	return res, errors.Join(failure, serr)
}

// recheck asks again, just before a step runs, whether it may: the
// delegation (expiry, revocation) and a person's decision (withdrawn,
// expired). Grants are checked again when they are committed.
func (ex *Executor) recheck(ctx context.Context, s *vstep, clr clearance, ev func(Event)) error {
	d := &ex.cfg.Delegation
	id, tool := s.step.ID, s.step.Tool
	now := ex.cfg.Now()
	if d.expired(now) {
		ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "not run: the delegation expired"})
		return &DelegationError{RunID: d.RunID, Step: id, Tool: tool, Why: "the delegation expired"}
	}
	if ex.cfg.Authorizer != nil {
		if err := ex.cfg.Authorizer.Authorize(ctx, *d, *s.step); err != nil {
			ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "not run: the delegation no longer covers it"})
			return &DelegationError{RunID: d.RunID, Step: id, Tool: tool, Why: "no longer authorized", Err: err}
		}
	}
	if clr.decision == nil {
		return nil
	}
	why := ""
	dec, err := ex.approvals.Decision(ctx, d.Tenant, clr.decision.RecordID)
	switch {
	case errors.Is(err, ErrNoRecord):
		why = "the decision is no longer on record"
	case err != nil:
		return fmt.Errorf("planexec: reading the approval record of step %s: %w", quote(id), err)
	case dec.Status != ApprovalGranted:
		why = "the decision was changed to " + string(dec.Status) + " before the step ran"
	case dec.expired(now):
		why = "the decision expired before the step ran"
	default:
		return nil
	}
	ev(Event{Kind: EventApprovalDenied, StepID: id, Tool: tool, RecordID: dec.RecordID, Approver: dec.Approver, Detail: why})
	return &ApprovalDeniedError{Step: id, Tool: tool, RecordID: clr.decision.RecordID, Approver: dec.Approver, Why: why}
}

// call runs the tool with its step and key in the context, renewing the
// claim's lease while it runs, and renders its outcome as JSON. A panic, in
// the tool or in rendering its outcome, is its error.
func (ex *Executor) call(ctx context.Context, v *vplan, s *vstep, epoch int64) (outcome json.RawMessage, err error) {
	d := &ex.cfg.Delegation
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sc := &stepContext{info: StepInfo{RunID: d.RunID, Tenant: d.Tenant, PlanID: v.plan.ID, Revision: v.plan.Revision, StepID: s.step.ID, Tool: s.step.Tool}}
	if store := ex.cfg.Idempotency; store != nil {
		sc.key = s.key.Digest
		lease := ex.cfg.Lease
		// Renewal goes on while the tool runs even if the caller's ctx is
		// cancelled (the tool may not stop at once), and each renewal is
		// bounded so a hung store cannot hold the step.
		rctx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
		r := renew(lease/3, func() bool {
			c, done := context.WithTimeout(rctx, lease/3)
			defer done()
			if err := store.Extend(c, s.key, epoch, lease); errors.Is(err, ErrFenced) {
				cancel(fmt.Errorf("planexec: step %s lost its claim to another holder: %w", quote(s.step.ID), err))
				return false
			}
			return true
		})
		defer func() {
			stopRenewing()
			r.stop()
		}()
	}
	tctx = context.WithValue(tctx, stepKey{}, sc)
	defer func() {
		if p := recover(); p != nil {
			outcome, err = nil, fmt.Errorf("planexec: tool %s panicked: %v", quote(s.step.Tool), p)
		}
	}()
	out, err := s.entry.tool.call(tctx, s.args.value)
	if err != nil {
		return nil, err
	}
	if outcome, err = json.Marshal(out); err != nil {
		return nil, fmt.Errorf("the outcome cannot be recorded as JSON: %w", err)
	}
	return outcome, nil
}

// stepRecord is what the plan store keeps of a step.
func (ex *Executor) stepRecord(v *vplan, id string, r StepResult, clr clearance, errText string) StepRecord {
	rec := StepRecord{
		StepID: id, PlanID: v.plan.ID, Tool: r.Tool, Status: r.Status, Outcome: r.Outcome, Replayed: r.Replayed,
		Key: r.Key.Digest, ApprovedBy: r.ApprovedBy, Error: errText, Finished: ex.cfg.Now(),
	}
	if clr.grant != nil {
		rec.Grant, rec.Amount = clr.grant.ID, clr.amount
	}
	return rec
}

func (ex *Executor) saveStep(ctx context.Context, v *vplan, id string, r StepResult, clr clearance, errText string) error {
	if ex.cfg.Plans == nil {
		return nil
	}
	d := &ex.cfg.Delegation
	if err := ex.cfg.Plans.SaveStep(ctx, d.Tenant, d.RunID, ex.stepRecord(v, id, r, clr, errText)); err != nil {
		return fmt.Errorf("planexec: recording step %s: %w", quote(id), err)
	}
	return nil
}
