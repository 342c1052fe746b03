package chat

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/planexec/planexec"
)

// ErrNoStep reports a step to apply that the proposal does not hold.
var ErrNoStep = errors.New("chat: the proposal has no such step")

// Apply applies a proposal for the person: the steps named (nil: all of
// them) and every step they depend on, run on the engine under the person's
// delegation, as the run "chat:<session>:<proposal>". The engine validates
// the plan again against what stands now (its tools, the person's scope),
// asks its gate and ladder, and never does an effect twice: applying a
// proposal again resumes its run (after a person's approval, say) rather
// than starting another, whatever steps are named.
//
// What the run did goes on the transcript (KindApplied), so the planner
// learns of it. A proposal rejected before is ErrDecided. The engine's
// errors are returned as they are: a *planexec.ApprovalPendingError when a
// step waits on a person, a *planexec.PlanValidationError when the proposal
// no longer fits.
func (c *Chat) Apply(ctx context.Context, person planexec.Delegation, session, proposal string, steps []string) (*planexec.Result, error) {
	if err := c.person(person); err != nil {
		return nil, err
	}
	p, decided, err := c.proposal(ctx, person.Tenant, session, proposal)
	if err != nil {
		return nil, err
	}
	if decided == KindRejected {
		return nil, ErrDecided
	}
	run, err := c.AppliedRun(person, session, proposal)
	if err != nil {
		return nil, err
	}
	var res *planexec.Result
	var picked []string
	if _, ierr := run.Info(ctx); ierr == nil {
		// Applied before: go on with that run, whatever is named now.
		res, err = run.Resume(ctx)
		if plan, ok := run.Current(); ok {
			for _, s := range plan.Steps {
				picked = append(picked, s.ID)
			}
		}
	} else if errors.Is(ierr, planexec.ErrNoRecord) {
		if picked, err = closure(p.Plan, steps); err != nil {
			return nil, err
		}
		plan := p.Plan.plan()
		plan.Steps = slices.DeleteFunc(plan.Steps, func(s planexec.Step) bool { return !slices.Contains(picked, s.ID) })
		res, err = run.Execute(ctx, plan)
	} else {
		return nil, ierr
	}
	var pending *planexec.ApprovalPendingError
	if res == nil && err != nil && !errors.As(err, &pending) {
		return nil, err // nothing ran: refused as it stands now, a store down
	}
	dec := &Decision{Proposal: proposal, Steps: picked, Run: run.ID(), Status: string(planexec.StatusOf(err))}
	if res != nil {
		for _, id := range picked {
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
	entry := Output{Kind: KindApplied, By: person.User, Decision: dec}
	if _, werr := c.cfg.Store.AppendEntries(context.WithoutCancel(ctx), person.Tenant, session, []json.RawMessage{encodeEntry(&entry)}); werr != nil {
		return res, errors.Join(err, werr)
	}
	c.notify(sessionKey{person.Tenant, session})
	return res, err
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

// Reject rejects a proposal for the person, with their reason. A proposal
// applied before (its run exists) is ErrDecided; rejecting twice is
// ErrDecided too. (An Apply and a Reject racing on two processes may both
// be recorded; the apply's effects still happen once, and the planner is
// told both.)
func (c *Chat) Reject(ctx context.Context, person planexec.Delegation, session, proposal, reason string) error {
	if err := c.person(person); err != nil {
		return err
	}
	_, decided, err := c.proposal(ctx, person.Tenant, session, proposal)
	if err != nil {
		return err
	}
	if decided != "" {
		return ErrDecided
	}
	run, err := c.AppliedRun(person, session, proposal)
	if err != nil {
		return err
	}
	if _, err := run.Info(ctx); err == nil {
		return ErrDecided
	} else if !errors.Is(err, planexec.ErrNoRecord) {
		return err
	}
	entry := Output{Kind: KindRejected, By: person.User, Decision: &Decision{Proposal: proposal, Reason: clipRunes(reason, 2000)}}
	if _, err := c.cfg.Store.AppendEntries(ctx, person.Tenant, session, []json.RawMessage{encodeEntry(&entry)}); err != nil {
		return err
	}
	c.notify(sessionKey{person.Tenant, session})
	return nil
}

// proposal finds a proposal of the session and the first decision on it
// (KindApplied, KindRejected or "").
func (c *Chat) proposal(ctx context.Context, tenant, session, id string) (*Proposal, Kind, error) {
	if c.cfg.Engine == nil {
		return nil, "", ErrNoProposal
	}
	_, doc, err := c.load(ctx, tenant, session)
	if err != nil {
		return nil, "", err
	}
	seq, ok := doc.Proposals[id]
	if !ok {
		return nil, "", ErrNoProposal
	}
	var p *Proposal
	var decided Kind
	after := seq
	for {
		page, err := c.Transcript(ctx, tenant, session, after, pageSize)
		if err != nil {
			return nil, "", err
		}
		for i := range page {
			o := &page[i]
			switch {
			case o.Kind == KindProposal && o.Proposal.ID == id:
				p = o.Proposal
			case (o.Kind == KindApplied || o.Kind == KindRejected) && o.Decision.Proposal == id && decided == "":
				decided = o.Kind
			}
		}
		if len(page) < pageSize {
			break
		}
		after = page[len(page)-1].Seq
	}
	if p == nil {
		return nil, "", ErrNoProposal
	}
	return p, decided, nil
}

// closure is the steps named and every step they depend on, in the plan's
// order: by depends_on, and by the references in their arguments.
func closure(plan ProposedPlan, named []string) ([]string, error) {
	byID := map[string]*Step{}
	for i := range plan.Steps {
		byID[plan.Steps[i].ID] = &plan.Steps[i]
	}
	if named == nil {
		for _, s := range plan.Steps {
			named = append(named, s.ID)
		}
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
