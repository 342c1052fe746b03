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
	rec      record
	busy     atomic.Bool

	mu      sync.Mutex
	usage   llm.Usage
	planned planRef // the last plan Plan accepted
	current *Plan   // the plan last planned or run, for Current

	stepTimeout time.Duration // WithStepTimeout; 0 takes Config.StepTimeout

	// The history's writes, one at a time so it is stored in order.
	flushMu sync.Mutex
	stored  int               // rec.events[:stored] are in the store
	buf     []byte            // the documents of the events being stored
	ends    []int             // where each document ends in buf
	docs    []json.RawMessage // the documents, as the store is handed them

	delegationDoc []byte // d as stored, once encoded; written under busy
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
			r.rec.observers = append(r.rec.observers, o)
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

// setCurrent records plan as the run's current one.
func (r *Run) setCurrent(plan *Plan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = plan
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
			if r.ex.cfg.Gate == nil && (t.contract.irreversible || t.contract.approval) {
				r.optErr = &ConfigurationError{Tool: t.name, Why: "needs a person's approval but no approval gate is configured"}
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
	r := &Run{ex: ex, d: d, rec: record{now: ex.cfg.Now}}
	if ex.cfg.Observer != nil {
		r.rec.observers = append(r.rec.observers, ex.cfg.Observer)
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

// delegation returns the run's delegation as stored with its plan.
func (r *Run) delegation() []byte {
	if r.delegationDoc == nil {
		r.delegationDoc, _ = json.Marshal(&r.d) // strings, a time and a list: it cannot fail
	}
	return r.delegationDoc
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
func (r *Run) Events() []Event { return r.rec.snapshot() }

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
	if _, err := r.validate(&plan, nil, nil); err != nil {
		return err
	}
	return nil
}

// Authorize asks for each step of plan what is asked just before the step
// runs: whether the run's delegation has expired, and Config.Authorizer.
// With Validate, it tells whether a plan would be let run now, before
// anything runs or is stored (a plan proposed for a person to apply, say).
// A step not covered is a *DelegationError naming it, wrapping the
// authorizer's error.
func (r *Run) Authorize(ctx context.Context, plan Plan) error {
	d := &r.d
	if d.expired(r.ex.cfg.Now()) {
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
	if !r.busy.CompareAndSwap(false, true) {
		return nil, ErrRunBusy
	}
	defer r.busy.Store(false)
	defer r.storeHistory(ctx, &err)
	return r.execute(ctx, plan, nil)
}

// storeHistory stores, as a call ends, the events it recorded that are not
// in the store yet; a failure to is joined to the call's error.
func (r *Run) storeHistory(ctx context.Context, err *error) {
	if ferr := r.flush(context.WithoutCancel(ctx)); ferr != nil {
		*err = errors.Join(*err, ferr)
	}
}

// execute validates and runs plan; st is the run of rounds it is a round
// of, nil for a plan on its own.
func (r *Run) execute(ctx context.Context, plan Plan, st *roundsState) (*Result, error) {
	if plan.ID == "" {
		plan.ID = uuid.NewString()
	}
	if plan.Revision == 0 {
		plan.Revision = 1
	}
	v, perr := r.validate(&plan, nil, st.barred())
	if perr != nil {
		r.rec.emit(&Event{Kind: EventPlanRefused, RunID: r.d.RunID, Tenant: r.d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: plan.Round,
			StepID: perr.Step, Tool: perr.Tool, Reason: perr.Reason, Detail: firstViolation(perr)})
		return nil, perr
	}
	v.rounds = st
	r.setCurrent(&v.plan)
	r.mu.Lock()
	fromPlan := r.planned == planRef{plan.ID, plan.Revision}
	r.mu.Unlock()
	if !fromPlan {
		r.rec.emit(&Event{Kind: EventPlanned, RunID: r.d.RunID, Tenant: r.d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: plan.Round,
			Detail: strconv.Itoa(len(plan.Steps)) + " steps, validated"})
	}
	return r.run(ctx, v, nil)
}

// Resume picks up the run from the store: it revalidates the stored plan
// against the tools' contracts as they are now (a tool whose schema moved
// refuses it with ReasonArguments), replays the steps that finished, clears
// what still needs clearing (a recorded decision is not asked again), and
// runs the rest. A run the store has no record of is ErrNoRecord. A round
// of a run of rounds is resumed to its end and the run left planning: Do
// goes on with its rounds.
func (r *Run) Resume(ctx context.Context) (_ *Result, err error) {
	if !r.busy.CompareAndSwap(false, true) {
		return nil, ErrRunBusy
	}
	defer r.busy.Store(false)
	defer r.storeHistory(ctx, &err)
	rec, err := r.load(ctx)
	if err != nil {
		return nil, err
	}
	return r.resume(ctx, rec)
}

// load reads the run's record.
func (r *Run) load(ctx context.Context) (*store.PlanRecord, error) {
	if r.ex.plans == nil {
		return nil, &ConfigurationError{Why: "no store: nothing could have been written to resume from"}
	}
	rec, err := r.ex.plans.LoadPlan(ctx, r.d.Tenant, r.d.RunID)
	if errors.Is(err, ErrNoRecord) {
		return nil, fmt.Errorf("planexec: nothing to resume for run %s: %w", quote(r.d.RunID), err)
	}
	if err != nil {
		return nil, fmt.Errorf("planexec: loading run %s: %w", quote(r.d.RunID), err)
	}
	return rec, nil
}

func (r *Run) resume(ctx context.Context, rec *store.PlanRecord) (*Result, error) {
	plan, st, err := decodeRun(rec)
	if err != nil {
		return nil, err
	}
	return r.resumeRun(ctx, rec, plan, st)
}

// resumeRun resumes rec, decoded into plan and st (nil for a plan on its
// own); a round that ends adds to st.
func (r *Run) resumeRun(ctx context.Context, rec *store.PlanRecord, plan Plan, st *roundsState) (*Result, error) {
	if st != nil && (rec.Status == store.RunPlanning || len(plan.Steps) == 0) {
		// A run of rounds between rounds, answered or asking: its plan has
		// nothing left to run (Do goes on with the rounds).
		return r.storedRound(rec, plan, st)
	}
	v, perr := r.validate(&plan, nil, st.barred())
	if perr != nil {
		r.rec.emit(&Event{Kind: EventPlanRefused, RunID: r.d.RunID, Tenant: r.d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: plan.Round,
			StepID: perr.Step, Tool: perr.Tool, Reason: perr.Reason, Detail: "on resume"})
		return nil, perr
	}
	if st == nil {
		v.doc = rec.Plan // what the plan decoded from: saved again as it is
	}
	v.rounds = st
	r.setCurrent(&v.plan)
	r.rec.emit(&Event{Kind: EventPlanResumed, RunID: r.d.RunID, Tenant: r.d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: plan.Round,
		Detail: fmt.Sprintf("%d of %d steps on record", len(rec.Steps), len(plan.Steps))})
	return r.run(ctx, v, rec.Steps)
}

// Forget removes the run's plan record and its step records.
func (r *Run) Forget(ctx context.Context) error {
	if r.ex.plans == nil {
		return &ConfigurationError{Why: "no store: nothing to forget"}
	}
	return r.ex.plans.Forget(ctx, r.d.Tenant, r.d.RunID)
}

// Decide records a person's decision for one of the run's approval requests,
// so the next Resume finds it instead of asking again. A decision that names
// no request, or is neither Approved nor Denied, is ErrInvalidDecision. With
// a store, the request must be one the stored run awaits (RunInfo.Waiting)
// and still pending: a request of another run or tenant, one never made, or
// one already decided is ErrNotPending, and nothing is recorded.
func (r *Run) Decide(ctx context.Context, d Decision) error {
	if d.RequestID == "" {
		return fmt.Errorf("planexec: the decision names no request: %w", ErrInvalidDecision)
	}
	switch d.Status {
	case Approved, Denied:
	default:
		return fmt.Errorf("planexec: a decision is approved or denied, not %s: %w", quote(string(d.Status)), ErrInvalidDecision)
	}
	now := r.ex.cfg.Now()
	if d.DecidedAt.IsZero() {
		d.DecidedAt = now
	}
	if err := r.pending(ctx, d.RequestID, now); err != nil {
		return err
	}
	// The store keeps the first decision of people deciding at once.
	err := r.ex.approvals.SaveDecision(ctx, r.d.Tenant, d)
	if errors.Is(err, store.ErrDecided) {
		return fmt.Errorf("planexec: request %s of run %s: it is already decided: %w", quote(d.RequestID), quote(r.d.RunID), ErrNotPending)
	}
	return err
}

// pending checks that the stored run awaits a decision on request.
func (r *Run) pending(ctx context.Context, request string, now time.Time) error {
	if r.ex.plans == nil {
		return nil // nothing records what a run awaits
	}
	notPending := func(why string) error {
		return fmt.Errorf("planexec: request %s of run %s: %s: %w", quote(request), quote(r.d.RunID), why, ErrNotPending)
	}
	rec, err := r.ex.plans.LoadPlan(ctx, r.d.Tenant, r.d.RunID)
	switch {
	case errors.Is(err, ErrNoRecord):
		return notPending("the run is not on record")
	case err != nil:
		return fmt.Errorf("planexec: loading run %s: %w", quote(r.d.RunID), err)
	case rec.Status != store.RunAwaitingApproval:
		return notPending(fmt.Sprintf("the run is %s, awaiting no decision", rec.Status))
	case !slices.ContainsFunc(rec.Waiting, func(w store.Wait) bool { return w.Request == request }):
		return notPending("the run awaits no such request")
	}
	prev, err := r.ex.approvals.Decision(ctx, r.d.Tenant, request)
	switch {
	case errors.Is(err, ErrNoRecord):
		return nil
	case err != nil:
		return fmt.Errorf("planexec: reading the decision on request %s: %w", quote(request), err)
	case prev.Stands(now):
		return notPending("it is already decided (" + string(prev.Status) + ")")
	}
	return nil
}

// Resolve settles an effect in doubt (see *IndeterminateOutcomeError) once
// the real outcome is known: it happened (r.Outcome is then replayed as the
// step's outcome) or it did not (the step may run again). It settles the key
// in the store's claims and the step's record of this run. A key the store
// has no record of is ErrNoRecord; one a live holder has in flight is
// ErrInFlight. A key whose claim is already recorded as done is
// ErrCompleted, whatever the resolution says; a step record of this run
// still in doubt for it (its completion landed although the writer saw an
// error) is settled with the recorded outcome, so Resume replays it.
func (r *Run) Resolve(ctx context.Context, key Key, res Resolution) error {
	d := &r.d
	if r.ex.plans == nil {
		return &ConfigurationError{Why: "no store: nothing records an outcome to resolve"}
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
	found := false
	var contradicted error
	if claims := r.ex.claims; claims != nil {
		err := claims.Resolve(ctx, key, res)
		switch {
		case err == nil:
			found = true
		case errors.Is(err, ErrCompleted):
			// The claim says done: a completion landed although its writer
			// saw an error, so the step's record may still say in doubt.
			// The claim is the truth, and its outcome settles the record.
			// A completed claim is final, so asking for it again writes
			// nothing.
			c, cerr := claims.Claim(ctx, store.ClaimRequest{Key: key, RunID: d.RunID, Holder: "resolve"})
			if cerr != nil || c.State != store.ClaimCompleted {
				return fmt.Errorf("planexec: resolving key %s: %w", key.Digest, err)
			}
			contradicted = fmt.Errorf("planexec: key %s: the effect is on record as done: %w", key.Digest, err)
			res = Resolution{Applied: true, Outcome: c.Outcome}
			found = true
		case !errors.Is(err, ErrNoRecord):
			return fmt.Errorf("planexec: resolving key %s: %w", key.Digest, err)
		}
	}
	rec, err := r.ex.plans.LoadPlan(ctx, d.Tenant, d.RunID)
	if err != nil && !errors.Is(err, ErrNoRecord) {
		return fmt.Errorf("planexec: resolving key %s: %w", key.Digest, err)
	}
	if rec != nil {
		for _, st := range rec.Steps {
			if st.Key != key.Digest || st.Status != StepInDoubt {
				continue
			}
			st.Status, st.Outcome, st.Error = StepFailed, nil, "resolved: not applied"
			if res.Applied {
				st.Status, st.Outcome, st.Error = StepDone, res.Outcome, ""
			}
			st.Finished = r.ex.cfg.Now()
			if err := r.ex.plans.SaveStep(ctx, d.Tenant, d.RunID, st); err != nil {
				return fmt.Errorf("planexec: resolving step %s: %w", quote(st.StepID), err)
			}
			found = true
		}
	}
	if !found {
		return fmt.Errorf("planexec: key %s: %w", key.Digest, ErrNoRecord)
	}
	return contradicted
}
