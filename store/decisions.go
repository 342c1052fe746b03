package store

import (
	"context"
	"time"
)

// DecisionStatus is where a person's decision stands. planexec.DecisionStatus
// is this type.
type DecisionStatus string

// Decision states.
const (
	Approved DecisionStatus = "approved"
	Denied   DecisionStatus = "denied"
	Pending  DecisionStatus = "pending"
)

// Decision is a person's answer to one approval request. planexec.Decision
// is this type. It clears nothing unless RequestID is the request's.
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

// Expired reports whether an approval has ended at now.
func (d Decision) Expired(now time.Time) bool {
	return !d.Expires.IsZero() && !now.Before(d.Expires)
}

// Stands reports whether d, recorded, still decides its request at now: a
// denial always does, an approval until it expires.
func (d Decision) Stands(now time.Time) bool {
	return d.Status == Denied || (d.Status == Approved && !d.Expired(now))
}

// Keeps reports whether d, recorded, stays recorded when next is saved for
// its request: the rule of ApprovalStore.SaveDecision. The first decision
// stands; only an approval that expired before next was made gives way.
func (d Decision) Keeps(next Decision) bool {
	return d.Stands(next.DecidedAt)
}

// ApprovalStore keeps people's decisions, scoped by tenant, so that a
// resume never asks twice and two people deciding at once cannot both win.
type ApprovalStore interface {
	// Decision returns the decision recorded for requestID, or ErrNoRecord.
	Decision(ctx context.Context, tenant, requestID string) (Decision, error)
	// SaveDecision records d for its request unless the decision recorded
	// for it keeps its place (Decision.Keeps): then it is ErrDecided and
	// nothing changes. The check and the write are one atomic step: of
	// two people deciding one request at once, the first decision stands.
	SaveDecision(ctx context.Context, tenant string, d Decision) error
}
