package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/store"
)

// Run is one job under one delegation: it plans, validates, executes and
// resumes, and keeps the run's events and token usage. Make one per job with
// Executor.Run; it is cheap (the executor holds the tools and the store).
//
// A Run is safe for concurrent use, but executes one plan at a time: Execute,
// Resume or Do while another of them is running on the same Run is
// ErrRunBusy.
type Run struct {
	ex       *Executor
	d        Delegation
	own      map[string]*Tool // tools given to this run alone (WithTools)
	ownOrder []*Tool          // the same, in the order given
	optErr   error            // what an option found wrong
	catalog  []ToolSpec       // the tools the delegation allows, in Config.Tools order, then the run's own
	j        journal          // the run's events, and what of them the store holds
	busy     atomic.Bool

	mu      sync.Mutex
	usage   llm.Usage
	planned planRef // the last plan Plan accepted
	current *Plan   // the plan last planned or run, for Current

	stepTimeout time.Duration // WithStepTimeout; 0 takes Config.StepTimeout

	// holder names the execution the call in progress runs as, in the
	// claims it takes and on the run it holds; taken is the name Recover
	// took the run under, for the call it makes; rev is the revision of the
	// run's record the call read or last wrote. All are the busy call's.
	holder, taken string
	rev           int64
	// planning is set while Do or Reply runs rounds over a store that
	// recovers runs (one with leases): a save that leaves the run planning
	// its next round holds it, so another execution plans no round
	// meanwhile; held says the last save did; saved is what it saved. All
	// are the busy call's.
	planning, held bool
	saved          *vplan
}

// planRef names one revision of a plan.
type planRef struct {
	id       string
	revision int
}

// RunOption configures a run.
type RunOption func(*Run)

// WithObserver watches this run's events live, after Config.Observer.
func WithObserver(o Observer) RunOption {
	return func(r *Run) {
		if o != nil {
			r.j.observers = append(r.j.observers, o)
		}
	}
}

// WithStepTimeout bounds each tool's call in this run, in place of
// Config.StepTimeout.
func WithStepTimeout(d time.Duration) RunOption {
	return func(r *Run) { r.stepTimeout = d }
}

// Current is the plan the run last planned or ran: in a run of rounds, the
// current round's. An observer may read it when PLANNED or PLAN_RESUMED
// says a plan is there (its goal, its steps' intents). ok is false before
// any plan.
func (r *Run) Current() (Plan, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == nil {
		return Plan{}, false
	}
	p := *r.current
	p.Steps = slices.Clone(p.Steps)
	return p, true
}

// start marks the run busy with one call (Execute, Resume, Do, Reply), run
// as an execution of its own, or as the one Recover took the run for.
func (r *Run) start() bool {
	if !r.busy.CompareAndSwap(false, true) {
		return false
	}
	r.holder, r.rev = r.ex.holder(), 0
	r.planning, r.held, r.saved = false, false, nil
	if r.taken != "" {
		r.holder, r.taken = r.taken, ""
	}
	return true
}

// WithTools gives the run tools of its own beside the executor's: tools
// its caller runs (NewClientTool), which each caller brings. A tool of the
// executor's name, or two of one name, is a *ConfigurationError from Run.
// The delegation's scope narrows them as it narrows the executor's. A run
// that resumes a stored plan needs the same tools again.
func WithTools(tools ...*Tool) RunOption {
	return func(r *Run) {
		if r.own == nil {
			r.own = map[string]*Tool{}
		}
		for _, t := range tools {
			if t == nil || t.contract == nil {
				r.optErr = &ConfigurationError{Why: "a nil tool; build tools with NewTool or NewClientTool"}
				continue
			}
			_, theirs := r.ex.tools[t.name]
			if _, dup := r.own[t.name]; dup || theirs {
				r.optErr = &ConfigurationError{Tool: t.name, Why: "is given twice: by the executor or the run"}
				continue
			}
			if err := r.ex.cfg.needsGate(t); err != nil {
				r.optErr = err
				continue
			}
			r.own[t.name] = t
			r.ownOrder = append(r.ownOrder, t)
		}
	}
}

// tool is the tool named name: the executor's, or the run's own.
func (r *Run) tool(name string) (*Tool, bool) {
	if t, ok := r.ex.tools[name]; ok {
		return t, true
	}
	t, ok := r.own[name]
	return t, ok
}

// Run makes a run acting under d. A missing run id gets a new one. Ids that
// could not be stored and shown faithfully (invalid UTF-8, control
// characters in the run id, tenant, user or agent) are a *DelegationError.
//
// Making a run touches no store: a run of an id the store already holds
// picks up that record on Resume or Do.
func (ex *Executor) Run(d Delegation, opts ...RunOption) (*Run, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	r := &Run{ex: ex, d: d}
	r.j.record.now = ex.now
	r.j.h, r.j.tenant, r.j.run = ex.st.history, d.Tenant, d.RunID
	if ex.cfg.Observer != nil {
		r.j.observers = append(r.j.observers, ex.cfg.Observer)
	}
	for _, o := range opts {
		o(r)
	}
	if r.optErr != nil {
		return nil, r.optErr
	}
	r.catalog = ex.catalog
	if d.Scope != nil || len(r.ownOrder) > 0 {
		all := slices.Clone(ex.catalog)
		for _, t := range r.ownOrder {
			all = append(all, t.spec())
		}
		r.catalog = nil
		for _, t := range all {
			if d.Scope == nil || slices.Contains(d.Scope, t.Name) {
				r.catalog = append(r.catalog, t)
			}
		}
	}
	return r, nil
}

// ID is the run's id.
func (r *Run) ID() string { return r.d.RunID }

// Delegation is the authority the run acts under.
func (r *Run) Delegation() Delegation {
	d := r.d
	d.Scope = slices.Clone(d.Scope)
	return d
}

// Catalog describes the tools a plan of this run may use: the executor's
// tools that the delegation covers.
func (r *Run) Catalog() []ToolSpec { return slices.Clone(r.catalog) }

// Events returns the run's record so far, in order.
func (r *Run) Events() []Event { return r.j.snapshot() }

// Usage is the token usage of every planning call this run made.
func (r *Run) Usage() llm.Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.usage
}

// Validate checks the whole plan and returns a *PlanValidationError for the
// first thing wrong, in this order: empty, too_long, malformed (a plan
// larger than Limits.MaxPlanBytes), then per step (malformed id,
// duplicate_id, unknown_tool, not_allowed, a reference not written as one,
// arguments), then duplicate_effect, dependency (references included),
// cycle, and whether each reference fits (see RefKey). It never panics and
// costs O(steps + edges) plus the size of the arguments.
func (r *Run) Validate(plan Plan) error {
	if _, err := r.validate(&plan, nil, nil, &r.d); err != nil {
		return err
	}
	return nil
}

// Authorize asks for each step of plan what is asked just before the step
// runs: whether the run's delegation has expired, and Config.Authorizer.
// With Validate (and CheckPreconditions), it tells whether a plan would be
// let run now, before anything runs or is stored (a plan proposed for a
// person to apply, say). A step not covered is a *DelegationError naming
// it, wrapping the authorizer's error.
func (r *Run) Authorize(ctx context.Context, plan Plan) error {
	d := &r.d
	if d.expired(r.ex.now()) {
		return &DelegationError{RunID: d.RunID, Why: "the delegation expired"}
	}
	if r.ex.cfg.Authorizer == nil {
		return nil
	}
	names := max(r.ex.cfg.Limits.MaxIDLength, 64)
	for i := range plan.Steps {
		s := &plan.Steps[i]
		if err := r.ex.cfg.Authorizer.Authorize(ctx, *d, *s); err != nil {
			return &DelegationError{RunID: d.RunID, Step: clip(s.ID, names), Tool: clip(s.Tool, names), Why: "not authorized", Err: err}
		}
	}
	return nil
}

// CheckPreconditions asks the world whether it would take plan now: each
// step's tool's Precondition, under the run's delegation. It leaves to the
// gate, which checks every step just before it acts, the steps it cannot
// judge now: a step whose arguments hold references, one that waits on a
// step yet to act (the world it acts in is not this one), and one whose key
// is not free (a step of the run that acted, or may have: what it did may
// be why the world refuses it now). A precondition unmet is a
// *PlanValidationError with ReasonPrecondition naming the step; a plan
// Validate refuses is refused so. Nothing runs.
func (r *Run) CheckPreconditions(ctx context.Context, plan Plan) error {
	if !r.hasPreconditions() {
		return nil
	}
	d := &r.d
	v, perr := r.validate(&plan, nil, nil, d)
	if perr != nil {
		return perr
	}
	acts := map[string]bool{} // the steps yet to act, and those after them
	for _, i := range v.order {
		s := &v.steps[i]
		id := s.step.ID
		after := slices.ContainsFunc(s.step.DependsOn, func(dep string) bool { return acts[dep] })
		if s.refs != nil {
			acts[id] = true
			continue
		}
		c, err := r.ex.st.Claim(ctx, store.ClaimRequest{Key: s.key, RunID: d.RunID, StepID: id, Tool: s.step.Tool,
			PerTenant: s.tool.contract.perTenant, Peek: true})
		if err != nil {
			return fmt.Errorf("planexec: reading the claim of step %s: %w", quote(id), err)
		}
		free := c.State == store.ClaimFree
		acts[id] = free || after
		if !free || after || s.tool.contract.pre == nil {
			continue
		}
		if err := r.precondition(ctx, v, i, s, d); err != nil {
			return err
		}
	}
	return nil
}

// hasPreconditions reports whether a tool of the run declares one.
func (r *Run) hasPreconditions() bool {
	for _, t := range r.ex.tools {
		if t.contract.pre != nil {
			return true
		}
	}
	return false
}

// precondition runs the Precondition of step i of v, s as it is about to
// run, under d: nil when it holds or the tool has none, a
// *PlanValidationError with ReasonPrecondition when it is unmet, and the
// check's own error, wrapped, when it could not be checked.
func (r *Run) precondition(ctx context.Context, v *vplan, i int, s *vstep, d *Delegation) error {
	pre := s.tool.contract.pre
	if pre == nil {
		return nil
	}
	err := pre(ctx, *d, s.args.value)
	var unmet *UnmetError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &unmet):
		return &PlanValidationError{Reason: ReasonPrecondition, Step: s.step.ID, Tool: s.step.Tool,
			Violations: []Violation{{Path: fmt.Sprintf("/steps/%d", i), Why: unmet.Why}},
			RunID:      d.RunID, Tenant: d.Tenant, PlanID: v.plan.ID, Revision: v.plan.Revision}
	}
	return fmt.Errorf("planexec: checking the precondition of step %s (tool %s): %w", quote(s.step.ID), quote(s.step.Tool), err)
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
// awaits a person. Otherwise it holds what finished, even when err is not nil:
// a step whose arguments hold references is cleared when it is ready (see
// RefKey), and a person yet to decide it stops the run there with an
// *ApprovalPendingError, after the steps before it ran.
//
// A plan without an id gets one. A plan that Plan did not just return (built
// by hand, or edited to a new id or revision) is recorded as PLANNED once it
// passes validation.
func (r *Run) Execute(ctx context.Context, plan Plan) (_ *Result, err error) {
	if !r.start() {
		return nil, ErrRunBusy
	}
	defer r.busy.Store(false)
	defer r.j.store(ctx, &err)
	return r.executePlan(ctx, plan, nil, &r.d, false)
}

// executePlan validates and runs plan; st is the run of rounds it is a
// round of, nil for a plan on its own; update is true when the run's record
// was read or written by this call already.
func (r *Run) executePlan(ctx context.Context, plan Plan, st *roundsState, d *Delegation, update bool) (*Result, error) {
	if plan.ID == "" {
		plan.ID = uuid.NewString()
	}
	if plan.Revision == 0 {
		plan.Revision = 1
	}
	v, perr := r.validate(&plan, nil, st.barred(), d)
	if perr != nil {
		r.j.emit(&Event{Kind: EventPlanRefused, RunID: r.d.RunID, Tenant: r.d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: plan.Round,
			StepID: perr.Step, Tool: perr.Tool, Reason: perr.Reason, Detail: firstViolation(perr)})
		return nil, perr
	}
	v.rounds, v.update = st, update
	r.mu.Lock()
	r.current = &v.plan
	r.mu.Unlock()
	r.mu.Lock()
	fromPlan := r.planned == planRef{plan.ID, plan.Revision}
	r.mu.Unlock()
	if !fromPlan {
		r.j.emit(&Event{Kind: EventPlanned, RunID: r.d.RunID, Tenant: r.d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: plan.Round,
			Detail: strconv.Itoa(len(plan.Steps)) + " steps, validated"})
	}
	return r.execute(ctx, v, d, nil)
}

// Resume picks up the run from the store: it revalidates the stored plan
// against the tools' contracts as they are now (a tool whose schema moved
// refuses it with ReasonArguments), replays the steps that finished, clears
// what still needs clearing (a recorded decision is not asked again), and
// runs the rest. It acts under the delegation stored with the run, narrowed
// by the run's own (see Executor.Run); an expired one is a *DelegationError
// and nothing runs. A run another execution holds, on any replica, is
// ErrRunBusy. A run the store has no record of is ErrNoRecord. A
// round of a run of rounds is resumed to its end and the run left planning:
// Do goes on with its rounds.
func (r *Run) Resume(ctx context.Context) (_ *Result, err error) {
	if !r.start() {
		return nil, ErrRunBusy
	}
	defer r.busy.Store(false)
	defer r.j.store(ctx, &err)
	rec, d, err := r.adopt(ctx, acting)
	if err != nil {
		return nil, err
	}
	r.rev = rec.Rev
	plan, st, err := decodeRun(rec)
	if err != nil {
		return nil, err
	}
	return r.resume(ctx, rec, d, plan, st)
}

// adoption says what a call on a stored run does under its delegation.
type adoption int

const (
	reading  adoption = iota // reads the run (Info), or records what happened (Resolve)
	deciding                 // records a person's decision on it (Decide): refused once expired
	acting                   // acts for the run's user (Resume, Do, Reply, SubmitResult): expiry is the gate's to refuse
)

// adopt reads the run's record and the delegation stored with it, narrowed
// by the run's own: the authority every call on a stored run acts under. A
// run's own delegation may narrow the stored one (a shorter scope, an
// earlier expiry), never widen it. A call acting for the run's user that
// names another user or agent is a *DelegationError, and so is a decision
// under an expired delegation; a run acting under one is refused by the
// gate before anything runs, and stored as failed.
func (r *Run) adopt(ctx context.Context, how adoption) (*store.PlanRecord, *Delegation, error) {
	rec, err := r.ex.st.LoadPlan(ctx, r.d.Tenant, r.d.RunID)
	if errors.Is(err, ErrNoRecord) {
		return nil, nil, fmt.Errorf("planexec: run %s is not on record: %w", quote(r.d.RunID), err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("planexec: loading run %s: %w", quote(r.d.RunID), err)
	}
	d, err := storedDelegation(rec)
	if err != nil {
		return nil, nil, err
	}
	if d, err = d.narrowedBy(&r.d, how == acting); err != nil {
		return nil, nil, err
	}
	if how == deciding && d.expired(r.ex.now()) {
		return nil, nil, &DelegationError{RunID: d.RunID, Why: "the delegation stored with the run expired"}
	}
	return rec, &d, nil
}

// storedDelegation is the delegation stored with rec.
func storedDelegation(rec *store.PlanRecord) (Delegation, error) {
	var d Delegation
	if len(rec.Delegation) == 0 {
		return d, &DelegationError{RunID: rec.RunID, Why: "the stored run holds no delegation to act under"}
	}
	if err := json.Unmarshal(rec.Delegation, &d); err != nil || d.RunID != rec.RunID || d.Tenant != rec.Tenant {
		return d, &store.Error{Op: "load plan", Err: fmt.Errorf("the delegation of run %s: %w", quote(rec.RunID), store.ErrCorruptRecord)}
	}
	return d, nil
}

// resume resumes rec, decoded into plan and st (nil for a plan on its own),
// under d; a round that ends adds to st.
func (r *Run) resume(ctx context.Context, rec *store.PlanRecord, d *Delegation, plan Plan, st *roundsState) (*Result, error) {
	if st != nil && (rec.Status == store.RunPlanning || len(plan.Steps) == 0) {
		// A run of rounds between rounds, answered or asking: its plan has
		// nothing left to run (Do goes on with the rounds).
		return storedRound(rec, plan, st)
	}
	v, perr := r.validate(&plan, nil, st.barred(), d)
	if perr != nil {
		r.j.emit(&Event{Kind: EventPlanRefused, RunID: d.RunID, Tenant: d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: plan.Round,
			StepID: perr.Step, Tool: perr.Tool, Reason: perr.Reason, Detail: "on resume"})
		return nil, perr
	}
	if st == nil {
		v.doc = rec.Plan // what the plan decoded from: saved again as it is
	}
	v.rounds, v.update = st, true
	r.mu.Lock()
	r.current = &v.plan
	r.mu.Unlock()
	r.j.emit(&Event{Kind: EventPlanResumed, RunID: d.RunID, Tenant: d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: plan.Round,
		Detail: fmt.Sprintf("%d of %d steps on record", len(rec.Steps), len(plan.Steps))})
	return r.execute(ctx, v, d, rec)
}

// savePlan stores v with where the run stands and what it waits for, and
// the events not yet stored, under d, as the call's execution: it holds the
// run while the run is running, or planning its next round in a Do or Reply
// (Run.planning), and lets it go otherwise. A run another
// execution holds, or saved since this call read it, is not saved over:
// ErrRunBusy.
func (r *Run) savePlan(ctx context.Context, v *vplan, d *Delegation, status store.RunStatus, waits []store.Wait) error {
	now := r.ex.now()
	doc, _ := json.Marshal(d) // strings, a time and a list: it cannot fail
	rec := &store.PlanRecord{Version: store.RecordVersion, Tenant: d.Tenant, RunID: d.RunID,
		PlanID: v.plan.ID, Plan: v.document(), Status: status, Waiting: waits, Delegation: doc,
		Created: now, Updated: now, Update: v.update, Rev: r.rev, Holder: r.holder, Create: v.create}
	if status == store.RunRunning || (status == store.RunPlanning && r.planning) {
		// The execution holds the run while it runs, or plans its next
		// round: Recover and other executions leave it be until the lease,
		// which it moves on, runs out.
		rec.LeaseExpires = now.Add(r.ex.cfg.Lease)
	}
	if err := r.j.with(func(events []json.RawMessage) error {
		rec.Events = events
		return r.ex.st.SavePlan(ctx, rec)
	}); errors.Is(err, store.ErrFenced) {
		return fmt.Errorf("planexec: run %s is held, or was saved since it was read, by another execution: %w: %w", quote(d.RunID), ErrRunBusy, err)
	} else if err != nil {
		return fmt.Errorf("planexec: storing the plan of run %s: %w", quote(d.RunID), err)
	}
	v.update, v.create, r.rev = true, false, rec.Rev+1
	r.held, r.saved = status == store.RunPlanning && !rec.LeaseExpires.IsZero(), v
	return nil
}

// Forget removes the run's plan record and its step records.
func (r *Run) Forget(ctx context.Context) error {
	return r.ex.st.Forget(ctx, r.d.Tenant, r.d.RunID)
}

// Decide records a person's decision for one of the run's approval
// requests, so the next Resume finds it instead of asking again. A decision
// that names no request, or is neither Approved nor Denied, is
// ErrInvalidDecision. The request must be one the stored run awaits
// (RunInfo.Waiting) and undecided: a request of another run or tenant, one
// never made, or one already decided is ErrNotPending, and nothing is
// recorded. The first decision on a request stands, in every store, however
// many people decide at once. It acts under the run's stored delegation: an
// expired one is a *DelegationError.
func (r *Run) Decide(ctx context.Context, dec Decision) error {
	if dec.RequestID == "" {
		return fmt.Errorf("planexec: the decision names no request: %w", ErrInvalidDecision)
	}
	switch dec.Status {
	case Approved, Denied:
	default:
		return fmt.Errorf("planexec: a decision is approved or denied, not %s: %w", quote(string(dec.Status)), ErrInvalidDecision)
	}
	if dec.DecidedAt.IsZero() {
		dec.DecidedAt = r.ex.now()
	}
	// Kept at the precision every store keeps, as every time the executor
	// writes.
	dec.DecidedAt, dec.Expires = dec.DecidedAt.Truncate(time.Microsecond), dec.Expires.Truncate(time.Microsecond)
	notPending := func(why string) error {
		return fmt.Errorf("planexec: request %s of run %s: %s: %w", quote(dec.RequestID), quote(r.d.RunID), why, ErrNotPending)
	}
	rec, d, err := r.adopt(ctx, deciding)
	switch {
	case errors.Is(err, ErrNoRecord):
		return notPending("the run is not on record")
	case err != nil:
		return err
	case rec.Status != store.RunAwaitingApproval:
		return notPending(fmt.Sprintf("the run is %s, awaiting no decision", rec.Status))
	case !slices.ContainsFunc(rec.Waiting, func(w store.Wait) bool { return w.Request == dec.RequestID }):
		return notPending("the run awaits no such request")
	}
	// The store keeps the first decision of people deciding at once.
	err = r.ex.st.SaveDecision(ctx, d.Tenant, dec)
	if errors.Is(err, store.ErrDecided) {
		return notPending("it is already decided")
	}
	return err
}

// Resolve settles an effect in doubt (see *IndeterminateOutcomeError) once
// the real outcome is known: it happened (res.Outcome is then replayed as
// the step's outcome) or it did not (the step may run again). It settles
// the key in the store's claims and the step's record of this run. Only a
// key this run holds is settled: one it never claimed (another run's,
// another tenant's, or none at all) is ErrNoRecord. One a live holder has
// in flight is ErrInFlight. A key whose claim is already recorded as done
// is ErrCompleted, whatever the resolution says; a step record of this run
// still in doubt for it (its completion landed although the writer saw an
// error) is settled with the recorded outcome, so Resume replays it.
func (r *Run) Resolve(ctx context.Context, key Key, res Resolution) error {
	rec, d, err := r.adopt(ctx, reading)
	if err != nil {
		return err
	}
	if key.Tenant != d.Tenant {
		return fmt.Errorf("planexec: key %s: %w", key.Digest, ErrNoRecord)
	}
	if res.Applied {
		if len(res.Outcome) == 0 {
			res.Outcome = json.RawMessage("null")
		}
		if !json.Valid(res.Outcome) {
			return fmt.Errorf("planexec: the outcome of a resolution must be JSON: %w", ErrInvalidDecision)
		}
	}
	var contradicted error
	claims := r.ex.st
	switch err := claims.Resolve(ctx, key, d.RunID, res); {
	case err == nil:
	case errors.Is(err, ErrCompleted):
		// The claim says done: a completion landed although its writer saw
		// an error, so the step's record may still say in doubt. The claim
		// is the truth, and its outcome settles the record. A completed
		// claim is final, so asking for it again writes nothing.
		c, cerr := claims.Claim(ctx, store.ClaimRequest{Key: key, RunID: d.RunID, Holder: "resolve"})
		if cerr != nil || c.State != store.ClaimCompleted {
			return fmt.Errorf("planexec: resolving key %s: %w", key.Digest, err)
		}
		contradicted = fmt.Errorf("planexec: key %s: the effect is on record as done: %w", key.Digest, err)
		res = Resolution{Applied: true, Outcome: c.Outcome}
	default:
		return fmt.Errorf("planexec: resolving key %s: %w", key.Digest, err)
	}
	for _, st := range rec.Steps {
		if st.Key != key.Digest || st.Status != StepInDoubt {
			continue
		}
		st.Status, st.Outcome, st.Error = StepFailed, nil, "resolved: not applied"
		if res.Applied {
			st.Status, st.Outcome, st.Error = StepDone, res.Outcome, ""
		}
		st.Finished = r.ex.now()
		if err := claims.SaveStep(ctx, d.Tenant, d.RunID, st); err != nil {
			return fmt.Errorf("planexec: resolving step %s: %w", quote(st.StepID), err)
		}
	}
	return contradicted
}
