package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/internal/canonjson"
)

// clearance is how one step was cleared to run.
type clearance struct {
	decision *ApprovalDecision // a person's, when one cleared it
	grant    *Grant            // the autonomy grant it acts under, as cleared
	class    string            // the grant's action class
	amount   decimal.Decimal   // what it counts against the grant
}

// clear decides, before any step runs, every step that needs a grant or a
// person. It returns the first refusal or denial; pending decisions are
// collected into one *ApprovalPendingError.
//
// acted holds what the plan's finished steps put against each grant.
func (ex *Executor) clear(ctx context.Context, v *vplan, finished []bool, acted map[string]decimal.Decimal, ev func(Event)) ([]clearance, error) {
	d := &ex.cfg.Delegation
	clr := make([]clearance, len(v.steps))
	inPlan := map[string]decimal.Decimal{}
	var pending []ApprovalRequest
	for _, i := range v.order {
		if finished[i] {
			continue
		}
		s := &v.steps[i]
		id, tool := s.step.ID, s.step.Tool
		var why, class string
		if ex.cfg.Ladder != nil {
			if c, ok := ex.cfg.Ladder.Classify(tool); ok {
				class = c.Name
				dec := ex.cfg.Ladder.decide(d.Tenant, d.User, tool, s.args.canonical, inPlan, acted)
				switch dec.verdict {
				case verdictRefuse:
					ev(Event{Kind: EventAutonomyRefused, StepID: id, Tool: tool, Detail: dec.why})
					return nil, &AutonomyRefusedError{Step: id, Tool: tool, Class: class, Tenant: d.Tenant, Why: dec.why}
				case verdictEscalate:
					ev(Event{Kind: EventAutonomyEscalated, StepID: id, Tool: tool, Grant: grantID(dec.grant), Detail: dec.why})
					why = "escalated by the autonomy ladder: " + dec.why
				case verdictAct:
					ev(Event{Kind: EventAutonomyCleared, StepID: id, Tool: tool, Grant: dec.grant.ID, Level: dec.grant.Level})
					clr[i].grant, clr[i].class, clr[i].amount = dec.grant, class, dec.amount
					inPlan[dec.grant.ID] = inPlan[dec.grant.ID].Add(dec.amount)
					continue
				}
			}
		}
		if why == "" {
			switch {
			case s.entry.contract.irreversible:
				why = "the tool is irreversible"
			case s.entry.ask:
				why = "the agent requires approval for this tool"
			default:
				continue
			}
		}
		if ex.cfg.Gate == nil {
			return nil, &ConfigurationError{Tool: tool, Problem: "needs a person's approval but no approval gate is configured"}
		}
		req, err := ex.approvalRequest(v, s, class, why)
		if err != nil {
			return nil, err
		}
		decision, err := ex.decision(ctx, req, ev)
		if err != nil {
			return nil, err
		}
		if decision.Status == ApprovalPending {
			pending = append(pending, req)
			continue
		}
		clr[i].decision = &decision
	}
	if pending != nil {
		return nil, &ApprovalPendingError{RunID: d.RunID, Tenant: d.Tenant, Requests: pending}
	}
	return clr, nil
}

func grantID(g *Grant) string {
	if g == nil {
		return ""
	}
	return g.ID
}

func (ex *Executor) approvalRequest(v *vplan, s *vstep, class, why string) (ApprovalRequest, error) {
	d := &ex.cfg.Delegation
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
		RecordID: recordID, Tenant: d.Tenant, RunID: d.RunID, User: d.User, Agent: ex.cfg.Agent.Name,
		PlanID: v.plan.ID, Revision: v.plan.Revision, StepID: s.step.ID, Tool: s.step.Tool, Intent: s.step.Intent,
		Arguments: s.args.display(), ArgumentsDigest: argsDigest, Irreversible: s.entry.contract.irreversible,
		Class: class, Why: why,
	}, nil
}

// decision finds the recorded decision for req or asks the gate, and returns
// a granted or pending decision, or the denial as an error.
func (ex *Executor) decision(ctx context.Context, req ApprovalRequest, ev func(Event)) (ApprovalDecision, error) {
	now := ex.cfg.Now()
	deny := func(dec ApprovalDecision, why string, replayed bool) (ApprovalDecision, error) {
		ev(Event{Kind: EventApprovalDenied, StepID: req.StepID, Tool: req.Tool, RecordID: req.RecordID, Approver: dec.Approver, Replayed: replayed, Detail: why})
		return dec, &ApprovalDeniedError{Step: req.StepID, Tool: req.Tool, RecordID: req.RecordID, Approver: dec.Approver, Why: why}
	}
	recorded, err := ex.approvals.Decision(ctx, req.Tenant, req.RecordID)
	switch {
	case err == nil && recorded.Status == ApprovalGranted && !recorded.expired(now):
		ev(Event{Kind: EventApprovalGranted, StepID: req.StepID, Tool: req.Tool, RecordID: req.RecordID, Approver: recorded.Approver, Replayed: true})
		return recorded, nil
	case err == nil && recorded.Status == ApprovalDenied:
		return deny(recorded, recorded.Reason, true)
	case err != nil && !errors.Is(err, ErrNoRecord):
		return ApprovalDecision{}, fmt.Errorf("planexec: reading the approval record of step %s: %w", quote(req.StepID), err)
	}
	ev(Event{Kind: EventApprovalRequired, StepID: req.StepID, Tool: req.Tool, RecordID: req.RecordID, Detail: req.Why})
	dec, err := ex.cfg.Gate.RequestApproval(ctx, req)
	if err != nil {
		return ApprovalDecision{}, fmt.Errorf("planexec: asking approval for step %s: %w", quote(req.StepID), err)
	}
	if dec.RecordID != req.RecordID {
		return deny(dec, "the decision names another record, so it clears nothing", false)
	}
	if dec.DecidedAt.IsZero() {
		dec.DecidedAt = now
	}
	switch dec.Status {
	case ApprovalGranted:
		if dec.expired(now) {
			return deny(dec, "the decision had already expired", false)
		}
		if err := ex.approvals.SaveDecision(ctx, req.Tenant, dec); err != nil {
			return ApprovalDecision{}, fmt.Errorf("planexec: recording the approval of step %s: %w", quote(req.StepID), err)
		}
		ev(Event{Kind: EventApprovalGranted, StepID: req.StepID, Tool: req.Tool, RecordID: req.RecordID, Approver: dec.Approver})
		return dec, nil
	case ApprovalPending:
		ev(Event{Kind: EventApprovalPending, StepID: req.StepID, Tool: req.Tool, RecordID: req.RecordID})
		return dec, nil
	case ApprovalDenied:
		if err := ex.approvals.SaveDecision(ctx, req.Tenant, dec); err != nil {
			return ApprovalDecision{}, fmt.Errorf("planexec: recording the denial of step %s: %w", quote(req.StepID), err)
		}
		return deny(dec, dec.Reason, false)
	default:
		return deny(dec, fmt.Sprintf("unknown decision status %q", dec.Status), false)
	}
}
