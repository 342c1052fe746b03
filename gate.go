package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/store"
)

// gate is the one way a plan acts. Every step of it, whatever performs
// the effect (a tool the executor calls, a call handed back to the run's
// caller), passes through pass, in one order:
//
//  1. resolve: its arguments, references put in place within the limits,
//     held to the tool's contract again;
//  2. key: the digest of the effect in its scope (the run, or the tenant);
//  3. claim: the key taken in the store before anything happens; a key
//     already done replays its outcome and needs nothing more;
//  4. clear: the delegation (expiry, Config.Authorizer), the reserved class,
//     the grant and its ceiling (spent once per key, in the store), a
//     person's decision bound to this one effect;
//  5. act: the tool called under the claim's lease, or the call handed
//     back under a claim that waits for its result;
//  6. complete: the outcome, the step's record and the run's events in one
//     write, fenced by the claim.
//
// Run.SubmitResult completes a call handed back by the same last step
// (complete). A new way to act goes through pass: one that does not is a
// defect.
//
// A gate lives for one execution of one plan.
type gate struct {
	r      *Run
	d      *Delegation // the authority acted under: the stored one, narrowed by the caller
	v      *vplan
	holder string // names this execution in the claims it takes
	res    *Result

	// ctx is the caller's: a step starts only while it lasts, and tools
	// run under it. after holds ctx's values without its cancellation:
	// what follows a tool's call is recorded whatever happens to ctx.
	// claims is done a lease after ctx is (see claimContext).
	ctx, after, claims context.Context
	sc                 *schedule

	clr    []clearance                // how each step was cleared before dispatch, by index
	handed map[string]json.RawMessage // the calls the run waited for, as stored, by id

	// Clearing steps as they are about to run, one at a time (see
	// clearDeferred): what the plan put against each grant so far, what
	// its steps finished before this execution did, the keys of the
	// plan's steps yet to finish (their spends are counted in inPlan, not
	// again from the store), and the step of each key known so far.
	mu      sync.Mutex
	inPlan  map[string]decimal.Decimal
	acted   map[string]decimal.Decimal
	pending []string
	effects map[string]string
}

// ev records e as an event of the gate's plan.
func (g *gate) ev(e Event) time.Time {
	e.RunID, e.Tenant, e.PlanID, e.Revision, e.Round = g.d.RunID, g.d.Tenant, g.v.plan.ID, g.v.plan.Revision, g.v.plan.Round
	return g.r.j.emit(&e)
}

// now is the executor's clock.
func (g *gate) now() time.Time { return g.r.ex.now() }

// pass takes step i through the gate. rn renews the step's claim while its
// tool runs; out receives the result instead when the tool ends its
// goroutine.
func (g *gate) pass(i int, rn *renewer, out *stepDone) (StepResult, error) {
	if g.ctx.Err() != nil {
		return StepResult{}, errNotStarted
	}
	s, clr := &g.v.steps[i], g.clr[i]
	if s.refs != nil {
		var failed StepResult
		var err error
		if s, failed, err = g.resolve(i); err != nil {
			return failed, err
		}
	}
	c, res, err := g.claim(i, s, clr)
	if c.State != store.ClaimAcquired {
		return res, err
	}
	if clr, err = g.clear(i, s, clr); err != nil {
		g.release(s, c.Epoch)
		if se := (*StepError)(nil); errors.As(err, &se) {
			return StepResult{Tool: s.step.Tool, Status: StepFailed, Err: se.Err}, err // its precondition refused it
		}
		return StepResult{}, err
	}
	if s.tool.client {
		return StepResult{}, g.handBack(s, clr, nil)
	}
	return g.act(s, clr, resultOf(s, clr), c.Epoch, rn, out)
}

// resolve readies a step whose arguments hold references, as it is about
// to run: the values are put in place from the outcomes they read (within
// Limits.MaxPlanBytes, checked before anything is copied), the whole
// argument object is decoded by the tool's contract again (value rules and
// all), and its key is digested. Arguments that fail fail the step,
// recorded, before anything is claimed.
func (g *gate) resolve(i int) (*vstep, StepResult, error) {
	d, v := g.d, g.v
	s := v.steps[i] // a copy: the plan's own is shared by executions
	id, tool := s.step.ID, s.step.Tool
	refuse := func(reason Reason, vs []Violation) (*vstep, StepResult, error) {
		perr := &PlanValidationError{Reason: reason, Step: id, Tool: tool, Violations: vs,
			RunID: d.RunID, Tenant: d.Tenant, PlanID: v.plan.ID, Revision: v.plan.Revision}
		g.ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Reason: reason, Detail: "not run: " + firstViolation(perr)})
		failed := StepResult{Tool: tool, Status: StepFailed, Err: perr}
		return nil, failed, errors.Join(&StepError{Step: id, Tool: tool, Err: perr}, g.saveStep(id, failed, clearance{}, perr.Error()))
	}
	lim := g.r.ex.cfg.Limits
	args, vs := resolveRefs(s.step.Arguments, s.refs, g.sc.outcome, lim.MaxPlanBytes)
	if vs == nil {
		s.args, vs = s.tool.contract.decode(args, lim)
	}
	if vs != nil {
		return refuse(ReasonArguments, vs)
	}
	s.key = Key{Tenant: d.Tenant, Digest: newKeyer(d.Tenant, d.RunID, v.plan.Round).digest(tool, s.args.keyJSON, s.tool.contract.perTenant, s.tool.contract.irreversible)}
	// Two steps with one key are one effect, resolved or written out.
	g.mu.Lock()
	other, dup := g.effects[s.key.Digest]
	if !dup {
		g.effects[s.key.Digest] = id
		g.yetToFinish(s.key.Digest)
	}
	g.mu.Unlock()
	if dup {
		return refuse(ReasonDuplicateEffect, []Violation{{Path: fmt.Sprintf("/steps/%d", i),
			Why: fmt.Sprintf("once its references are resolved, it performs the same effect as step %s (same tool and key arguments)", quote(other))}})
	}
	return &s, StepResult{}, nil
}

// resultOf is the result of step s, cleared as clr says, before it ends.
func resultOf(s *vstep, clr clearance) StepResult {
	res := StepResult{Tool: s.step.Tool, Key: s.key}
	if clr.grant != nil {
		res.Grant = clr.grant.ID
	}
	if clr.decision != nil {
		res.ApprovedBy = clr.decision.Approver
	}
	return res
}

// handBackHolder is the holder of the claims of a run's calls handed back:
// the run's, whichever execution hands a call back, so that any replica
// resuming the run knows the call as its own.
func handBackHolder(runID string) string { return "caller:" + runID }

// claim takes the step's key. The claim is written even if the caller's ctx
// is cancelled meanwhile, for up to a lease more (g.claims): a caller that
// gives up halfway must not leave behind a claim nobody knows it holds,
// which an irreversible step would find in doubt after the lease. If the
// store fails, the claim may still have landed; it is looked up once and
// given back if it is this execution's.
//
// c.State is ClaimAcquired when the step is the caller's to act on; for
// any other state, res and err are the step's end: a recorded outcome
// replayed, a call handed back again, a key in flight or in doubt.
func (g *gate) claim(i int, s *vstep, clr clearance) (c store.Claim, res StepResult, err error) {
	d, claims := g.d, g.r.ex.st
	id, tool, irreversible := s.step.ID, s.step.Tool, s.tool.contract.irreversible
	req := store.ClaimRequest{Key: s.key, RunID: d.RunID, StepID: id, Tool: tool, Holder: g.holder, Lease: g.r.ex.cfg.Lease,
		TakeOver: !irreversible, PerTenant: s.tool.contract.perTenant}
	if s.tool.client {
		req.Holder, req.Lease = handBackHolder(d.RunID), g.r.ex.cfg.HandBackLease
	}
	if c, err = claims.Claim(g.claims, req); err != nil {
		lctx, done := context.WithTimeout(g.after, g.r.ex.cfg.Lease)
		defer done()
		if again, aerr := claims.Claim(lctx, req); aerr == nil && !s.tool.client &&
			(again.State == store.ClaimAcquired || (again.State == store.ClaimHeld && again.Holder == req.Holder)) {
			_ = claims.Release(lctx, req.Key, again.Epoch, false)
		}
		return store.Claim{}, StepResult{}, fmt.Errorf("planexec: claiming step %s: %w", quote(id), err)
	}
	switch c.State {
	case store.ClaimAcquired:
		if g.ctx.Err() != nil {
			// Nothing has happened: a run cancelled now gives the key
			// back, so the step is not left in doubt for an effect that
			// never started.
			g.release(s, c.Epoch)
			return store.Claim{}, StepResult{}, errNotStarted
		}
		return c, StepResult{}, nil
	case store.ClaimCompleted:
		if !json.Valid(c.Outcome) {
			// Never replay what cannot be what the tool returned.
			g.ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "the recorded outcome is damaged; not run twice"})
			return c, StepResult{}, &store.Error{Op: "claim step " + quote(id), Err: fmt.Errorf("the recorded outcome is not JSON: %w", store.ErrCorruptRecord)}
		}
		res = resultOf(s, clr)
		res.Status, res.Outcome, res.Replayed = StepDone, c.Outcome, true
		if err := g.saveStep(id, res, clearance{}, ""); err != nil {
			return c, res, err
		}
		g.ev(Event{Kind: EventStepExecuted, StepID: id, Tool: tool, Replayed: true, Approver: res.ApprovedBy, Grant: res.Grant})
		return c, res, nil
	case store.ClaimHeld, store.ClaimInDoubt:
		if s.tool.client && c.Holder == req.Holder {
			// The run's own call, handed back before: its result is
			// not in yet. It is stored as it was first, with how it was
			// cleared then; one handed back by an execution that stopped
			// before it stored the call is cleared again, by the record.
			clr, doc := g.clr[i], g.handed[callID(s.key.Digest)]
			if doc == nil && clr.deferred {
				if clr, err = g.clearNow(s); err != nil {
					return c, StepResult{}, err
				}
			}
			return c, StepResult{}, g.handBack(s, clr, doc)
		}
		g.ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "outcome indeterminate; not run twice"})
		return c, StepResult{}, &IndeterminateOutcomeError{RunID: d.RunID, Step: id, Tool: tool, Key: s.key, Holder: c.Holder,
			InDoubt: c.State == store.ClaimInDoubt, LeaseExpires: c.LeaseExpires}
	}
	return c, StepResult{}, &store.Error{Op: "claim step " + quote(id), Err: fmt.Errorf("unknown claim state %d: %w", c.State, store.ErrCorruptRecord)}
}

// release gives back a key claimed for a step that did not act: nothing
// happened, so the key is free.
func (g *gate) release(s *vstep, epoch int64) {
	_ = g.r.ex.st.Release(g.after, s.key, epoch, false)
}

// clear decides, with the key claimed, whether the step may act now: the
// delegation (expiry, Config.Authorizer), the tool's Precondition against
// the world as it stands, the decision of a person who
// cleared it (still standing), and, for a step cleared only now (its
// arguments held references), the whole clearance; then its grant is
// checked again and its amount spent against the grant's window, once per
// key. The clearance it returns is the one the step acts under.
func (g *gate) clear(i int, s *vstep, clr clearance) (clearance, error) {
	d, ex := g.d, g.r.ex
	id, tool := s.step.ID, s.step.Tool
	// The clock is read only for what can expire.
	if !d.Expires.IsZero() && d.expired(g.now()) {
		g.ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "not run: the delegation expired"})
		return clr, &DelegationError{RunID: d.RunID, Step: id, Tool: tool, Why: "the delegation expired"}
	}
	if ex.cfg.Authorizer != nil {
		if err := ex.cfg.Authorizer.Authorize(g.ctx, *d, *s.step); err != nil {
			g.ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Detail: "not run: the delegation no longer covers it"})
			return clr, &DelegationError{RunID: d.RunID, Step: id, Tool: tool, Why: "no longer authorized", Err: err}
		}
	}
	if s.tool.contract.pre != nil {
		// Before a person is asked or a grant spent: the world as it
		// stands may refuse the step. The check is bounded well within the
		// claim's lease, which is not renewed until the step acts.
		ctx, cancel := context.WithTimeout(g.ctx, ex.cfg.Lease/2)
		err := g.r.precondition(ctx, g.v, i, s, d)
		cancel()
		switch {
		case err != nil && g.ctx.Err() != nil:
			return clr, errNotStarted // the run was stopped: the step did not start
		case err != nil:
			return clr, g.unmet(s, err)
		}
	}
	if clr.deferred {
		var err error
		if clr, err = g.clearNow(s); err != nil {
			return clr, err
		}
	} else if err := g.stands(s, clr); err != nil {
		return clr, err
	}
	if clr.grant == nil {
		return clr, nil
	}
	refused, err := g.spend(s, clr)
	if err != nil {
		return clr, fmt.Errorf("planexec: counting step %s against grant %s: %w", quote(id), quote(clr.grant.ID), err)
	}
	if refused != nil {
		g.ev(Event{Kind: EventAutonomyRefused, StepID: id, Tool: tool, Grant: clr.grant.ID, Detail: refused.Error()})
		return clr, &AutonomyRefusedError{Step: id, Tool: tool, Class: clr.class, Tenant: d.Tenant, Why: refused.Error(), AtDispatch: true}
	}
	return clr, nil
}

// unmet records step s failed, not run, by its precondition (err, from
// Run.precondition): unmet, or not checked.
func (g *gate) unmet(s *vstep, err error) error {
	id, tool := s.step.ID, s.step.Tool
	detail := "not run: its precondition could not be checked"
	var perr *PlanValidationError
	if errors.As(err, &perr) {
		detail = "not run: " + firstViolation(perr)
	}
	g.ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Reason: ReasonPrecondition, Detail: detail})
	failed := StepResult{Tool: tool, Status: StepFailed, Err: err}
	return errors.Join(&StepError{Step: id, Tool: tool, Err: err}, g.saveStep(id, failed, clearance{}, detail))
}

// clearNow clears a step whose clearance was left for when it is about to
// run, one step at a time: a person yet to decide is an
// *ApprovalPendingError.
func (g *gate) clearNow(s *vstep) (clearance, error) {
	g.mu.Lock()
	c, req, err := g.clearStep(s)
	g.mu.Unlock()
	switch {
	case err != nil:
		return c, err
	case req != nil:
		return c, &ApprovalPendingError{RunID: g.d.RunID, Tenant: g.d.Tenant, Requests: []ApprovalRequest{*req}}
	}
	return c, nil
}

// stands checks that the decision of the person who cleared the step still
// stands as it is about to act: on record, and not expired.
func (g *gate) stands(s *vstep, clr clearance) error {
	if clr.decision == nil {
		return nil
	}
	id, tool := s.step.ID, s.step.Tool
	why := ""
	dec, err := g.r.ex.st.Decision(g.ctx, g.d.Tenant, clr.decision.RequestID)
	switch {
	case errors.Is(err, ErrNoRecord):
		why = "the decision is no longer on record"
	case err != nil:
		return fmt.Errorf("planexec: reading the approval record of step %s: %w", quote(id), err)
	case dec.Status != Approved:
		why = "the decision on record is " + string(dec.Status)
	case dec.Expired(g.now()):
		why = "the decision expired before the step ran"
	default:
		return nil
	}
	g.ev(Event{Kind: EventApprovalDenied, StepID: id, Tool: tool, Request: dec.RequestID, Approver: dec.Approver, Detail: why})
	return &ApprovalDeniedError{Step: id, Tool: tool, Request: clr.decision.RequestID, Approver: dec.Approver, Why: why}
}

// spend checks the step's grant again just before the step acts and counts
// its amount against the grant's window in the store, once per key (a
// step resumed spends nothing more). refused says why the grant no longer
// covers the step; err is a store's failure.
func (g *gate) spend(s *vstep, clr clearance) (refused, err error) {
	ladder, now := g.r.ex.cfg.Ladder, g.now()
	ceiling, refused := ladder.commit(now, clr.grant)
	if refused != nil || ceiling == nil {
		return refused, nil
	}
	err = g.r.ex.st.ceilings.Spend(g.ctx, store.Spend{Tenant: g.d.Tenant, Grant: clr.grant.ID, Key: s.key.Digest, Amount: clr.amount, At: now},
		ceiling.Window, ceiling.Amount)
	if errors.Is(err, store.ErrCeiling) {
		return fmt.Errorf("grant %q has %w", clr.grant.ID, errNoHeadroom), nil
	}
	return nil, err
}

// spentWithin is how clearance learns what a windowed grant let through,
// from the store, leaving out the spends of the plan's steps yet to finish:
// those are counted in inPlan. Callers hold g.mu.
func (g *gate) spentWithin(gr *Grant, now time.Time) (decimal.Decimal, error) {
	spent, err := g.r.ex.st.ceilings.Spent(g.ctx, gr.ID, now, gr.Ceiling.Window, g.pending)
	if err != nil {
		return spent, fmt.Errorf("planexec: reading what grant %s spent: %w", quote(gr.ID), err)
	}
	return spent, nil
}

// handBack hands a step of a tool its caller runs back to the caller, under
// the claim taken for it: the claim waits for the call's result
// (Run.SubmitResult), and the call is handed back again, with the same id,
// until its result is in. doc is the call as stored when it was first
// handed back, if it was: it says how the step was cleared then.
func (g *gate) handBack(s *vstep, clr clearance, doc json.RawMessage) error {
	call := ToolCall{ID: callID(s.key.Digest), StepID: s.step.ID, Tool: s.step.Tool, Arguments: json.RawMessage(s.args.canonical)}
	if doc == nil {
		doc = call.document(clr)
	}
	g.ev(Event{Kind: EventToolCallHandedBack, StepID: call.StepID, Tool: call.Tool, Call: call.ID})
	return &ToolCallPendingError{RunID: g.d.RunID, Tenant: g.d.Tenant, Calls: []ToolCall{call}, docs: map[string]json.RawMessage{call.ID: doc}}
}

// act calls the step's tool under its claim and records what happened.
func (g *gate) act(s *vstep, clr clearance, res StepResult, epoch int64, rn *renewer, out *stepDone) (StepResult, error) {
	id, tool := s.step.ID, s.step.Tool
	// The step's duration runs from the time its start is recorded.
	start := g.ev(Event{Kind: EventStepStarted, StepID: id, Tool: tool})
	// A tool that ends its goroutine (runtime.Goexit) skips the rest of
	// this function but not its deferred calls: record it as a failure.
	exited := true
	defer func() {
		if exited {
			out.res, out.err = g.fail(s, clr, res, epoch, g.now().Sub(start), errToolExited)
		}
	}()
	outcome, err := g.call(s, epoch, rn)
	exited = false
	end := g.now()
	elapsed := end.Sub(start)
	if err != nil {
		return g.fail(s, clr, res, epoch, elapsed, err)
	}
	res.Status, res.Outcome = StepDone, outcome
	// The tool returned: its events go into the history with the write that
	// records it, and a failure to record it follows them.
	g.ev(Event{Kind: EventStepExecuted, StepID: id, Tool: tool, Duration: elapsed, Approver: res.ApprovedBy, Grant: res.Grant, Outcome: outcome})
	if clr.grant != nil && clr.grant.Level == LevelActAndReport {
		g.ev(Event{Kind: EventAutonomyReported, StepID: id, Tool: tool, Grant: clr.grant.ID, Level: clr.grant.Level})
	}
	err = g.r.j.write(g.after, g.r.ex.st.CompleteStep, &store.StepWrite{Key: s.key, Epoch: epoch, RunID: g.d.RunID, Outcome: outcome,
		Record: stepRecord(g.v.plan.ID, id, res, clr, "", end)})
	if errors.Is(err, store.ErrFenced) {
		// Another holder took the step over and owns its record now:
		// write nothing over it.
		g.ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Duration: elapsed, Detail: "claim taken over by another holder; its record stands"})
		return StepResult{}, fmt.Errorf("planexec: recording the outcome of step %s: %w", quote(id), err)
	}
	if err != nil {
		// The effect happened but is not on record.
		err = fmt.Errorf("planexec: recording the outcome of step %s: %w", quote(id), err)
		res.Status, res.Outcome, res.Err = StepFailed, nil, err
		if s.tool.contract.irreversible {
			res.Status = StepInDoubt
			err = &IndeterminateOutcomeError{RunID: g.d.RunID, Step: id, Tool: tool, Key: s.key, InDoubt: true, Err: err}
		}
		g.ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Duration: elapsed, Detail: "outcome not recorded"})
		return res, errors.Join(err, g.saveStep(id, res, clr, err.Error()))
	}
	return res, nil
}

// call runs the tool with its step and key in the context, renewing the
// claim's lease while it runs, and renders its outcome as JSON. A panic, in
// the tool or in rendering its outcome, is its error.
func (g *gate) call(s *vstep, epoch int64, rn *renewer) (outcome json.RawMessage, err error) {
	d, v, ex := g.d, g.v, g.r.ex
	tctx, cancel := context.WithCancelCause(g.ctx)
	defer cancel(nil)
	t := ex.cfg.StepTimeout
	if g.r.stepTimeout > 0 {
		t = g.r.stepTimeout
	}
	if t > 0 {
		var stop context.CancelFunc
		tctx, stop = context.WithTimeoutCause(tctx, t, ErrStepTimeout)
		defer stop()
	}
	tc := &toolContext{Context: tctx, step: stepContext{key: s.key.Digest, info: StepInfo{RunID: d.RunID, Tenant: d.Tenant, User: d.User,
		PlanID: v.plan.ID, Revision: v.plan.Revision, StepID: s.step.ID, Tool: s.step.Tool}}}
	// Renewal goes on while the tool runs even if the caller's ctx is
	// cancelled (the tool may not stop at once); losing the claim to
	// another holder cancels the tool.
	rn.start(g.after, ex.st.Store, s.key, epoch, ex.cfg.Lease, s.step.ID, cancel)
	defer rn.stop()
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

// errToolExited is the failure of a tool that ended its goroutine without
// returning.
var errToolExited = errors.New("the tool exited its goroutine without returning")

// fail records a tool's failure: in doubt when the tool is irreversible and
// the error does not promise ErrNotApplied, failed (and its key freed)
// otherwise.
func (g *gate) fail(s *vstep, clr clearance, res StepResult, epoch int64, elapsed time.Duration, err error) (StepResult, error) {
	id, tool := s.step.ID, s.step.Tool
	inDoubt := s.tool.contract.irreversible && !errors.Is(err, ErrNotApplied)
	res.Status, res.Err = StepFailed, err
	if inDoubt {
		res.Status = StepInDoubt
	}
	detail := string(res.Status)
	if errors.Is(err, ErrStepTimeout) {
		detail += ": timed out"
	}
	g.ev(Event{Kind: EventStepFailed, StepID: id, Tool: tool, Duration: elapsed, Detail: detail})
	w := &store.StepWrite{Key: s.key, Epoch: epoch, RunID: g.d.RunID, InDoubt: inDoubt, Record: stepRecord(g.v.plan.ID, id, res, clr, err.Error(), g.now())}
	serr := g.r.j.write(g.after, g.r.ex.st.ReleaseStep, w)
	if serr != nil {
		serr = fmt.Errorf("planexec: recording the failure of step %s: %w", quote(id), serr)
	}
	var failure error = &StepError{Step: id, Tool: tool, Err: err}
	if inDoubt {
		failure = &IndeterminateOutcomeError{RunID: g.d.RunID, Step: id, Tool: tool, Key: s.key, InDoubt: true, Err: failure}
	}
	return res, errors.Join(failure, serr)
}

// stepRecord is what the store keeps of a step of plan that finished at
// finished.
func stepRecord(plan, id string, sr StepResult, clr clearance, errText string, finished time.Time) store.StepRecord {
	rec := store.StepRecord{
		StepID: id, PlanID: plan, Tool: sr.Tool, Status: sr.Status, Outcome: sr.Outcome, Replayed: sr.Replayed,
		Key: sr.Key.Digest, ApprovedBy: sr.ApprovedBy, Error: errText, Finished: finished,
	}
	if clr.grant != nil {
		rec.Grant, rec.Amount = clr.grant.ID, clr.amount
	}
	return rec
}

// saveStep records a step that ended without its claim's write: refused
// before it acted, or replayed.
func (g *gate) saveStep(id string, sr StepResult, clr clearance, errText string) error {
	d := g.d
	if err := g.r.ex.st.SaveStep(g.after, d.Tenant, d.RunID, stepRecord(g.v.plan.ID, id, sr, clr, errText, g.now())); err != nil {
		return fmt.Errorf("planexec: recording step %s: %w", quote(id), err)
	}
	return nil
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
