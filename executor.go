package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/store"
)

// Config builds an Executor. Every field but Tools is optional.
type Config struct {
	// Tools a plan may call, each with its contract (see NewTool). A run's
	// delegation may narrow them (Delegation.Scope).
	Tools []*Tool
	// Store keeps what a run must not lose: plans and step records (a
	// PlanStore), and, where the store implements them, idempotency claims
	// (IdempotencyStore), decisions (ApprovalStore), and a step's claim and
	// record in one transaction (StepStore). Default: none; nothing is kept
	// past the process and no step is deduplicated.
	Store PlanStore
	// Ladder decides the steps of classified tools. Default: none; every
	// step is decided by its contract (Irreversible, RequireApproval).
	Ladder *AutonomyLadder
	// Gate asks a person. NewExecutor requires one when a tool is
	// irreversible or requires approval and no autonomy class covers it; a
	// ladder that escalates with no gate fails the run with a
	// *ConfigurationError.
	Gate ApprovalGate
	// Authorizer is asked before each step whether the delegation still
	// covers it (revocation). Default: none.
	Authorizer Authorizer
	// Observer sees every run's events live. Default: none; Run.Events reads
	// them after, and WithObserver watches one run.
	Observer Observer
	// Concurrency bounds how many steps of one run run at once; 1 runs them
	// one at a time in dependency order. Default: Limits.MaxSteps (24), so no
	// plan the limits accept waits on the bound: tools are mostly remote
	// calls, and a plan's width is its own business.
	Concurrency int
	// MaxReplans bounds how many times Run.Plan asks again after a refusal.
	// Default: 2; NoReplans asks once only.
	MaxReplans int
	// Limits bound what validation accepts. Zero fields take their defaults.
	Limits Limits
	// Lease is how long an idempotency claim holds without renewal; it is
	// renewed while the tool runs. Default: 1 minute.
	Lease time.Duration
	// Holder names this executor in idempotency claims. Default: host name,
	// process id and a random suffix. Each execution adds its own suffix.
	Holder string
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// PollInterval is how often Run.Follow asks the store for new events.
	// Default: 250ms.
	PollInterval time.Duration
	// StepTimeout, when positive, bounds each tool's call: past it the
	// call's context is done with ErrStepTimeout as its cause, and a tool
	// that returns then fails the step (in doubt if it is irreversible and
	// does not say ErrNotApplied). Default: none.
	StepTimeout time.Duration
	// MaxRounds bounds a run of rounds (Run.Do): past it, the planner is
	// asked for an answer from the work done. Default: DefaultMaxRounds (15).
	MaxRounds int
	// TokenBudget, when positive, bounds the tokens one run of rounds may
	// spend on planning: once spent, the planner is asked for an answer
	// from the work done, as at MaxRounds.
	TokenBudget int64
}

// NoReplans, as Config.MaxReplans, asks the planner once and never again.
const NoReplans = -1

// Executor holds what runs share: the tools, the store and the policy. Build
// one per process; it is safe for concurrent use by any number of runs (see
// Executor.Run).
type Executor struct {
	cfg     Config
	tools   map[string]*Tool
	catalog []ToolSpec // every tool, in Config.Tools order

	// The store's capabilities, found on Config.Store.
	plans     PlanStore
	claims    IdempotencyStore
	approvals ApprovalStore
	steps     store.StepStore  // a step's claim and record in one transaction
	history   store.EventStore // each run's events
	ceilings  store.CeilingStore
	pruner    store.Pruner
	recoverer store.Recoverer

	executions atomic.Uint64 // numbers executions, to name their holders
}

// NewExecutor checks cfg and builds an executor. A nil tool, two tools with
// one name, or a tool that needs a person's approval with no gate to ask is a
// *ConfigurationError naming the tool. An executor with no tools is allowed:
// it can still decide, resolve and forget runs in its store.
func NewExecutor(cfg Config) (*Executor, error) {
	ex := &Executor{tools: make(map[string]*Tool, len(cfg.Tools))}
	for _, t := range cfg.Tools {
		if t == nil || t.contract == nil {
			return nil, &ConfigurationError{Why: "a nil tool; build tools with NewTool"}
		}
		if _, dup := ex.tools[t.name]; dup {
			return nil, &ConfigurationError{Tool: t.name, Why: "is registered twice"}
		}
		ex.tools[t.name] = t
		classified := false
		if cfg.Ladder != nil {
			_, classified = cfg.Ladder.Classify(t.name)
		}
		if cfg.Gate == nil && !classified && (t.contract.irreversible || t.contract.approval) {
			return nil, &ConfigurationError{Tool: t.name, Why: "needs a person's approval but no approval gate is configured"}
		}
		ex.catalog = append(ex.catalog, t.spec())
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = cfg.Limits.MaxSteps
	}
	if cfg.MaxReplans == 0 {
		cfg.MaxReplans = 2
	} else if cfg.MaxReplans < 0 {
		cfg.MaxReplans = 0
	}
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
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = DefaultMaxRounds
	}
	if cfg.Store != nil {
		ex.plans = cfg.Store
		ex.claims, _ = cfg.Store.(IdempotencyStore)
		ex.approvals, _ = cfg.Store.(ApprovalStore)
		if ex.claims != nil {
			ex.steps, _ = cfg.Store.(store.StepStore)
		}
		ex.history, _ = cfg.Store.(store.EventStore)
		ex.ceilings, _ = cfg.Store.(store.CeilingStore)
		ex.pruner, _ = cfg.Store.(store.Pruner)
		ex.recoverer, _ = cfg.Store.(store.Recoverer)
	}
	if ex.approvals == nil {
		ex.approvals = &decisions{}
	}
	ex.cfg = cfg
	return ex, nil
}

// spec describes t to a planner.
func (t *Tool) spec() ToolSpec {
	return ToolSpec{Name: t.name, Description: t.description, Irreversible: t.contract.irreversible,
		Schema: t.contract.schema, Output: t.outSchema, Strict: t.contract.strict}
}

// holder names one execution in the claims it takes: two executions never
// share a name, so one never mistakes the other's claim for its own.
func (ex *Executor) holder() string {
	return ex.cfg.Holder + "/" + strconv.FormatUint(ex.executions.Add(1), 36)
}

// Result is what a run did.
type Result struct {
	RunID    string
	PlanID   string
	Revision int
	// Steps holds each step that finished or failed, by step id.
	Steps map[string]StepResult
	// Complete is true when every step of the plan finished; for a run of
	// rounds (Run.Do), when the planner answered.
	Complete bool
	// Round is the round of a run of rounds the result is of: its plan and
	// steps are that round's.
	Round int
	// Answer is the planner's answer that ended a run of rounds. AtLimit
	// tells that it was asked for at the bound (Config.MaxRounds or
	// TokenBudget), from the work done.
	Answer  string
	AtLimit bool
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
	// Key is the step's idempotency key: what Run.Resolve takes if the step
	// is left in doubt.
	Key Key
	// Err is the step's error, when it failed.
	Err error
}

// Outcome decodes what step returned into v. A step that did not finish is
// ErrNoOutcome.
func (r *Result) Outcome(step string, v any) error {
	s, ok := r.Steps[step]
	if !ok || s.Status != StepDone {
		return fmt.Errorf("planexec: step %s: %w", quote(step), ErrNoOutcome)
	}
	return json.Unmarshal(s.Outcome, v)
}

// run clears and executes v; done holds the steps already on record.
func (r *Run) run(ctx context.Context, v *vplan, done map[string]store.StepRecord) (*Result, error) {
	d := &r.d
	ev := func(e Event) time.Time {
		e.RunID, e.Tenant, e.PlanID, e.Revision, e.Round = d.RunID, d.Tenant, v.plan.ID, v.plan.Revision, v.plan.Round
		return r.rec.emit(&e)
	}
	// Most steps record two events: started and executed.
	r.rec.reserve(2*len(v.steps) + 4)
	v.holder = r.ex.holder()
	res := &Result{RunID: d.RunID, PlanID: v.plan.ID, Revision: v.plan.Revision, Round: v.plan.Round, Steps: make(map[string]StepResult, len(v.steps))}
	finished := make([]bool, len(v.steps))
	// What finished steps put against each grant still counts: ceilings are
	// cumulative over the whole plan, across resumes.
	spent := map[string]decimal.Decimal{}
	for i, s := range v.steps {
		rec, ok := done[s.step.ID]
		if !ok || rec.PlanID != v.plan.ID || rec.Tool != s.step.Tool {
			continue
		}
		switch rec.Status {
		case StepDone:
			finished[i] = true
			res.Steps[s.step.ID] = StepResult{Tool: rec.Tool, Status: StepDone, Outcome: rec.Outcome, Replayed: true,
				ApprovedBy: rec.ApprovedBy, Grant: rec.Grant, Key: Key{Tenant: d.Tenant, Digest: rec.Key}}
			if rec.Grant != "" {
				spent[rec.Grant] = spent[rec.Grant].Add(rec.Amount)
			}
			ev(Event{Kind: EventStepExecuted, StepID: s.step.ID, Tool: s.step.Tool, Replayed: true, Approver: rec.ApprovedBy, Detail: "from the plan record"})
		case StepInDoubt:
			// The effect may have landed: nothing runs until it is resolved.
			ev(Event{Kind: EventStepFailed, StepID: s.step.ID, Tool: s.step.Tool, Detail: "in doubt on the record; resolve it before resuming"})
			ev(Event{Kind: EventPlanFailed, Detail: "a step is in doubt; nothing ran"})
			err := error(&IndeterminateOutcomeError{RunID: d.RunID, Step: s.step.ID, Tool: s.step.Tool, Key: Key{Tenant: d.Tenant, Digest: rec.Key}, InDoubt: true})
			return nil, errors.Join(err, r.savePlan(context.WithoutCancel(ctx), v, store.RunInDoubt, waitsOf(err)))
		case StepFailed:
		default:
			// A status this package never writes: the row is damaged, and
			// reading it as "not run" could run a finished step again.
			ev(Event{Kind: EventPlanFailed, Detail: "a step record is damaged; nothing ran"})
			return nil, &store.Error{Op: "load step " + quote(s.step.ID), Err: fmt.Errorf("unknown step status %s: %w", quote(string(rec.Status)), store.ErrCorruptRecord)}
		}
	}
	// An expired delegation is refused before any person is asked to clear
	// what it could not run.
	// A run refused before anything ran is on record as failed, so that a
	// stored run never says it awaits a person who has since said no.
	if d.expired(r.ex.cfg.Now()) {
		ev(Event{Kind: EventPlanFailed, Detail: "the delegation expired; nothing ran"})
		err := error(&DelegationError{RunID: d.RunID, Why: "the delegation expired"})
		return nil, errors.Join(err, r.savePlan(context.WithoutCancel(ctx), v, store.RunFailed, nil))
	}
	inPlan := map[string]decimal.Decimal{}
	clr, err := r.clear(ctx, v, finished, inPlan, spent, ev)
	var pending *ApprovalPendingError
	if errors.As(err, &pending) {
		waits := make([]store.Wait, len(pending.Requests))
		for i, req := range pending.Requests {
			waits[i] = store.Wait{StepID: req.StepID, Tool: req.Tool, Request: req.ID}
		}
		if serr := r.savePlan(ctx, v, store.RunAwaitingApproval, waits); serr != nil {
			return nil, errors.Join(err, serr)
		}
		pending.Stored = r.ex.plans != nil
		return nil, err
	}
	if err != nil {
		ev(Event{Kind: EventPlanFailed, Detail: "not cleared; nothing ran"})
		if v.rounds != nil && continuable(err) && ctx.Err() == nil {
			// A denial or refusal goes back to the planner with the round.
			return nil, errors.Join(err, r.endRound(ctx, v, nil, err))
		}
		return nil, errors.Join(err, r.savePlan(context.WithoutCancel(ctx), v, store.RunFailed, nil))
	}
	if err := r.savePlan(ctx, v, store.RunRunning, nil); err != nil {
		return nil, err
	}
	lease := r.keepLease(ctx, v.holder)
	err = r.dispatch(&execution{v: v, clr: clr, ev: ev, ctx: ctx, inPlan: inPlan, acted: spent}, finished, res)
	lease.stop()
	status, waits := store.RunCompleted, []store.Wait(nil)
	if reqs, calls, ok := awaitsCaller(err); ok {
		// Steps wait on a person (cleared when they were about to run) or
		// on the caller (handed back): the run stops there, having run what
		// came before, until Resume.
		stored := r.ex.plans != nil
		var waits []store.Wait
		var stop []error
		status := store.RunAwaitingTool
		if reqs != nil {
			status = store.RunAwaitingApproval
			stop = append(stop, &ApprovalPendingError{RunID: d.RunID, Tenant: d.Tenant, Requests: reqs, Stored: stored})
			for _, req := range reqs {
				waits = append(waits, store.Wait{StepID: req.StepID, Tool: req.Tool, Request: req.ID})
			}
		}
		if calls != nil {
			stop = append(stop, &ToolCallPendingError{RunID: d.RunID, Tenant: d.Tenant, Calls: calls, Stored: stored})
			for _, c := range calls {
				waits = append(waits, store.Wait{StepID: c.StepID, Tool: c.Tool, Call: c.ID})
			}
		}
		if serr := r.savePlan(context.WithoutCancel(ctx), v, status, waits); serr != nil {
			stop = append(stop, serr)
		}
		if len(stop) == 1 {
			return res, stop[0]
		}
		return res, errors.Join(stop...)
	}
	if err != nil {
		status, waits = endStatus(ctx, err)
		ev(Event{Kind: EventPlanFailed, Detail: fmt.Sprintf("%d of %d steps finished", countDone(res), len(v.steps))})
	} else {
		res.Complete = true
		ev(Event{Kind: EventPlanCompleted, Detail: strconv.Itoa(len(v.steps)) + " steps"})
	}
	// In a run of rounds, a round whose steps ended goes back to the
	// planner: what they did is stored with the run, which is planning.
	if v.rounds != nil && continuable(err) && ctx.Err() == nil {
		return res, errors.Join(err, r.endRound(ctx, v, res, err))
	}
	// The final status is written even when ctx is done: it is the record of
	// how the run ended. A run that lost a claim to another holder leaves
	// the status to that holder.
	if !errors.Is(err, store.ErrFenced) {
		if serr := r.savePlan(context.WithoutCancel(ctx), v, status, waits); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	return res, err
}

// StatusOf is where a run stands after Execute, Resume or Do returned err,
// as the store records it (but for a run of rounds whose planner failed, or
// kept writing refused plans, after its first round: the store keeps it
// planning, for Do to go on with): completed (nil), awaiting approval (an
// *ApprovalPendingError), awaiting a reply (an *AwaitingReplyError),
// awaiting tool results (a *ToolCallPendingError), in doubt (a step's effect may have landed),
// interrupted (the run's context ended, or a live holder has a step: resume
// it later), failed (anything else).
func StatusOf(err error) RunStatus {
	var (
		pending *ApprovalPendingError
		reply   *AwaitingReplyError
		calls   *ToolCallPendingError
	)
	switch {
	case err == nil:
		return RunCompleted
	case errors.As(err, &pending):
		return RunAwaitingApproval
	case errors.As(err, &reply):
		return RunAwaitingReply
	case errors.As(err, &calls):
		return RunAwaitingTool
	}
	status, _ := endStatus(context.Background(), err)
	return status
}

// endStatus is the status of a run whose execution ended in err: in doubt
// (waiting for its keys to be resolved) when a step's effect may have
// landed, interrupted when ctx ended it or a live holder has a step, failed
// otherwise.
func endStatus(ctx context.Context, err error) (store.RunStatus, []store.Wait) {
	if waits := waitsOf(err); waits != nil {
		return store.RunInDoubt, waits
	}
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrInFlight) {
		return store.RunInterrupted, nil
	}
	return store.RunFailed, nil
}

// awaitsCaller returns the approval requests and the tool calls of err's
// *ApprovalPendingErrors and *ToolCallPendingErrors; ok is true when every
// error joined in err is one of them.
func awaitsCaller(err error) (reqs []ApprovalRequest, calls []ToolCall, ok bool) {
	if err == nil {
		return nil, nil, false
	}
	for _, e := range joined(err) {
		switch p := e.(type) {
		case *ApprovalPendingError:
			reqs = append(reqs, p.Requests...)
		case *ToolCallPendingError:
			calls = append(calls, p.Calls...)
		default:
			return nil, nil, false
		}
	}
	return reqs, calls, true
}

// waitsOf lists the keys in doubt among err's *IndeterminateOutcomeErrors,
// however they are joined or wrapped.
func waitsOf(err error) []store.Wait {
	var waits []store.Wait
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *IndeterminateOutcomeError:
			if e.InDoubt {
				waits = append(waits, store.Wait{StepID: e.Step, Tool: e.Tool, Key: e.Key.Digest})
			}
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				walk(err)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return waits
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

// savePlan stores the plan with where the run stands and what it waits for,
// and the events not yet stored.
func (r *Run) savePlan(ctx context.Context, v *vplan, status store.RunStatus, waits []store.Wait) error {
	if r.ex.plans == nil {
		return nil
	}
	now := r.ex.cfg.Now()
	d := &r.d
	rec := &store.PlanRecord{Version: store.RecordVersion, Tenant: d.Tenant, RunID: d.RunID,
		PlanID: v.plan.ID, Plan: v.document(), Status: status, Waiting: waits, Delegation: r.delegation(),
		Created: now, Updated: now}
	if status == store.RunRunning {
		// The execution holds the run while it runs: Recover leaves it be
		// until the lease, which it moves on, runs out.
		rec.Holder, rec.LeaseExpires = v.holder, now.Add(r.ex.cfg.Lease)
	}
	// The events not yet stored go with the plan, in its write.
	var stored int
	if r.ex.history != nil {
		r.flushMu.Lock()
		defer r.flushMu.Unlock()
		rec.Events, stored = r.unstored()
	}
	if err := r.ex.plans.SavePlan(ctx, rec); err != nil {
		return fmt.Errorf("planexec: storing the plan of run %s: %w", quote(d.RunID), err)
	}
	if r.ex.history != nil {
		r.stored = stored
	}
	return nil
}

// stepDone reports one finished step.
type stepDone struct {
	i   int
	res StepResult
	err error
	// exited is true when the tool ended the worker's goroutine
	// (runtime.Goexit): the worker is gone.
	exited bool
}

// errNotStarted marks a step that was dispatched but found the run already
// cancelled; the cancellation itself is reported once, by dispatch.
var errNotStarted = errors.New("planexec: not started: the run was cancelled")

// execution is what the steps of one dispatch share.
type execution struct {
	v   *vplan
	clr []clearance
	ev  func(Event) time.Time
	// ctx is the caller's: a step starts only while it lasts, and the
	// tools run under it.
	ctx context.Context
	// after holds ctx's values without its cancellation: what follows a
	// tool's call is recorded whatever happens to ctx.
	after context.Context
	// claims is done a lease after ctx is (see Run.claim).
	claims context.Context
	sc     *schedule

	// Clearing steps when they are about to run (see Run.prepare), one at
	// a time: what the plan put against each grant so far, and what its
	// steps finished before this execution did.
	clearMu sync.Mutex
	inPlan  map[string]decimal.Decimal
	acted   map[string]decimal.Decimal
	effects map[string]string // the step of each key known so far, by digest
}

// dispatch runs the steps not yet finished: each starts the moment the last
// of its dependencies finishes, up to the concurrency bound. Every goroutine
// it starts has ended when it returns.
//
// Steps run on workers that take one step after another for as long as the
// dispatch lasts, and keep its books themselves (see schedule): the worker
// that finishes a step takes the next one without waiting for another
// goroutine to hand it over, and a worker is started only when a step is
// ready and every worker is busy. A goroutine per step would grow a fresh
// stack for every step (calling the tool and encoding its outcome go deep),
// and a goroutine handing steps out would be woken twice a step: when tools
// are quick, either costs more than the step's own work.
func (r *Run) dispatch(x *execution, finished []bool, res *Result) error {
	ctx, v := x.ctx, x.v
	n := len(v.steps)
	sc := &schedule{v: v, res: res, finished: finished, bound: r.ex.cfg.Concurrency,
		waiting: make([]int, n), ready: make([]int, 0, n), over: make(chan struct{})}
	sc.idle.L = &sc.mu
	for i := range n {
		sc.waiting[i] = v.graph.Indegree(i)
	}
	// Steps already on record release their dependents before anything is
	// queued, so no step is queued twice.
	for i := range n {
		if finished[i] {
			for _, j := range v.graph.Dependents(i) {
				sc.waiting[j]--
			}
		}
	}
	for _, i := range v.order {
		if !finished[i] && sc.waiting[i] == 0 {
			sc.ready = append(sc.ready, i)
		}
	}
	x.sc, x.after, x.claims = sc, ctx, ctx
	// The keys a step with references may meet once resolved; a plan
	// without references has every key checked at validation.
	if v.refs {
		x.effects = make(map[string]string, n)
		for i := range n {
			switch s := &v.steps[i]; {
			case s.refs == nil:
				x.effects[s.key.Digest] = s.step.ID
			case finished[i]:
				x.effects[res.Steps[s.step.ID].Key.Digest] = s.step.ID
			}
		}
	}
	// A context that can never be done needs no detaching from.
	if ctx.Done() != nil {
		x.after = context.WithoutCancel(ctx)
		if r.ex.claims != nil {
			var stop func()
			x.claims, stop = claimContext(ctx, r.ex.cfg.Lease)
			defer stop()
		}
	}
	sc.start = func() {
		sc.workers++
		sc.wg.Go(func() {
			var rn renewer // one per worker: its timer is made once
			for {
				i, ok := sc.take()
				if !ok {
					return
				}
				r.work(x, i, &rn, sc)
			}
		})
	}
	sc.mu.Lock()
	sc.hand()
	sc.end()
	sc.mu.Unlock()
	select {
	case <-sc.over:
	case <-ctx.Done():
		sc.mu.Lock()
		if !sc.ended {
			sc.stopping, sc.cancelled = true, true
			sc.errs = append(sc.errs, context.Cause(ctx))
			sc.idle.Broadcast()
			sc.waiters = 0
			sc.end()
		}
		sc.mu.Unlock()
		<-sc.over
	}
	sc.wg.Wait()
	// A step that found the run cancelled, or one left waiting, did not run:
	// the run is not complete, whichever of the step and the cancellation
	// was seen first.
	if !sc.cancelled && ctx.Err() != nil && (len(sc.ready) > 0 || sc.notStarted) {
		sc.errs = append(sc.errs, context.Cause(ctx))
	}
	return errors.Join(sc.errs...)
}

// schedule is the books of one dispatch, kept by its workers under mu: which
// steps wait on which, which are ready, what finished and what failed.
type schedule struct {
	v     *vplan
	res   *Result
	bound int    // Config.Concurrency
	start func() // starts a worker; callers hold mu
	wg    sync.WaitGroup
	over  chan struct{} // closed once no step runs and none will start

	mu       sync.Mutex
	idle     sync.Cond // workers with no step to take wait on it
	waiting  []int     // per step, the dependencies that have not finished
	ready    []int     // steps to take, in order
	finished []bool
	running  int // steps taken and not yet reported
	workers  int // workers alive
	waiters  int // workers waiting on idle and not yet woken
	errs     []error

	stopping   bool // a step failed or the run was cancelled: take no more
	cancelled  bool // the cancellation is in errs
	notStarted bool // a step found the run cancelled before it started
	ended      bool // over is closed
}

// outcome is what step i returned, once it finished.
func (sc *schedule) outcome(i int) []byte {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.res.Steps[sc.v.steps[i].step.ID].Outcome
}

// take returns the next step to run, waiting while steps run that may make
// one ready. ok is false when the worker is no longer needed.
func (sc *schedule) take() (i int, ok bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for {
		if sc.stopping || (len(sc.ready) == 0 && sc.running == 0) {
			sc.workers--
			return 0, false
		}
		if len(sc.ready) > 0 && sc.running < sc.bound {
			i, sc.ready = sc.ready[0], sc.ready[1:]
			sc.running++
			return i, true
		}
		sc.waiters++
		sc.idle.Wait() // whoever wakes it counts it out of waiters
	}
}

// report books a step's end and hands out the steps it made ready.
func (sc *schedule) report(d *stepDone) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.running--
	if d.exited {
		sc.workers--
	}
	if d.res.Status != "" {
		sc.res.Steps[sc.v.steps[d.i].step.ID] = d.res
	}
	if d.err != nil {
		if d.err == errNotStarted {
			sc.notStarted = true
		} else {
			sc.errs = append(sc.errs, d.err)
		}
		sc.stopping = true
	} else {
		sc.finished[d.i] = true
		for _, j := range sc.v.graph.Dependents(d.i) {
			sc.waiting[j]--
			if sc.waiting[j] == 0 && !sc.finished[j] {
				sc.ready = append(sc.ready, int(j))
			}
		}
	}
	if sc.end() {
		return
	}
	if sc.stopping {
		sc.idle.Broadcast()
		sc.waiters = 0
		return
	}
	sc.hand()
}

// end closes over, once no step runs and none will start, and reports
// whether it has. Callers hold mu.
func (sc *schedule) end() bool {
	if !sc.ended && sc.running == 0 && (sc.stopping || len(sc.ready) == 0) {
		sc.ended = true
		close(sc.over)
		sc.idle.Broadcast()
		sc.waiters = 0
	}
	return sc.ended
}

// hand sees that the ready steps the bound lets start are taken: by the
// workers on their way to take one (the one that just reported among them),
// then by waiting workers it wakes, then by new ones. Callers hold mu.
func (sc *schedule) hand() {
	want := min(len(sc.ready), sc.bound-sc.running)
	free := sc.workers - sc.running // waiting, or on their way to take
	for wake := want - (free - sc.waiters); wake > 0 && sc.waiters > 0; wake-- {
		sc.waiters--
		sc.idle.Signal()
	}
	for ; want > free; want-- {
		sc.start()
	}
}

// work runs step i on a worker and reports it.
func (r *Run) work(x *execution, i int, rn *renewer, sc *schedule) {
	// Reported from a deferred call so that a tool ending its goroutine
	// (runtime.Goexit) still reports, and the worker is known to be gone.
	d := stepDone{i: i, exited: true}
	defer sc.report(&d)
	d.res, d.err = r.runStep(x, i, rn, &d)
	d.exited = false
}

// runStep checks that the step may still run, claims its key, calls the tool
// and records what happened.
//
// rn renews the step's claim while the tool runs. out receives the result
// instead when the tool ends its goroutine.
func (r *Run) runStep(x *execution, i int, rn *renewer, out *stepDone) (StepResult, error) {
	ctx, v, clr, ev := x.ctx, x.v, x.clr[i], x.ev
	d := &r.d
	s := &v.steps[i]
	if s.refs != nil {
		if ctx.Err() != nil {
			return StepResult{}, errNotStarted
		}
		var failed StepResult
		var err error
		if s, clr, failed, err = r.prepare(x, i); err != nil {
			return failed, err
		}
	}
	id, tool, irreversible := s.step.ID, s.step.Tool, s.tool.contract.irreversible
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
	if err := r.recheck(ctx, s, clr, ev); err != nil {
		return StepResult{}, err
	}
	if s.tool.client {
		return StepResult{}, r.handBack(x, s)
	}

	claims := r.ex.claims
	var epoch int64
	if claims != nil {
		req := store.ClaimRequest{Key: s.key, RunID: d.RunID, StepID: id, Tool: tool, Holder: v.holder, Lease: r.ex.cfg.Lease, TakeOver: !irreversible,
			PerTenant: s.tool.contract.perTenant}
		c, err := r.claim(x, req)
		if err != nil {
			return StepResult{}, fmt.Errorf("planexec: claiming step %s: %w", quote(id), err)
		}
		switch c.State {
		case store.ClaimCompleted:
			if !json.Valid(c.Outcome) {
				// Never replay what cannot be what the tool returned.
				ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "the recorded outcome is damaged; not run twice"})
				return StepResult{}, &store.Error{Op: "claim step " + quote(id), Err: fmt.Errorf("the recorded outcome is not JSON: %w", store.ErrCorruptRecord)}
			}
			res.Status, res.Outcome, res.Replayed = StepDone, c.Outcome, true
			if err := r.saveStep(ctx, v, id, res, clr, ""); err != nil {
				return res, err
			}
			ev(Event{Kind: EventStepExecuted, StepID: id, Tool: tool, Replayed: true, Approver: res.ApprovedBy, Grant: res.Grant})
			return res, nil
		case store.ClaimHeld, store.ClaimInDoubt:
			err := &IndeterminateOutcomeError{RunID: d.RunID, Step: id, Tool: tool, Key: s.key, Holder: c.Holder, InDoubt: c.State == store.ClaimInDoubt, LeaseExpires: c.LeaseExpires}
			ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "outcome indeterminate; not run twice"})
			return StepResult{}, err
		case store.ClaimAcquired:
			epoch = c.Epoch
		default:
			return StepResult{}, &store.Error{Op: "claim step " + quote(id), Err: fmt.Errorf("unknown claim state %d: %w", c.State, store.ErrCorruptRecord)}
		}
		// The tool has not been called: a run cancelled now gives the key
		// back, so the step is not left in doubt for an effect that never
		// started.
		if ctx.Err() != nil {
			_ = claims.Release(x.after, s.key, epoch, false)
			return StepResult{}, errNotStarted
		}
	}
	if clr.grant != nil {
		refused, err := r.commitGrant(ctx, s, clr)
		if refused != nil || err != nil {
			if claims != nil {
				_ = claims.Release(x.after, s.key, epoch, false)
			}
		}
		if err != nil {
			return StepResult{}, fmt.Errorf("planexec: counting step %s against grant %s: %w", quote(id), quote(clr.grant.ID), err)
		}
		if refused != nil {
			ev(Event{Kind: EventAutonomyRefused, StepID: id, Tool: tool, Grant: clr.grant.ID, Detail: refused.Error()})
			return StepResult{}, &AutonomyRefusedError{Step: id, Tool: tool, Class: clr.class, Tenant: d.Tenant, Why: refused.Error(), AtDispatch: true}
		}
	}

	// The step's duration runs from the time its start is recorded.
	start := ev(Event{Kind: EventStepStarted, StepID: id, Tool: tool})
	// What follows the call records the step whatever happens to ctx: the
	// effect, if any, has happened.
	rctx := x.after
	// A tool that ends its goroutine (runtime.Goexit) skips the rest of
	// this function but not its deferred calls: record it as a failure.
	exited := true
	defer func() {
		if exited {
			out.res, out.err = r.failed(rctx, v, s, clr, res, epoch, r.ex.cfg.Now().Sub(start), errToolExited)
		}
	}()
	outcome, err := r.call(x, s, epoch, rn)
	exited = false
	end := r.ex.cfg.Now()
	elapsed := end.Sub(start)
	if err != nil {
		return r.failed(rctx, v, s, clr, res, epoch, elapsed, err)
	}
	res.Status, res.Outcome = StepDone, outcome
	// The tool returned: its events go into the history with the write that
	// records it, and a failure to record it follows them.
	ev(Event{Kind: EventStepExecuted, StepID: id, Tool: tool, Duration: elapsed, Approver: res.ApprovedBy, Grant: res.Grant, Outcome: outcome})
	if clr.grant != nil && clr.grant.Level == LevelActAndReport {
		ev(Event{Kind: EventAutonomyReported, StepID: id, Tool: tool, Grant: clr.grant.ID, Level: clr.grant.Level})
	}
	if claims != nil {
		var err error
		if r.ex.steps != nil {
			err = r.writeStep(rctx, &store.StepWrite{Key: s.key, Epoch: epoch, RunID: d.RunID, Outcome: outcome,
				Record: r.stepRecord(v, id, res, clr, "", end)}, r.ex.steps.CompleteStep)
		} else {
			err = claims.Complete(rctx, s.key, epoch, outcome)
		}
		if errors.Is(err, store.ErrFenced) {
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
				err = &IndeterminateOutcomeError{RunID: d.RunID, Step: id, Tool: tool, Key: s.key, InDoubt: true, Err: err}
			}
			ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Duration: elapsed, Detail: "outcome not recorded"})
			return res, errors.Join(err, r.saveStep(rctx, v, id, res, clr, err.Error()))
		}
	}
	if r.ex.steps == nil {
		if err := r.saveStep(rctx, v, id, res, clr, ""); err != nil {
			return res, err
		}
	}
	return res, nil
}

// prepare readies a step whose arguments hold references, as it is about to
// run: the values are put in place from the outcomes they read, the whole
// argument object is decoded by the tool's contract again (value rules and
// all), its key is digested, and a step that needs a grant or a person is
// cleared now, on the values it will run with. Arguments that fail fail
// the step, recorded, before its tool is called; a person yet to answer
// returns an *ApprovalPendingError.
func (r *Run) prepare(x *execution, i int) (*vstep, clearance, StepResult, error) {
	d, v := &r.d, x.v
	s := v.steps[i] // a copy: the plan's own is shared by executions
	id, tool := s.step.ID, s.step.Tool
	refuse := func(reason Reason, vs []Violation) (*vstep, clearance, StepResult, error) {
		perr := &PlanValidationError{Reason: reason, Step: id, Tool: tool, Violations: vs,
			RunID: d.RunID, Tenant: d.Tenant, PlanID: v.plan.ID, Revision: v.plan.Revision}
		x.ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Reason: reason, Detail: "not run: " + firstViolation(perr)})
		failed := StepResult{Tool: tool, Status: StepFailed, Err: perr}
		return nil, clearance{}, failed, errors.Join(&StepError{Step: id, Tool: tool, Err: perr}, r.saveStep(x.after, v, id, failed, clearance{}, perr.Error()))
	}
	args, vs := resolveRefs(s.step.Arguments, s.refs, x.sc.outcome)
	if vs == nil {
		s.args, vs = s.tool.contract.decode(args, r.ex.cfg.Limits)
	}
	if vs != nil {
		return refuse(ReasonArguments, vs)
	}
	s.key = Key{Tenant: d.Tenant, Digest: newKeyer(d.Tenant, d.RunID, v.plan.Round).digest(tool, s.args.keyJSON, s.tool.contract.perTenant, s.tool.contract.irreversible)}
	// Two steps with one key are one effect, resolved or written out.
	x.clearMu.Lock()
	other, dup := x.effects[s.key.Digest]
	if !dup {
		x.effects[s.key.Digest] = id
	}
	x.clearMu.Unlock()
	if dup {
		return refuse(ReasonDuplicateEffect, []Violation{{Path: fmt.Sprintf("/steps/%d", i),
			Why: fmt.Sprintf("once its references are resolved, it performs the same effect as step %s (same tool and key arguments)", quote(other))}})
	}
	clr := x.clr[i]
	if !clr.deferred {
		return &s, clr, StepResult{}, nil
	}
	x.clearMu.Lock()
	clr, req, err := r.clearStep(x.ctx, v, &s, x.inPlan, x.acted, x.ev)
	x.clearMu.Unlock()
	switch {
	case err != nil:
		return nil, clearance{}, StepResult{}, err
	case req != nil:
		return nil, clearance{}, StepResult{}, &ApprovalPendingError{RunID: d.RunID, Tenant: d.Tenant, Requests: []ApprovalRequest{*req}}
	}
	return &s, clr, StepResult{}, nil
}

// commitGrant checks the step's grant again just before the step runs and
// counts its amount against a windowed ceiling: in the store when it counts
// ceilings (so replicas share the window), else in the ladder. refused says
// why the grant no longer covers the step; err is a store's failure.
func (r *Run) commitGrant(ctx context.Context, s *vstep, clr clearance) (refused, err error) {
	ladder, now := r.ex.cfg.Ladder, r.ex.cfg.Now()
	ceiling, refused := ladder.commit(now, clr.grant)
	switch {
	case refused != nil || ceiling == nil:
		return refused, nil
	case r.ex.ceilings == nil:
		return ladder.spend(clr.grant, now, clr.amount), nil
	}
	err = r.ex.ceilings.Spend(ctx, store.Spend{Tenant: r.d.Tenant, Grant: clr.grant.ID, Key: s.key.Digest, Amount: clr.amount, At: now},
		ceiling.Window, ceiling.Amount)
	if errors.Is(err, store.ErrCeiling) {
		return fmt.Errorf("grant %q has %w", clr.grant.ID, errNoHeadroom), nil
	}
	return nil, err
}

// spentWithin is how clearance learns what a windowed grant let through:
// from the store when it counts ceilings, else from the ladder.
func (r *Run) spentWithin(ctx context.Context) windowSpent {
	if c := r.ex.ceilings; c != nil {
		return func(g *Grant, now time.Time) (decimal.Decimal, error) {
			spent, err := c.Spent(ctx, g.ID, now, g.Ceiling.Window)
			if err != nil {
				return spent, fmt.Errorf("planexec: reading what grant %s spent: %w", quote(g.ID), err)
			}
			return spent, nil
		}
	}
	return r.ex.cfg.Ladder.spentInMemory
}

// claimContext returns the context claims are written under: ctx's values,
// done a lease after ctx is. stop ends it; it is called once no claim can be
// in flight.
func claimContext(ctx context.Context, lease time.Duration) (claims context.Context, stop func()) {
	claims, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu      sync.Mutex
		stopped bool
		grace   *time.Timer
	)
	unwatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			grace = time.AfterFunc(lease, cancel)
		}
	})
	return claims, func() {
		unwatch()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if grace != nil {
			grace.Stop()
		}
		cancel()
	}
}

// claim takes a step's key. The claim is written even if the caller's ctx is
// cancelled meanwhile, for up to a lease more (x.claims): a caller that gives
// up halfway must not leave a claim behind that nobody knows it holds, which
// an irreversible step would find in doubt after the lease. If the store
// fails, the claim may still have landed; it is looked up once and given back
// if it is this execution's.
func (r *Run) claim(x *execution, req store.ClaimRequest) (store.Claim, error) {
	claims, lease := r.ex.claims, r.ex.cfg.Lease
	c, err := claims.Claim(x.claims, req)
	if err == nil {
		return c, nil
	}
	lctx, done := context.WithTimeout(x.after, lease)
	defer done()
	if again, aerr := claims.Claim(lctx, req); aerr == nil &&
		(again.State == store.ClaimAcquired || (again.State == store.ClaimHeld && again.Holder == req.Holder)) {
		_ = claims.Release(lctx, req.Key, again.Epoch, false)
	}
	return store.Claim{}, err
}

// failureDetail is a failed step's event detail: its status, and whether
// it ran out of time.
func failureDetail(status StepStatus, err error) string {
	if errors.Is(err, ErrStepTimeout) {
		return string(status) + ": timed out"
	}
	return string(status)
}

// errToolExited is the failure of a tool that ended its goroutine without
// returning.
var errToolExited = errors.New("the tool exited its goroutine without returning")

// failed records a tool's failure: in doubt when the tool is irreversible and
// the error does not promise ErrNotApplied, failed (and its key freed)
// otherwise.
func (r *Run) failed(ctx context.Context, v *vplan, s *vstep, clr clearance, res StepResult, epoch int64, elapsed time.Duration, err error) (StepResult, error) {
	id, tool := s.step.ID, s.step.Tool
	inDoubt := s.tool.contract.irreversible && !errors.Is(err, ErrNotApplied)
	res.Status, res.Err = StepFailed, err
	if inDoubt {
		res.Status = StepInDoubt
	}
	r.rec.emit(&Event{Kind: EventStepFailed, RunID: r.d.RunID, Tenant: r.d.Tenant, PlanID: v.plan.ID, Revision: v.plan.Revision, Round: v.plan.Round,
		StepID: id, Tool: tool, Duration: elapsed, Detail: failureDetail(res.Status, err)})
	var serr error
	switch claims := r.ex.claims; {
	case r.ex.steps != nil:
		w := &store.StepWrite{Key: s.key, Epoch: epoch, RunID: r.d.RunID, InDoubt: inDoubt, Record: r.stepRecord(v, id, res, clr, err.Error(), r.ex.cfg.Now())}
		if serr = r.writeStep(ctx, w, r.ex.steps.ReleaseStep); serr != nil {
			serr = fmt.Errorf("planexec: recording the failure of step %s: %w", quote(id), serr)
		}
	case claims != nil:
		// Release first: a holder whose claim was taken over writes no
		// record over the new holder's.
		if serr = claims.Release(ctx, s.key, epoch, inDoubt); !errors.Is(serr, store.ErrFenced) {
			serr = errors.Join(serr, r.saveStep(ctx, v, id, res, clr, err.Error()))
		}
	default:
		serr = r.saveStep(ctx, v, id, res, clr, err.Error())
	}
	var failure error = &StepError{Step: id, Tool: tool, Err: err}
	if inDoubt {
		failure = &IndeterminateOutcomeError{RunID: r.d.RunID, Step: id, Tool: tool, Key: s.key, InDoubt: true, Err: failure}
	}
	return res, errors.Join(failure, serr)
}

// recheck asks again, just before a step runs, whether it may: the
// delegation (expiry, revocation) and a person's decision (withdrawn,
// expired). Grants are checked again when they are committed.
func (r *Run) recheck(ctx context.Context, s *vstep, clr clearance, ev func(Event) time.Time) error {
	d := &r.d
	id, tool := s.step.ID, s.step.Tool
	// The clock is read only for what can expire.
	if !d.Expires.IsZero() && d.expired(r.ex.cfg.Now()) {
		ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "not run: the delegation expired"})
		return &DelegationError{RunID: d.RunID, Step: id, Tool: tool, Why: "the delegation expired"}
	}
	if r.ex.cfg.Authorizer != nil {
		if err := r.ex.cfg.Authorizer.Authorize(ctx, *d, *s.step); err != nil {
			ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "not run: the delegation no longer covers it"})
			return &DelegationError{RunID: d.RunID, Step: id, Tool: tool, Why: "no longer authorized", Err: err}
		}
	}
	if clr.decision == nil {
		return nil
	}
	why := ""
	dec, err := r.ex.approvals.Decision(ctx, d.Tenant, clr.decision.RequestID)
	switch {
	case errors.Is(err, ErrNoRecord):
		why = "the decision is no longer on record"
	case err != nil:
		return fmt.Errorf("planexec: reading the approval record of step %s: %w", quote(id), err)
	case dec.Status != Approved:
		why = "the decision was changed to " + string(dec.Status) + " before the step ran"
	case dec.expired(r.ex.cfg.Now()):
		why = "the decision expired before the step ran"
	default:
		return nil
	}
	ev(Event{Kind: EventApprovalDenied, StepID: id, Tool: tool, Request: dec.RequestID, Approver: dec.Approver, Detail: why})
	return &ApprovalDeniedError{Step: id, Tool: tool, Request: clr.decision.RequestID, Approver: dec.Approver, Why: why}
}

// call runs the tool with its step and key in the context, renewing the
// claim's lease while it runs, and renders its outcome as JSON. A panic, in
// the tool or in rendering its outcome, is its error.
func (r *Run) call(x *execution, s *vstep, epoch int64, rn *renewer) (outcome json.RawMessage, err error) {
	d, v := &r.d, x.v
	tctx, cancel := context.WithCancelCause(x.ctx)
	defer cancel(nil)
	t := r.ex.cfg.StepTimeout
	if r.stepTimeout > 0 {
		t = r.stepTimeout
	}
	if t > 0 {
		var stop context.CancelFunc
		tctx, stop = context.WithTimeoutCause(tctx, t, ErrStepTimeout)
		defer stop()
	}
	tc := &toolContext{Context: tctx, step: stepContext{info: StepInfo{RunID: d.RunID, Tenant: d.Tenant, User: d.User,
		PlanID: v.plan.ID, Revision: v.plan.Revision, StepID: s.step.ID, Tool: s.step.Tool}}}
	if claims := r.ex.claims; claims != nil {
		tc.step.key = s.key.Digest
		// Renewal goes on while the tool runs even if the caller's ctx is
		// cancelled (the tool may not stop at once); losing the claim to
		// another holder cancels the tool.
		rn.start(x.after, claims, s.key, epoch, r.ex.cfg.Lease, s.step.ID, cancel)
		defer rn.stop()
	}
	defer func() {
		if p := recover(); p != nil {
			outcome, err = nil, fmt.Errorf("planexec: tool %s panicked: %v", quote(s.step.Tool), p)
		}
	}()
	out, err := s.tool.call(tc, s.args.value)
	if err != nil {
		if context.Cause(tctx) == ErrStepTimeout && !errors.Is(err, ErrStepTimeout) {
			err = fmt.Errorf("%w: %w", ErrStepTimeout, err)
		}
		return nil, err
	}
	if outcome, err = json.Marshal(out); err != nil {
		return nil, fmt.Errorf("the outcome cannot be recorded as JSON: %w", err)
	}
	return outcome, nil
}

// stepRecord is what the plan store keeps of a step that finished at
// finished.
func (r *Run) stepRecord(v *vplan, id string, sr StepResult, clr clearance, errText string, finished time.Time) store.StepRecord {
	rec := store.StepRecord{
		StepID: id, PlanID: v.plan.ID, Tool: sr.Tool, Status: sr.Status, Outcome: sr.Outcome, Replayed: sr.Replayed,
		Key: sr.Key.Digest, ApprovedBy: sr.ApprovedBy, Error: errText, Finished: finished,
	}
	if clr.grant != nil {
		rec.Grant, rec.Amount = clr.grant.ID, clr.amount
	}
	return rec
}

func (r *Run) saveStep(ctx context.Context, v *vplan, id string, sr StepResult, clr clearance, errText string) error {
	if r.ex.plans == nil {
		return nil
	}
	d := &r.d
	if err := r.ex.plans.SaveStep(ctx, d.Tenant, d.RunID, r.stepRecord(v, id, sr, clr, errText, r.ex.cfg.Now())); err != nil {
		return fmt.Errorf("planexec: recording step %s: %w", quote(id), err)
	}
	return nil
}
