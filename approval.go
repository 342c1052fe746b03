package planexec

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/planexec/planexec/store"
)

// ApprovalRequest asks a person to clear one step. Its ID digests the tenant,
// run, step, tool and ArgumentsDigest, so a decision for other arguments
// clears nothing.
type ApprovalRequest struct {
	ID       string
	Tenant   string
	RunID    string
	User     string
	Agent    string
	PlanID   string
	Revision int
	StepID   string
	Tool     string
	Intent   string
	// Arguments are the validated arguments as canonical JSON, for showing to
	// the person deciding, except that a decimal keeps the scale it was
	// written with ("412.50", where ArgumentsDigest digests 412.5). They came
	// from the model: keep them out of logs.
	Arguments       json.RawMessage
	ArgumentsDigest string
	Irreversible    bool
	// Class is the autonomy class that escalated the step, if any.
	Class string
	// Why says why a person is asked.
	Why string
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
type DecisionStatus string

// Decision states.
const (
	Approved DecisionStatus = "approved"
	Denied   DecisionStatus = "denied"
	Pending  DecisionStatus = "pending"
)

// Decision is a person's answer to one ApprovalRequest. It clears nothing
// unless RequestID is the request's.
type Decision struct {
	RequestID string         `json:"request_id"`
	Status    DecisionStatus `json:"status"`
	Approver  string         `json:"approver,omitempty"`
	// Why is the person's reason, for a denial.
	Why       string    `json:"why,omitempty"`
	DecidedAt time.Time `json:"decided_at"`
	// Expires ends an approval's effect; zero never expires. It is checked
	// again just before the step runs.
	Expires time.Time `json:"expires"`
}

func (d Decision) expired(now time.Time) bool {
	return !d.Expires.IsZero() && !now.Before(d.Expires)
}

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

// ApprovalStore keeps decisions, so a resume never asks a person twice for
// the same request. Decisions are scoped by tenant. A store that keeps plans
// keeps decisions too by implementing it.
type ApprovalStore interface {
	// Decision returns the decision recorded for requestID, or ErrNoRecord.
	Decision(ctx context.Context, tenant, requestID string) (Decision, error)
	// SaveDecision records d for its request, unless the decision
	// recorded for it settles the request already: a denial, or, when d
	// approves, an approval that has not expired at d.DecidedAt. That is
	// store.ErrDecided, and nothing changes: of two people deciding one
	// request at once, the first decision recorded stands. A denial may
	// replace an approval (it is withdrawn: a step not yet run will not),
	// and any decision replaces an approval that expired.
	SaveDecision(ctx context.Context, tenant string, d Decision) error
}

// Stands reports whether d, recorded, still decides its request at now: a
// denial always does, an approval until it expires.
func (d Decision) Stands(now time.Time) bool {
	return d.Status == Denied || (d.Status == Approved && !d.expired(now))
}

// Keeps reports whether d, recorded, stays recorded when next is saved for
// its request: the rule of ApprovalStore.SaveDecision, for those who write
// a store.
func (d Decision) Keeps(next Decision) bool {
	return d.Status == Denied || (d.Status == Approved && next.Status == Approved && !d.expired(next.DecidedAt))
}

// decisions is where an executor whose store keeps no decisions keeps them:
// in memory, for the life of the executor.
type decisions struct {
	mu sync.Mutex
	m  map[[2]string]Decision
}

func (s *decisions) Decision(_ context.Context, tenant, requestID string) (Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.m[[2]string{tenant, requestID}]
	if !ok {
		return Decision{}, ErrNoRecord
	}
	return d, nil
}

func (s *decisions) SaveDecision(_ context.Context, tenant string, d Decision) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[[2]string]Decision{}
	}
	k := [2]string{tenant, d.RequestID}
	if prev, ok := s.m[k]; ok && prev.Keeps(d) {
		return store.ErrDecided
	}
	s.m[k] = d
	return nil
}
