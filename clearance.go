package planexec

import (
	"encoding/json"
	"errors"
	"fmt"

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

// clearPlan decides, before any step runs, every step not finished that
// needs a grant or a person. It returns the first refusal or denial;
// pending decisions are collected into one *ApprovalPendingError.
//
// A step whose arguments hold references is decided when it is about to
// run (see gate.clear), on the values it will really run with; here it is
// only refused if its class is refused outright.
func (g *gate) clearPlan(finished []bool) error {
	v := g.v
	g.clr = make([]clearance, len(v.steps))
	var pending []ApprovalRequest
	for _, i := range v.order {
		if finished[i] {
			continue
		}
		s := &v.steps[i]
		if s.refs != nil {
			deferred, err := g.deferClearance(s)
			if err != nil {
				return err
			}
			g.clr[i].deferred = deferred
			continue
		}
		if needs, err := g.deferClearance(s); err != nil {
			return err
		} else if !needs {
			continue
		}
		if done, err := g.mayHaveActed(s); err != nil {
			return err
		} else if done {
			// Its key is done, in doubt or in flight: nobody is asked for
			// it now. Its claim decides, as it is about to run (a replay,
			// a doubt to resolve), and should the key be free again by
			// then, it is cleared then.
			g.clr[i].deferred = true
			continue
		}
		c, req, err := g.clearStep(s)
		if err != nil {
			return err
		}
		if req != nil {
			pending = append(pending, *req)
			continue
		}
		g.clr[i] = c
	}
	if pending != nil {
		return &ApprovalPendingError{RunID: g.d.RunID, Tenant: g.d.Tenant, Requests: pending}
	}
	return nil
}

// mayHaveActed peeks at the key of step s: true when an effect may already
// stand behind it (done, in doubt, or in flight), so that no person is
// asked to clear what has happened, or may have.
func (g *gate) mayHaveActed(s *vstep) (bool, error) {
	req := store.ClaimRequest{Key: s.key, RunID: g.d.RunID, StepID: s.step.ID, Tool: s.step.Tool, Holder: g.holder,
		TakeOver: !s.tool.contract.irreversible, PerTenant: s.tool.contract.perTenant, Peek: true}
	c, err := g.r.ex.st.Claim(g.ctx, req)
	if err != nil {
		return false, fmt.Errorf("planexec: reading the claim of step %s: %w", quote(s.step.ID), err)
	}
	return c.State != store.ClaimFree, nil
}

// deferClearance tells whether a step with references needs clearing when
// it is about to run, and refuses it now if its class is refused outright
// (the reserved class, or a grant that says never): what is refused
// outright is refused before anything runs.
func (g *gate) deferClearance(s *vstep) (bool, error) {
	id, tool := s.step.ID, s.step.Tool
	if l := g.r.ex.cfg.Ladder; l != nil {
		if c, ok := l.Classify(tool); ok {
			why := reservedWhy(c.Name)
			if why == "" {
				l.mu.Lock()
				gr := l.grantFor(g.d.Tenant, g.d.User, c.Name, g.now())
				l.mu.Unlock()
				if gr != nil && gr.Level == LevelNever {
					why = fmt.Sprintf("the grant forbids class %q", c.Name)
				}
			}
			if why != "" {
				g.ev(Event{Kind: EventAutonomyRefused, StepID: id, Tool: tool, Detail: why})
				return false, &AutonomyRefusedError{Step: id, Tool: tool, Class: c.Name, Tenant: g.d.Tenant, Why: why}
			}
			return true, nil
		}
	}
	return s.tool.contract.irreversible || s.tool.contract.approval, nil
}

// clearStep decides one step: under a grant (its amount added to g.inPlan),
// by a person's recorded or given decision, or pending (req is the request
// a person has yet to answer). A refusal or denial is the error. Callers
// clearing at dispatch hold g.mu.
func (g *gate) clearStep(s *vstep) (c clearance, req *ApprovalRequest, err error) {
	d, ex := g.d, g.r.ex
	id, tool := s.step.ID, s.step.Tool
	var why, class string
	var asked ladderDecision
	if ex.cfg.Ladder != nil {
		if cl, ok := ex.cfg.Ladder.Classify(tool); ok {
			class = cl.Name
			dec, err := ex.cfg.Ladder.decide(g.now(), d.Tenant, d.User, tool, s.args.canonical, g.inPlan, g.acted, g.spentWithin)
			if err != nil {
				return c, nil, err
			}
			switch dec.verdict {
			case verdictRefuse:
				g.ev(Event{Kind: EventAutonomyRefused, StepID: id, Tool: tool, Detail: dec.why})
				return c, nil, &AutonomyRefusedError{Step: id, Tool: tool, Class: class, Tenant: d.Tenant, Why: dec.why}
			case verdictEscalate:
				g.ev(Event{Kind: EventAutonomyEscalated, StepID: id, Tool: tool, Grant: grantID(dec.grant), Detail: dec.why})
				why, asked = "escalated by the autonomy ladder: "+dec.why, dec
			case verdictAct:
				g.ev(Event{Kind: EventAutonomyCleared, StepID: id, Tool: tool, Grant: dec.grant.ID, Level: dec.grant.Level})
				c.grant, c.class, c.amount = dec.grant, class, dec.amount
				g.inPlan[dec.grant.ID] = g.inPlan[dec.grant.ID].Add(dec.amount)
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
	if ex.cfg.Gate == nil {
		return c, nil, &ConfigurationError{Tool: tool, Why: "needs a person's approval but no approval gate is configured"}
	}
	request, err := g.approvalRequest(s, asked, why)
	if err != nil {
		return c, nil, err
	}
	decision, err := g.decision(request, false)
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

// approvalRequest is what a person is asked of step s: its id binds the
// tenant, run, plan, revision, round, step, tool and arguments, so that a
// decision clears this one effect and nothing else.
func (g *gate) approvalRequest(s *vstep, asked ladderDecision, why string) (ApprovalRequest, error) {
	d, p := g.d, &g.v.plan
	argsDigest, err := canonjson.Digest(json.RawMessage(s.args.canonical))
	if err != nil {
		return ApprovalRequest{}, err
	}
	recordID, err := canonjson.Digest(struct {
		Tenant   string `json:"tenant"`
		Run      string `json:"run"`
		Plan     string `json:"plan"`
		Revision int    `json:"revision"`
		Round    int    `json:"round"`
		Step     string `json:"step"`
		Tool     string `json:"tool"`
		Args     string `json:"arguments_digest"`
	}{d.Tenant, d.RunID, p.ID, p.Revision, p.Round, s.step.ID, s.step.Tool, argsDigest})
	if err != nil {
		return ApprovalRequest{}, err
	}
	return ApprovalRequest{
		ID: recordID, Tenant: d.Tenant, RunID: d.RunID, User: d.User, Agent: d.Agent,
		PlanID: p.ID, Revision: p.Revision, Round: p.Round, StepID: s.step.ID, Tool: s.step.Tool, Intent: s.step.Intent,
		Arguments: s.args.display(), ArgumentsDigest: argsDigest, Irreversible: s.tool.contract.irreversible,
		Class: asked.class, Grant: grantID(asked.grant), Amount: asked.amount, Currency: asked.currency, Why: why,
	}, nil
}

// decision finds the recorded decision for req or asks the gate, and
// returns a granted or pending decision, or the denial as an error. retried
// is true when a gate's answer could not be recorded because another's was
// first: that one is found instead.
func (g *gate) decision(req ApprovalRequest, retried bool) (Decision, error) {
	ex, ctx := g.r.ex, g.ctx
	now := g.now()
	deny := func(dec Decision, why string, replayed bool) (Decision, error) {
		g.ev(Event{Kind: EventApprovalDenied, StepID: req.StepID, Tool: req.Tool, Request: req.ID, Approver: dec.Approver, Replayed: replayed, Detail: why})
		return dec, &ApprovalDeniedError{Step: req.StepID, Tool: req.Tool, Request: req.ID, Approver: dec.Approver, Why: why}
	}
	recorded, err := ex.st.Decision(ctx, req.Tenant, req.ID)
	switch {
	case err == nil && recorded.Status == Approved && !recorded.Expired(now):
		g.ev(Event{Kind: EventApprovalGranted, StepID: req.StepID, Tool: req.Tool, Request: req.ID, Approver: recorded.Approver, Replayed: true})
		return recorded, nil
	case err == nil && recorded.Status == Denied:
		return deny(recorded, recorded.Why, true)
	case err != nil && !errors.Is(err, ErrNoRecord):
		return Decision{}, fmt.Errorf("planexec: reading the approval record of step %s: %w", quote(req.StepID), err)
	}
	g.ev(Event{Kind: EventApprovalRequired, StepID: req.StepID, Tool: req.Tool, Request: req.ID, Detail: req.Why})
	dec, err := ex.cfg.Gate.RequestApproval(ctx, req)
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
	case Approved, Denied:
		if dec.Status == Approved && dec.Expired(now) {
			return deny(dec, "the decision had already expired", false)
		}
		if err := ex.st.SaveDecision(ctx, req.Tenant, dec); err != nil {
			if errors.Is(err, store.ErrDecided) && !retried {
				return g.decision(req, true) // another's decision was recorded first: it stands
			}
			return Decision{}, fmt.Errorf("planexec: recording the decision on step %s: %w", quote(req.StepID), err)
		}
		if dec.Status == Denied {
			return deny(dec, dec.Why, false)
		}
		g.ev(Event{Kind: EventApprovalGranted, StepID: req.StepID, Tool: req.Tool, Request: req.ID, Approver: dec.Approver})
		return dec, nil
	case Pending:
		g.ev(Event{Kind: EventApprovalPending, StepID: req.StepID, Tool: req.Tool, Request: req.ID})
		return dec, nil
	default:
		return deny(dec, fmt.Sprintf("unknown decision status %q", dec.Status), false)
	}
}
