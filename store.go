package planexec

import (
	"context"
	"encoding/json"
	"time"

	"github.com/shopspring/decimal"
)

// PlanStatus is where a stored plan stands.
type PlanStatus string

// Plan states.
const (
	PlanRunning          PlanStatus = "running"
	PlanAwaitingApproval PlanStatus = "awaiting_approval"
	PlanCompleted        PlanStatus = "completed"
	PlanFailed           PlanStatus = "failed"
)

// StepStatus is where a stored step stands.
type StepStatus string

// Step states.
const (
	StepDone    StepStatus = "done"
	StepFailed  StepStatus = "failed"
	StepInDoubt StepStatus = "in_doubt" // an irreversible tool failed; its effect may have landed
)

// PlanRecordVersion is the version of the PlanRecord layout this package
// writes. Durable stores refuse records written by a newer version.
const PlanRecordVersion = 1

// PlanRecord is a plan as stored: the plan, where it stands, and each step
// that has finished.
type PlanRecord struct {
	Version int        `json:"version"`
	Tenant  string     `json:"tenant"`
	RunID   string     `json:"run_id"`
	Plan    Plan       `json:"plan"`
	Status  PlanStatus `json:"status"`
	// Steps holds the steps that finished or failed, by step id.
	Steps   map[string]StepRecord `json:"steps"`
	Created time.Time             `json:"created"`
	Updated time.Time             `json:"updated"`
}

// StepRecord is one step's result as stored.
type StepRecord struct {
	StepID string `json:"step_id"`
	// PlanID is the plan the step belongs to: a resume replays only the
	// records of the plan it resumes.
	PlanID   string          `json:"plan_id"`
	Tool     string          `json:"tool"`
	Status   StepStatus      `json:"status"`
	Outcome  json.RawMessage `json:"outcome,omitempty"`
	Replayed bool            `json:"replayed,omitempty"`
	// Key is the step's idempotency key digest, to resolve it by if it is
	// left in doubt.
	Key        string `json:"key"`
	ApprovedBy string `json:"approved_by,omitempty"`
	// Grant and Amount are the autonomy grant the step acted under and what
	// it put against the grant's ceiling.
	Grant    string          `json:"grant,omitempty"`
	Amount   decimal.Decimal `json:"amount,omitzero"`
	Error    string          `json:"error,omitempty"`
	Finished time.Time       `json:"finished"`
}

// PlanStore keeps plans and their step results, so a run that dies mid-plan
// can be resumed. The executor writes the plan before its first step and each
// step as it finishes. Every method is scoped by tenant: one tenant never
// sees another's runs.
type PlanStore interface {
	// SavePlan writes rec's plan and status (creating or replacing the run's
	// record). Its Steps are ignored: steps are written by SaveStep. When
	// rec.Plan.ID differs from the stored plan's, the run's step records are
	// dropped: they belonged to another plan.
	SavePlan(ctx context.Context, rec *PlanRecord) error
	// SaveStep records one step's result.
	SaveStep(ctx context.Context, tenant, runID string, step StepRecord) error
	// LoadPlan returns the run's record with its steps, or ErrNoRecord.
	LoadPlan(ctx context.Context, tenant, runID string) (*PlanRecord, error)
	// Forget removes the run's record and its steps. Forgetting a run that
	// has no record is not an error.
	Forget(ctx context.Context, tenant, runID string) error
}

// StepStore is a store that keeps plans and idempotency claims in one
// database. When an executor's store is a StepStore, it writes a step's claim
// and its record in one transaction, so there is no moment in which one is
// written and the other is not. The key's tenant scopes both.
type StepStore interface {
	PlanStore
	IdempotencyStore
	// CompleteStep does Complete and SaveStep at once: both or neither.
	CompleteStep(ctx context.Context, key Key, epoch int64, outcome json.RawMessage, runID string, rec StepRecord) error
	// ReleaseStep does Release and SaveStep at once: both or neither.
	ReleaseStep(ctx context.Context, key Key, epoch int64, inDoubt bool, runID string, rec StepRecord) error
}
