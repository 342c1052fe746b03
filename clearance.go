package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/internal/canonjson"
	"github.com/planexec/planexec/store"
)

// clearance is how one step was cleared to run.
type clearance struct {
	decision *Decision       // a person's, when one cleared it
	grant    *Grant          // the autonomy grant it acts under, as cleared
	class    string          // the grant's action class
	amount   decimal.Decimal // what it counts against the grant
	// deferred: the step's arguments hold references, and it is cleared
	// when it is about to run, on the values it will run with.
	deferred bool
}

// clear decides, before any step runs, every step that needs a grant or a
// person. It returns the first refusal or denial; pending decisions are
// collected into one *ApprovalPendingError.
//
// A step whose arguments hold references is decided when it is about to
// run (see Run.prepare), on the values it will really run with; here it is
// only refused if its class is forbidden outright.
//
// acted holds what the plan's finished steps put against each grant;
// inPlan gathers what the steps cleared put against each.
func (r *Run) clear(ctx context.Context, v *vplan, finished []bool, inPlan, acted map[string]decimal.Decimal, ev func(Event) time.Time) ([]clearance, error) {
	d := &r.d
	clr := make([]clearance, len(v.steps))
	var pending []ApprovalRequest
	for _, i := range v.order {
		if finished[i] {
			continue
		}
		s := &v.steps[i]
		if s.refs != nil {
			deferred, err := r.deferClearance(s, ev)
			if err != nil {
				return nil, err
			}
			clr[i].deferred = deferred
			continue
		}
		c, req, err := r.clearStep(ctx, v, s, inPlan, acted, ev)
		if err != nil {
			return nil, err
		}
		if req != nil {
			pending = append(pending, *req)
			continue
		}
		clr[i] = c
	}
	if pending != nil {
		return nil, &ApprovalPendingError{RunID: d.RunID, Tenant: d.Tenant, Requests: pending}
	}
	return clr, nil
}

// deferClearance tells whether a step with references needs clearing when
// it is about to run, and refuses it now if its class is forbidden: what a
// class refuses outright is refused before anything runs.
func (r *Run) deferClearance(s *vstep, ev func(Event) time.Time) (bool, error) {
	id, tool := s.step.ID, s.step.Tool
	if l := r.ex.cfg.Ladder; l != nil {
		if c, ok := l.Classify(tool); ok {
			l.mu.Lock()
			g := l.grantFor(r.d.Tenant, r.d.User, c.Name, r.ex.cfg.Now())
			l.mu.Unlock()
			if g != nil && g.Level == LevelNever {
				why := fmt.Sprintf("the grant forbids class %q", c.Name)
				ev(Event{Kind: EventAutonomyRefused, StepID: id, Tool: tool, Detail: why})
				return false, &AutonomyRefusedError{Step: id, Tool: tool, Class: c.Name, Tenant: r.d.Tenant, Why: why}
			}
			return true, nil
		}
	}
	return s.tool.contract.irreversible || s.tool.contract.approval, nil
}

// clearStep decides one step: under a grant (its amount added to inPlan),
// by a person's recorded or given decision, or pending (req is the request
// a person has yet to answer). A refusal or denial is the error.
func (r *Run) clearStep(ctx context.Context, v *vplan, s *vstep, inPlan, acted map[string]decimal.Decimal, ev func(Event) time.Time) (c clearance, req *ApprovalRequest, err error) {
	d := &r.d
	id, tool := s.step.ID, s.step.Tool
	var why, class string
	if r.ex.cfg.Ladder != nil {
		if cl, ok := r.ex.cfg.Ladder.Classify(tool); ok {
			class = cl.Name
			dec, err := r.ex.cfg.Ladder.decide(r.ex.cfg.Now(), d.Tenant, d.User, tool, s.args.canonical, inPlan, acted, r.spentWithin(ctx))
			if err != nil {
				return c, nil, err
			}
			switch dec.verdict {
			case verdictRefuse:
				ev(Event{Kind: EventAutonomyRefused, StepID: id, Tool: tool, Detail: dec.why})
				return c, nil, &AutonomyRefusedError{Step: id, Tool: tool, Class: class, Tenant: d.Tenant, Why: dec.why}
			case verdictEscalate:
				ev(Event{Kind: EventAutonomyEscalated, StepID: id, Tool: tool, Grant: grantID(dec.grant), Detail: dec.why})
				why = "escalated by the autonomy ladder: " + dec.why
			case verdictAct:
				ev(Event{Kind: EventAutonomyCleared, StepID: id, Tool: tool, Grant: dec.grant.ID, Level: dec.grant.Level})
				c.grant, c.class, c.amount = dec.grant, class, dec.amount
				inPlan[dec.grant.ID] = inPlan[dec.grant.ID].Add(dec.amount)
				return c, nil, nil
			}
		}
	}
	if why == "" {
		switch {
		case s.tool.contract.irreversible:
			why = "the tool is irreversible"
		case s.tool.contract.approval:
			why = "the tool requires approval"
		default:
			return c, nil, nil
		}
	}
	if r.ex.cfg.Gate == nil {
		return c, nil, &ConfigurationError{Tool: tool, Why: "needs a person's approval but no approval gate is configured"}
	}
	request, err := r.approvalRequest(v, s, class, why)
	if err != nil {
		return c, nil, err
	}
	decision, err := r.decision(ctx, request, ev)
	if err != nil {
		return c, nil, err
	}
	if decision.Status == Pending {
		return c, &request, nil
	}
	c.decision = &decision
	return c, nil, nil
}

func grantID(g *Grant) string {
	if g == nil {
		return ""
	}
	return g.ID
}

func (r *Run) approvalRequest(v *vplan, s *vstep, class, why string) (ApprovalRequest, error) {
	d := &r.d
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
		ID: recordID, Tenant: d.Tenant, RunID: d.RunID, User: d.User, Agent: d.Agent,
		PlanID: v.plan.ID, Revision: v.plan.Revision, StepID: s.step.ID, Tool: s.step.Tool, Intent: s.step.Intent,
		Arguments: s.args.display(), ArgumentsDigest: argsDigest, Irreversible: s.tool.contract.irreversible,
		Class: class, Why: why,
	}, nil
}

// decision finds the recorded decision for req or asks the gate, and returns
// a granted or pending decision, or the denial as an error.
func (r *Run) decision(ctx context.Context, req ApprovalRequest, ev func(Event) time.Time) (Decision, error) {
	return r.clearRequest(ctx, req, ev, false)
}

// recorded is decision again, after a gate's answer could not be recorded
// because another's was first: it finds that one.
func (r *Run) recorded(ctx context.Context, req ApprovalRequest, ev func(Event) time.Time) (Decision, error) {
	return r.clearRequest(ctx, req, ev, true)
}

func (r *Run) clearRequest(ctx context.Context, req ApprovalRequest, ev func(Event) time.Time, retried bool) (Decision, error) {
	now := r.ex.cfg.Now()
	deny := func(dec Decision, why string, replayed bool) (Decision, error) {
		ev(Event{Kind: EventApprovalDenied, StepID: req.StepID, Tool: req.Tool, Request: req.ID, Approver: dec.Approver, Replayed: replayed, Detail: why})
		return dec, &ApprovalDeniedError{Step: req.StepID, Tool: req.Tool, Request: req.ID, Approver: dec.Approver, Why: why}
	}
	recorded, err := r.ex.approvals.Decision(ctx, req.Tenant, req.ID)
	switch {
	case err == nil && recorded.Status == Approved && !recorded.expired(now):
		ev(Event{Kind: EventApprovalGranted, StepID: req.StepID, Tool: req.Tool, Request: req.ID, Approver: recorded.Approver, Replayed: true})
		return recorded, nil
	case err == nil && recorded.Status == Denied:
		return deny(recorded, recorded.Why, true)
	case err != nil && !errors.Is(err, ErrNoRecord):
		return Decision{}, fmt.Errorf("planexec: reading the approval record of step %s: %w", quote(req.StepID), err)
	}
	ev(Event{Kind: EventApprovalRequired, StepID: req.StepID, Tool: req.Tool, Request: req.ID, Detail: req.Why})
	dec, err := r.ex.cfg.Gate.RequestApproval(ctx, req)
	if err != nil {
		return Decision{}, fmt.Errorf("planexec: asking approval for step %s: %w", quote(req.StepID), err)
	}
	if dec.RequestID != req.ID {
		return deny(dec, "the decision names another record, so it clears nothing", false)
	}
	if dec.DecidedAt.IsZero() {
		dec.DecidedAt = now
	}
	switch dec.Status {
	case Approved:
		if dec.expired(now) {
			return deny(dec, "the decision had already expired", false)
		}
		if err := r.ex.approvals.SaveDecision(ctx, req.Tenant, dec); err != nil {
			if errors.Is(err, store.ErrDecided) && !retried {
				return r.recorded(ctx, req, ev) // another executor recorded one first: it stands
			}
			return Decision{}, fmt.Errorf("planexec: recording the approval of step %s: %w", quote(req.StepID), err)
		}
		ev(Event{Kind: EventApprovalGranted, StepID: req.StepID, Tool: req.Tool, Request: req.ID, Approver: dec.Approver})
		return dec, nil
	case Pending:
		ev(Event{Kind: EventApprovalPending, StepID: req.StepID, Tool: req.Tool, Request: req.ID})
		return dec, nil
	case Denied:
		if err := r.ex.approvals.SaveDecision(ctx, req.Tenant, dec); err != nil {
			if errors.Is(err, store.ErrDecided) && !retried {
				return r.recorded(ctx, req, ev)
			}
			return Decision{}, fmt.Errorf("planexec: recording the denial of step %s: %w", quote(req.StepID), err)
		}
		return deny(dec, dec.Why, false)
	default:
		return deny(dec, fmt.Sprintf("unknown decision status %q", dec.Status), false)
	}
}
