package planexec

import (
	"context"
	"encoding/json"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/store"
)

// ApprovalRequest asks a person to clear one step: one effect of one plan
// of one round. Its ID digests the tenant, run, plan, revision, round, step,
// tool and ArgumentsDigest, so a decision clears that effect and nothing
// else: the same step asked for in a later round is asked again.
type ApprovalRequest struct {
	ID       string `json:"id"`
	Tenant   string `json:"tenant"`
	RunID    string `json:"run_id"`
	User     string `json:"user,omitempty"`
	Agent    string `json:"agent,omitempty"`
	PlanID   string `json:"plan_id"`
	Revision int    `json:"revision"`
	Round    int    `json:"round,omitempty"`
	StepID   string `json:"step_id"`
	Tool     string `json:"tool"`
	Intent   string `json:"intent,omitempty"`
	// Arguments are the validated arguments (references resolved) as
	// canonical JSON, for showing to the person deciding, except that a
	// decimal keeps the scale it was written with ("412.50", where
	// ArgumentsDigest digests 412.5). They came from the model: keep them
	// out of logs.
	Arguments       json.RawMessage `json:"arguments"`
	ArgumentsDigest string          `json:"arguments_digest"`
	Irreversible    bool            `json:"irreversible,omitempty"`
	// Class is the autonomy class of the step's tool, if any; Grant the
	// grant that escalated it (past its ceiling, say), if one did; Amount
	// and Currency what the step would count against a ceiling.
	Class    string          `json:"class,omitempty"`
	Grant    string          `json:"grant,omitempty"`
	Amount   decimal.Decimal `json:"amount,omitzero"`
	Currency string          `json:"currency,omitempty"`
	// Why says why a person is asked.
	Why string `json:"why"`
}

// document is the request as a run waiting for it stores it.
func (r *ApprovalRequest) document() json.RawMessage {
	b, _ := json.Marshal(r) // strings, numbers and JSON checked by validation: it cannot fail
	return b
}

// Approve returns a decision that clears this request.
func (r ApprovalRequest) Approve(approver string) Decision {
	return Decision{RequestID: r.ID, Status: Approved, Approver: approver}
}

// Deny returns a decision that refuses this request.
func (r ApprovalRequest) Deny(approver, why string) Decision {
	return Decision{RequestID: r.ID, Status: Denied, Approver: approver, Why: why}
}

// Defer returns a decision that says the person has not decided yet.
func (r ApprovalRequest) Defer() Decision {
	return Decision{RequestID: r.ID, Status: Pending}
}

// DecisionStatus is where a person's decision stands.
type DecisionStatus = store.DecisionStatus

// Decision states.
const (
	Approved = store.Approved
	Denied   = store.Denied
	Pending  = store.Pending
)

// Decision is a person's answer to one ApprovalRequest. It clears nothing
// unless RequestID is the request's, and the first decision on a request
// stands.
type Decision = store.Decision

// ApprovalGate asks a person. It may block until they answer (a terminal
// prompt), or answer Pending at once and let the service collect the decision
// later (Run.Decide), since a service cannot park a goroutine for hours
// waiting on a person.
type ApprovalGate interface {
	RequestApproval(ctx context.Context, req ApprovalRequest) (Decision, error)
}

// ApprovalGateFunc adapts a function to ApprovalGate.
type ApprovalGateFunc func(ctx context.Context, req ApprovalRequest) (Decision, error)

// RequestApproval calls f.
func (f ApprovalGateFunc) RequestApproval(ctx context.Context, req ApprovalRequest) (Decision, error) {
	return f(ctx, req)
}

// DecideLater is the gate of a service in which people decide when they
// can, not while a run waits: it answers every request pending. The run
// stops awaiting approval (an *ApprovalPendingError, and RunAwaitingApproval
// in the store, with the requests in RunInfo.Waiting); record each decision
// with Run.Decide and go on with Run.Resume.
var DecideLater ApprovalGate = ApprovalGateFunc(func(_ context.Context, req ApprovalRequest) (Decision, error) {
	return req.Defer(), nil
})
