package chat

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// ErrNoStep reports a step to apply that the proposal does not hold.
var ErrNoStep = errors.New("chat: the proposal has no such step")

// Apply applies a proposal for the person: the steps named (nil: all of
// them; a step the proposal does not hold, or an empty list, is ErrNoStep)
// and every step they depend on, run on the engine under the person's
// delegation, as the run "chat:<session>:<proposal>". The engine validates
// the plan again against what stands now (its tools, the person's scope),
// asks its gate, ladder and authorizer, and never does an effect twice.
//
// A proposal may be applied in parts: applying more of it later runs the
// steps not applied yet (a step applied before is replayed, not run
// again); applying again what was applied goes on with that run (after a
// person's approval, or an interruption) rather than starting another.
// Every apply runs all the steps applied so far, so none is left behind by
// one that stopped early. Applying again steps whose run completed returns
// the outcome on record (each output as the transcript bounds it) and
// records nothing.
//
// Applies of one proposal run one at a time: on one process, a second waits
// for the first (or for ctx); on another process, while the first runs its
// steps, it is ErrApplying (wrapping the engine's planexec.ErrRunBusy or
// planexec.ErrInFlight), no step runs for it, and the first goes on
// undisturbed. Its decision is recorded only if it named steps not applied
// before (KindApplying is stored before the run is found busy): they stand
// decided, and the next apply runs them. Only a person may apply (see Send).
//
// The first decision on a proposal stands, whichever process makes it: the
// person's decision to apply (KindApplying) is stored before any step runs,
// after every entry it read, and a proposal rejected before is ErrDecided.
// What the run did goes on the transcript (KindApplied), so the planner
// learns of it, unless it is what the transcript says already and no step
// ran. The engine's other errors are returned as they are: a
// *planexec.ApprovalPendingError when a step waits on a person, a
// *planexec.PlanValidationError when the proposal no longer fits, a
// *planexec.DelegationError when the person's delegation or the engine's
// authorizer does not cover a step.
//
// The run goes on if ctx is cancelled, as a turn does: a person who closes
// the page does not leave it half done. Chat.Close stops it, resumably.
func (c *Chat) Apply(ctx context.Context, person planexec.Delegation, session, proposal string, steps []string) (*planexec.Result, error) {
	if err := c.person(ctx, person); err != nil {
		return nil, err
	}
	hctx, done, err := c.hold(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	unlock, err := c.lockProposal(ctx, hctx, proposalKey{person.Tenant, session, proposal})
	if err != nil {
		return nil, err
	}
	defer unlock()
	ctx = hctx
	st, err := c.readProposal(ctx, person.Tenant, session, proposal)
	if err != nil {
		return nil, err
	}
	if hidden, err := c.proposalWithheld(ctx, person, session, proposal); err != nil || hidden {
		return nil, cmp.Or(err, ErrWithheld)
	}
	run, err := c.AppliedRun(person, session, proposal)
	if err != nil {
		return nil, err
	}
	var want []string
	for {
		if st.first == KindRejected {
			return nil, ErrDecided
		}
		named, err := closure(st.p.Plan, steps)
		if err != nil {
			return nil, err
		}
		want = st.widen(named)
		again := len(want) == len(st.applied)
		if again && !st.completed(want) {
			break // applied before: go on with that run, which asks again
		}
		// A plan that cannot run as it stands is refused before the
		// decision goes on record, so it can still be rejected; the
		// outcome on record is the person's only if they could apply it.
		plan := st.plan(want)
		if err := run.Validate(plan); err != nil {
			return nil, err
		}
		if err := run.Authorize(ctx, plan); err != nil {
			return nil, err
		}
		if err := run.CheckPreconditions(ctx, plan); err != nil {
			return nil, err
		}
		if again {
			return st.outcome.result(st.revision), nil
		}
		begun := Output{Kind: KindApplying, By: person.User, Decision: &Decision{Proposal: proposal, Steps: want, Run: run.ID()}}
		_, err = c.cfg.Store.AppendEntriesAfter(ctx, person.Tenant, session, st.last, []json.RawMessage{encodeEntry(&begun)})
		if errors.Is(err, store.ErrMoved) {
			if err := c.readMore(ctx, person.Tenant, session, st); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		c.notify(sessionKey{person.Tenant, session})
		st.applied, st.revision = want, st.revision+1
		break
	}

	// Every apply runs every step applied so far, whatever the engine's
	// store holds of the run (a narrower revision another request saved, or
	// none, after a crash): what finished is replayed by the engine, never
	// run again, and a person's recorded decision holds, as its request is
	// the step's and not the revision's.
	before := st.last
	res, err := run.Execute(runningTools(ctx), st.plan(want))
	var pending *planexec.ApprovalPendingError
	switch {
	case (errors.Is(err, planexec.ErrRunBusy) || errors.Is(err, planexec.ErrInFlight)) && !ranHere(res):
		return nil, fmt.Errorf("%w: %w", ErrApplying, err) // another request is running it at this moment: that one records
	case res == nil && err != nil && !errors.As(err, &pending):
		return nil, err // nothing ran: refused as it stands now, a store down
	}
	dec := &Decision{Proposal: proposal, Steps: want, Run: run.ID(), Status: string(planexec.StatusOf(err))}
	if res != nil {
		for _, id := range want {
			sr, ok := res.Steps[id]
			if !ok {
				continue
			}
			out, _ := cut(sr.Outcome, c.cfg.MaxResultBytes)
			so := StepOutcome{Step: id, Tool: sr.Tool, Status: string(sr.Status), Output: out}
			var te *ToolError
			if errors.As(sr.Err, &te) {
				so.Error = cutText(te.Message, c.cfg.MaxResultBytes)
			}
			dec.Results = append(dec.Results, so)
		}
	}
	// What the run did goes on record even when Close stopped it, unless
	// the record says it already: this apply only replayed what another
	// ran, or another only replayed what this one ran, and recorded it
	// first.
	entry := Output{Kind: KindApplied, By: person.User, Decision: dec, Source: &Source{By: person.User, Applied: true, Steps: st.steps(want)}}
	said := func() bool {
		same := st.outcome != nil && st.outcome.Status == dec.Status && slices.Equal(st.outcome.Steps, want)
		return same && (!ranHere(res) || st.outcomeSeq > before)
	}
	wctx := context.WithoutCancel(ctx)
	for !said() {
		_, werr := c.cfg.Store.AppendEntriesAfter(wctx, person.Tenant, session, st.last, []json.RawMessage{encodeEntry(&entry)})
		if errors.Is(werr, store.ErrMoved) {
			werr = c.readMore(wctx, person.Tenant, session, st)
			if werr == nil {
				continue
			}
		}
		if werr != nil {
			return res, errors.Join(err, werr)
		}
		c.notify(sessionKey{person.Tenant, session})
		break
	}
	return res, err
}

// lockProposal takes the proposal for an apply in this process, once the
// applies of it under way here end: ctx is the caller's, whose end gives up
// waiting, held the apply's, which Close ends. The func returned lets it go.
func (c *Chat) lockProposal(ctx, held context.Context, k proposalKey) (unlock func(), _ error) {
	for {
		c.mu.Lock()
		busy, ok := c.applying[k]
		if !ok {
			mine := make(chan struct{})
			c.applying[k] = mine
			c.mu.Unlock()
			return func() {
				c.mu.Lock()
				delete(c.applying, k)
				c.mu.Unlock()
				close(mine)
			}, nil
		}
		c.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-held.Done():
			return nil, ErrClosed
		}
	}
}

// ranHere reports whether a step of res ran in this call, rather than being
// replayed from the record.
func ranHere(res *planexec.Result) bool {
	if res == nil {
		return false
	}
	for _, s := range res.Steps {
		if !s.Replayed {
			return true
		}
	}
	return false
}

// AppliedRun is the engine's run of a proposal applied for the person: to
// record a decision on a step that waits for approval (Run.Decide, then
// Apply again), or to read its events. It touches no store.
func (c *Chat) AppliedRun(person planexec.Delegation, session, proposal string) (*planexec.Run, error) {
	if err := c.isPerson(person); err != nil {
		return nil, err
	}
	if c.cfg.Engine == nil {
		return nil, ErrNoProposal
	}
	d := person
	d.RunID = appliedRunID(session, proposal)
	return c.cfg.Engine.Run(d)
}

// appliedRunID names the engine's run of an applied proposal.
func appliedRunID(session, proposal string) string { return "chat:" + session + ":" + proposal }

// Reject rejects a proposal for the person, with their reason. Deciding a
// proposal either way takes the authority to apply it: a person whose scope
// does not cover one of its steps gets the engine's refusal (a
// *planexec.PlanValidationError, ReasonNotAllowed), one whose delegation
// expired or whom the engine's authorizer refuses a *planexec.DelegationError,
// and nothing is recorded. A proposal decided before, applied or rejected, on any process,
// is ErrDecided. Only a person may reject (see Send).
func (c *Chat) Reject(ctx context.Context, person planexec.Delegation, session, proposal, reason string) error {
	if err := c.person(ctx, person); err != nil {
		return err
	}
	ctx, done, err := c.hold(ctx)
	if err != nil {
		return err
	}
	defer done()
	st, err := c.readProposal(ctx, person.Tenant, session, proposal)
	if err != nil {
		return err
	}
	run, err := c.AppliedRun(person, session, proposal)
	if err != nil {
		return err
	}
	// As for an apply: the person's scope, their delegation's expiry and
	// the engine's authorizer; a plan that no longer fits for other reasons
	// may still be rejected.
	var pve *planexec.PlanValidationError
	if err := run.Validate(st.p.Plan.plan()); errors.As(err, &pve) && pve.Reason == planexec.ReasonNotAllowed {
		return err
	}
	if err := run.Authorize(ctx, st.p.Plan.plan()); err != nil {
		return err
	}
	entry := Output{Kind: KindRejected, By: person.User, Decision: &Decision{Proposal: proposal, Reason: clipRunes(reason, 2000)}}
	for {
		if st.first != "" {
			return ErrDecided
		}
		_, err := c.cfg.Store.AppendEntriesAfter(ctx, person.Tenant, session, st.last, []json.RawMessage{encodeEntry(&entry)})
		if errors.Is(err, store.ErrMoved) {
			if err := c.readMore(ctx, person.Tenant, session, st); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		c.notify(sessionKey{person.Tenant, session})
		return nil
	}
}

// proposalState is what a session's transcript says of one proposal, read
// up to entry last.
type proposalState struct {
	id string
	p  *Proposal
	// first is the first decision on it: KindApplying or KindRejected, ""
	// for none yet.
	first Kind
	// applied are the steps of every apply begun, in the plan's order;
	// revision counts the applies that widened them.
	applied  []string
	revision int
	// outcome is what the latest apply on record did, in entry
	// outcomeSeq.
	outcome    *Decision
	outcomeSeq int64
	last       int64
}

// completed reports that the run of the steps in want completed, on record.
func (st *proposalState) completed(want []string) bool {
	return st.outcome != nil && st.outcome.Status == string(planexec.RunCompleted) && slices.Equal(st.outcome.Steps, want)
}

// steps are the proposal's steps in want.
func (st *proposalState) steps(want []string) []Step {
	return slices.DeleteFunc(slices.Clone(st.p.Plan.Steps), func(s Step) bool { return !slices.Contains(want, s.ID) })
}

// result is the outcome on record as the engine's result: every step
// replayed.
func (d *Decision) result(revision int) *planexec.Result {
	res := &planexec.Result{RunID: d.Run, PlanID: d.Proposal, Revision: max(revision, 1),
		Steps: make(map[string]planexec.StepResult, len(d.Results)), Complete: d.Status == string(planexec.RunCompleted)}
	for _, so := range d.Results {
		res.Steps[so.Step] = planexec.StepResult{Tool: so.Tool, Status: planexec.StepStatus(so.Status), Outcome: so.Output, Replayed: true}
	}
	return res
}

// readProposal reads what the session's transcript says of a proposal.
func (c *Chat) readProposal(ctx context.Context, tenant, session, id string) (*proposalState, error) {
	if c.cfg.Engine == nil {
		return nil, ErrNoProposal
	}
	_, doc, err := c.load(ctx, tenant, session)
	if err != nil {
		return nil, err
	}
	seq, ok := doc.Proposals[id]
	if !ok {
		return nil, ErrNoProposal
	}
	st := &proposalState{id: id, last: seq}
	if err := c.readMore(ctx, tenant, session, st); err != nil {
		return nil, err
	}
	if st.p == nil {
		return nil, ErrNoProposal
	}
	return st, nil
}

// readMore reads the entries after st.last into st, to the transcript's end.
func (c *Chat) readMore(ctx context.Context, tenant, session string, st *proposalState) error {
	for {
		page, err := c.Transcript(ctx, tenant, session, st.last, pageSize)
		if err != nil {
			return err
		}
		for i := range page {
			o := &page[i]
			st.last = o.Seq
			switch {
			case o.Kind == KindProposal && o.Proposal.ID == st.id:
				st.p = o.Proposal
			case (o.Kind == KindApplying || o.Kind == KindRejected) && o.Decision.Proposal == st.id:
				if st.first == "" {
					st.first = o.Kind
				}
				if o.Kind == KindApplying && st.first == KindApplying && len(o.Decision.Steps) > len(st.applied) {
					st.applied, st.revision = o.Decision.Steps, st.revision+1
				}
			case o.Kind == KindApplied && o.Decision.Proposal == st.id:
				st.outcome, st.outcomeSeq = o.Decision, o.Seq
			}
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

// plan is the proposal's plan of the steps in want, as the engine runs it:
// its id the proposal's, its revision the count of applies that widened it.
func (st *proposalState) plan(want []string) planexec.Plan {
	plan := st.p.Plan.plan()
	plan.ID, plan.Revision = st.id, max(st.revision, 1)
	plan.Steps = slices.DeleteFunc(plan.Steps, func(s planexec.Step) bool { return !slices.Contains(want, s.ID) })
	return plan
}

// widen is the steps applied so far together with named, in the plan's
// order.
func (st *proposalState) widen(named []string) []string {
	var out []string
	for _, s := range st.p.Plan.Steps {
		if slices.Contains(st.applied, s.ID) || slices.Contains(named, s.ID) {
			out = append(out, s.ID)
		}
	}
	return out
}

// closure is the steps named and every step they depend on, in the plan's
// order: by depends_on, and by the references in their arguments.
func closure(plan ProposedPlan, named []string) ([]string, error) {
	byID := map[string]*Step{}
	for i := range plan.Steps {
		byID[plan.Steps[i].ID] = &plan.Steps[i]
	}
	switch {
	case named == nil:
		for _, s := range plan.Steps {
			named = append(named, s.ID)
		}
	case len(named) == 0:
		return nil, ErrNoStep // a list that names nothing is no apply
	}
	want := map[string]bool{}
	var visit func(id string) error
	visit = func(id string) error {
		if want[id] {
			return nil
		}
		s, ok := byID[id]
		if !ok {
			return ErrNoStep
		}
		want[id] = true
		for _, dep := range append(slices.Clone(s.DependsOn), refsIn(s.Arguments)...) {
			if err := visit(dep); err != nil {
				return err
			}
		}
		return nil
	}
	for _, id := range named {
		if err := visit(id); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, s := range plan.Steps {
		if want[s.ID] {
			out = append(out, s.ID)
		}
	}
	return out, nil
}

// refsIn lists the steps the references in arguments read from.
func refsIn(arguments json.RawMessage) []string {
	var v any
	if json.Unmarshal(arguments, &v) != nil {
		return nil
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if from, ok := x[planexec.RefKey].(string); ok {
				out = append(out, from)
				return
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// clipRunes cuts s to at most n characters.
func clipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return strings.Clone(s[:j])
		}
		i++
	}
	return s
}
