package chat

import (
	"context"
	"encoding/json"
	"errors"
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
// one that stopped early.
//
// The first decision on a proposal stands, whichever process makes it: the
// person's decision to apply (KindApplying) is stored before any step runs,
// after every entry it read, and a proposal rejected before is ErrDecided.
// What the run did goes on the transcript (KindApplied), so the planner
// learns of it. The engine's errors are returned as they are: a
// *planexec.ApprovalPendingError when a step waits on a person, a
// *planexec.PlanValidationError when the proposal no longer fits, a
// *planexec.DelegationError when the person's delegation or the engine's
// authorizer does not cover a step, an error that is planexec.ErrInFlight
// when another request is running its steps at this moment (nothing is
// recorded then; that request records what it ran, and applying again once
// it is done runs what is left).
//
// The run goes on if ctx is cancelled, as a turn does: a person who closes
// the page does not leave it half done. Chat.Close stops it, resumably.
func (c *Chat) Apply(ctx context.Context, person planexec.Delegation, session, proposal string, steps []string) (*planexec.Result, error) {
	if err := c.person(person); err != nil {
		return nil, err
	}
	ctx, done, err := c.hold(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	st, err := c.readProposal(ctx, person.Tenant, session, proposal)
	if err != nil {
		return nil, err
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
		if want = st.widen(named); len(want) == len(st.applied) {
			break // applied before: go on with that run
		}
		// A plan that cannot run as it stands is refused before the
		// decision goes on record, so it can still be rejected.
		plan := st.plan(want)
		if err := run.Validate(plan); err != nil {
			return nil, err
		}
		if err := run.Authorize(ctx, plan); err != nil {
			return nil, err
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
	res, err := run.Execute(ctx, st.plan(want))
	var pending *planexec.ApprovalPendingError
	switch {
	case errors.Is(err, planexec.ErrInFlight) && !ranHere(res):
		return nil, err // another request is applying it at this moment: that one records
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
				so.Error = te.Message
			}
			dec.Results = append(dec.Results, so)
		}
	}
	// What the run did goes on record even when Close stopped it.
	entry := Output{Kind: KindApplied, By: person.User, Decision: dec}
	if _, werr := c.cfg.Store.AppendEntries(context.WithoutCancel(ctx), person.Tenant, session, []json.RawMessage{encodeEntry(&entry)}); werr != nil {
		return res, errors.Join(err, werr)
	}
	c.notify(sessionKey{person.Tenant, session})
	return res, err
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
	if err := c.person(person); err != nil {
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
// is ErrDecided.
func (c *Chat) Reject(ctx context.Context, person planexec.Delegation, session, proposal, reason string) error {
	if err := c.person(person); err != nil {
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
	last     int64
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
