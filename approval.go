package planexec

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// ApprovalRequest asks a person to clear one step. It is bound to a record:
// RecordID digests the tenant, run, step, tool and ArgumentsDigest, so a
// decision for other arguments clears nothing.
type ApprovalRequest struct {
	RecordID string
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

// Grant returns a decision that clears this request.
func (r ApprovalRequest) Grant(approver string) ApprovalDecision {
	return ApprovalDecision{RecordID: r.RecordID, Status: ApprovalGranted, Approver: approver}
}

// Deny returns a decision that refuses this request.
func (r ApprovalRequest) Deny(approver, why string) ApprovalDecision {
	return ApprovalDecision{RecordID: r.RecordID, Status: ApprovalDenied, Approver: approver, Reason: why}
}

// Pending returns a decision that says the person has not decided yet.
func (r ApprovalRequest) Pending() ApprovalDecision {
	return ApprovalDecision{RecordID: r.RecordID, Status: ApprovalPending}
}

// ApprovalStatus is a decision's state.
type ApprovalStatus string

// Decision states.
const (
	ApprovalGranted ApprovalStatus = "granted"
	ApprovalDenied  ApprovalStatus = "denied"
	ApprovalPending ApprovalStatus = "pending"
)

// ApprovalDecision is a person's answer to one ApprovalRequest. It clears
// nothing unless RecordID is the request's.
type ApprovalDecision struct {
	RecordID  string         `json:"record_id"`
	Status    ApprovalStatus `json:"status"`
	Approver  string         `json:"approver,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	DecidedAt time.Time      `json:"decided_at"`
	// Expires ends a granted decision's effect; zero never expires. It is
	// checked again just before the step runs.
	Expires time.Time `json:"expires"`
}

func (d ApprovalDecision) expired(now time.Time) bool {
	return !d.Expires.IsZero() && !now.Before(d.Expires)
}

// ApprovalGate asks a person. It may block until they answer (a terminal
// prompt), or answer ApprovalPending at once and let the service collect the
// decision later (Executor.Decide), since a service cannot park a goroutine
// for hours waiting on a person.
type ApprovalGate interface {
	RequestApproval(ctx context.Context, req ApprovalRequest) (ApprovalDecision, error)
}

// ApprovalGateFunc adapts a function to ApprovalGate.
type ApprovalGateFunc func(ctx context.Context, req ApprovalRequest) (ApprovalDecision, error)

// RequestApproval calls f.
func (f ApprovalGateFunc) RequestApproval(ctx context.Context, req ApprovalRequest) (ApprovalDecision, error) {
	return f(ctx, req)
}

// ApprovalStore keeps decisions, so a resume never asks a person twice for
// the same bound record. Decisions are scoped by tenant.
type ApprovalStore interface {
	// Decision returns the decision recorded for recordID, or ErrNoRecord.
	Decision(ctx context.Context, tenant, recordID string) (ApprovalDecision, error)
	// SaveDecision records d, replacing an earlier decision for its record.
	SaveDecision(ctx context.Context, tenant string, d ApprovalDecision) error
}

// MemoryApprovalStore is an ApprovalStore in memory, for tests and
// single-process use. The zero value is ready to use.
type MemoryApprovalStore struct {
	mu sync.Mutex
	m  map[[2]string]ApprovalDecision
}

// Decision implements ApprovalStore.
func (s *MemoryApprovalStore) Decision(_ context.Context, tenant, recordID string) (ApprovalDecision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.m[[2]string{tenant, recordID}]
	if !ok {
		return ApprovalDecision{}, ErrNoRecord
	}
	return d, nil
}

// SaveDecision implements ApprovalStore.
func (s *MemoryApprovalStore) SaveDecision(_ context.Context, tenant string, d ApprovalDecision) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[[2]string]ApprovalDecision{}
	}
	s.m[[2]string{tenant, d.RecordID}] = d
	return nil
}
