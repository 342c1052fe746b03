package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/store"
)

// An execution is one call's run of one validated plan: the steps on
// record are replayed, the rest cleared, the plan stored as running, the
// steps dispatched through the gate, and where the run stands stored at the
// end. It is the gate's, since every step it runs passes through it.

// execute runs v under d; rec is the run as stored, when it was read from
// the store (its steps on record, the calls it waits for).
func (r *Run) execute(ctx context.Context, v *vplan, d *Delegation, rec *store.PlanRecord) (*Result, error) {
	g := &gate{r: r, d: d, v: v, holder: r.holder, ctx: ctx, after: ctx, claims: ctx,
		res: &Result{RunID: d.RunID, PlanID: v.plan.ID, Revision: v.plan.Revision, Round: v.plan.Round, Steps: make(map[string]StepResult, len(v.steps))}}
	// A context that can never be done needs no detaching from.
	if ctx.Done() != nil {
		g.after = context.WithoutCancel(ctx)
	}
	var done map[string]store.StepRecord
	if rec != nil {
		done = rec.Steps
		for _, w := range rec.Waiting {
			if w.Call != "" {
				if g.handed == nil {
					g.handed = map[string]json.RawMessage{}
				}
				g.handed[w.Call] = w.Detail
			}
		}
	}
	// Most steps record two events: started and executed.
	r.j.reserve(2*len(v.steps) + 4)
	return g.run(done)
}

// run replays, clears, stores and dispatches the gate's plan.
func (g *gate) run(done map[string]store.StepRecord) (*Result, error) {
	d, v, res, ctx := g.d, g.v, g.res, g.ctx
	finished := make([]bool, len(v.steps))
	// What finished steps put against each grant still counts: ceilings are
	// cumulative over the whole plan, across resumes.
	g.acted, g.inPlan = map[string]decimal.Decimal{}, map[string]decimal.Decimal{}
	for i, s := range v.steps {
		rec, ok := done[s.step.ID]
		if !ok || rec.PlanID != v.plan.ID || rec.Tool != s.step.Tool {
			if s.refs == nil {
				g.yetToFinish(s.key.Digest)
			}
			continue
		}
		switch rec.Status {
		case StepDone:
			finished[i] = true
			res.Steps[s.step.ID] = StepResult{Tool: rec.Tool, Status: StepDone, Outcome: rec.Outcome, Replayed: true,
				ApprovedBy: rec.ApprovedBy, Grant: rec.Grant, Key: Key{Tenant: d.Tenant, Digest: rec.Key}}
			if rec.Grant != "" {
				g.acted[rec.Grant] = g.acted[rec.Grant].Add(rec.Amount)
			}
			g.ev(Event{Kind: EventStepExecuted, StepID: s.step.ID, Tool: s.step.Tool, Replayed: true, Approver: rec.ApprovedBy, Detail: "from the plan record"})
		case StepInDoubt:
			// The effect may have landed: nothing runs until it is resolved.
			g.ev(Event{Kind: EventStepFailed, StepID: s.step.ID, Tool: s.step.Tool, Detail: "in doubt on the record; resolve it before resuming"})
			g.ev(Event{Kind: EventPlanFailed, Detail: "a step is in doubt; nothing ran"})
			err := error(&IndeterminateOutcomeError{RunID: d.RunID, Step: s.step.ID, Tool: s.step.Tool, Key: Key{Tenant: d.Tenant, Digest: rec.Key}, InDoubt: true})
			return nil, errors.Join(err, g.save(store.RunInDoubt, waitsOf(err)))
		case StepFailed:
			if s.refs == nil {
				g.yetToFinish(s.key.Digest)
			}
		default:
			// A status this package never writes: the row is damaged, and
			// reading it as "not run" could run a finished step again.
			g.ev(Event{Kind: EventPlanFailed, Detail: "a step record is damaged; nothing ran"})
			return nil, &store.Error{Op: "load step " + quote(s.step.ID), Err: fmt.Errorf("unknown step status %s: %w", quote(string(rec.Status)), store.ErrCorruptRecord)}
		}
	}
	// An expired delegation is refused before any person is asked to clear
	// what it could not run. A run refused before anything ran is on
	// record as failed, so that a stored run never says it awaits a
	// person who has since said no.
	if d.expired(g.now()) {
		g.ev(Event{Kind: EventPlanFailed, Detail: "the delegation expired; nothing ran"})
		err := error(&DelegationError{RunID: d.RunID, Why: "the delegation expired"})
		return nil, errors.Join(err, g.save(store.RunFailed, nil))
	}
	err := g.clearPlan(finished)
	var pending *ApprovalPendingError
	if errors.As(err, &pending) {
		if serr := g.r.savePlan(ctx, v, d, store.RunAwaitingApproval, waitsFor(pending.Requests, nil, nil)); serr != nil {
			return nil, errors.Join(err, serr)
		}
		pending.Stored = true
		return nil, err
	}
	if err != nil {
		g.ev(Event{Kind: EventPlanFailed, Detail: "not cleared; nothing ran"})
		if v.rounds != nil && continuable(err) && ctx.Err() == nil {
			// A denial or refusal goes back to the planner with the round.
			return nil, errors.Join(err, g.endRound(res, err, false))
		}
		return nil, errors.Join(err, g.save(store.RunFailed, nil))
	}
	if err := g.r.savePlan(ctx, v, d, store.RunRunning, nil); err != nil {
		return nil, err
	}
	stopLease := g.keepLease()
	err = g.dispatch(finished)
	stopLease()
	if reqs, calls, docs, ok := awaitsCaller(err); ok {
		// Steps wait on a person (cleared when they were about to run) or
		// on the caller (handed back): the run stops there, having run what
		// came before, until Resume.
		var stop []error
		status := store.RunAwaitingTool
		if reqs != nil {
			status = store.RunAwaitingApproval
			stop = append(stop, &ApprovalPendingError{RunID: d.RunID, Tenant: d.Tenant, Requests: reqs, Stored: true, Ran: countDone(res)})
		}
		if calls != nil {
			stop = append(stop, &ToolCallPendingError{RunID: d.RunID, Tenant: d.Tenant, Calls: calls, Stored: true})
		}
		if serr := g.save(status, waitsFor(reqs, calls, docs)); serr != nil {
			stop = append(stop, serr)
		}
		if len(stop) == 1 {
			return res, stop[0]
		}
		return res, errors.Join(stop...)
	}
	status, waits := store.RunCompleted, []store.Wait(nil)
	if err != nil {
		status, waits = endStatus(ctx, err)
		g.ev(Event{Kind: EventPlanFailed, Detail: fmt.Sprintf("%d of %d steps finished", countDone(res), len(v.steps))})
	} else {
		res.Complete = true
		g.ev(Event{Kind: EventPlanCompleted, Detail: strconv.Itoa(len(v.steps)) + " steps"})
	}
	// In a run of rounds, a round whose steps ended goes back to the
	// planner: what they did is stored with the run, which is planning. So
	// is one whose steps all finished as its context ended; one cut short
	// by it is interrupted, and finished on resume.
	if v.rounds != nil && continuable(err) && (ctx.Err() == nil || err == nil) {
		return res, errors.Join(err, g.endRound(res, err, true))
	}
	// The final status is written even when ctx is done: it is the record of
	// how the run ended. A run that lost a claim to another holder leaves
	// the status to that holder.
	if !errors.Is(err, store.ErrFenced) {
		if serr := g.save(status, waits); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	return res, err
}

// yetToFinish notes the key of a step of the plan that has not finished:
// its spend, if it has one, is counted in inPlan, not again from the
// store's window. Only a ladder asks.
func (g *gate) yetToFinish(digest string) {
	if g.r.ex.cfg.Ladder != nil {
		g.pending = append(g.pending, digest)
	}
}

// save stores the gate's plan with where the run stands and what it waits
// for, and the events not yet stored, whatever happens to the caller's ctx:
// it is the record of the run.
func (g *gate) save(status store.RunStatus, waits []store.Wait) error {
	return g.r.savePlan(g.after, g.v, g.d, status, waits)
}

// waitsFor is what a run waits for: people's decisions on reqs, the
// results of calls handed back (each with its document in docs).
func waitsFor(reqs []ApprovalRequest, calls []ToolCall, docs map[string]json.RawMessage) []store.Wait {
	var waits []store.Wait
	for i := range reqs {
		req := &reqs[i]
		waits = append(waits, store.Wait{StepID: req.StepID, Tool: req.Tool, Request: req.ID, Detail: req.document()})
	}
	for i := range calls {
		c := &calls[i]
		waits = append(waits, store.Wait{StepID: c.StepID, Tool: c.Tool, Call: c.ID, Key: callKey(c.ID), Detail: docs[c.ID]})
	}
	return waits
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
func (g *gate) dispatch(finished []bool) error {
	ctx, v, res := g.ctx, g.v, g.res
	n := len(v.steps)
	sc := &schedule{v: v, res: res, finished: finished, bound: g.r.ex.cfg.Concurrency,
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
	g.sc = sc
	// The keys a step with references may meet once resolved; a plan
	// without references has every key checked at validation.
	if v.refs {
		g.effects = make(map[string]string, n)
		for i := range n {
			switch s := &v.steps[i]; {
			case s.refs == nil:
				g.effects[s.key.Digest] = s.step.ID
			case finished[i]:
				g.effects[res.Steps[s.step.ID].Key.Digest] = s.step.ID
			}
		}
	}
	if ctx.Done() != nil {
		var stop func()
		g.claims, stop = claimContext(ctx, g.r.ex.cfg.Lease)
		defer stop()
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
				g.work(i, &rn, sc)
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

// work runs step i on a worker and reports it.
func (g *gate) work(i int, rn *renewer, sc *schedule) {
	// Reported from a deferred call so that a tool ending its goroutine
	// (runtime.Goexit) still reports, and the worker is known to be gone.
	d := stepDone{i: i, exited: true}
	defer sc.report(&d)
	d.res, d.err = g.pass(i, rn, &d)
	d.exited = false
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
