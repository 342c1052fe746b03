package store

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

// StepStatus is where a stored step stands. planexec.StepStatus is this
// type: a step's result reports it too.
type StepStatus string

// Step states.
const (
	StepDone    StepStatus = "done"
	StepFailed  StepStatus = "failed"
	StepInDoubt StepStatus = "in_doubt" // an irreversible tool failed; its effect may have landed
)

// RecordVersion is the version of the PlanRecord and StepRecord layouts this
// package writes. Durable stores refuse records written by a newer version.
const RecordVersion = 1

// PlanRecord is a run's plan as stored: the plan, where it stands, and each
// step that has finished.
type PlanRecord struct {
	Version int
	Tenant  string
	RunID   string
	// PlanID is the id of the plan Plan holds. When a run saves a plan with
	// another id, the step records of the one before are dropped.
	PlanID string
	// Plan is the plan's JSON document as the executor wrote it (each
	// step's arguments byte for byte as its planner did). A store keeps it
	// as it is and gives it back as it was.
	Plan   json.RawMessage
	Status PlanStatus
	// Steps holds the steps that finished or failed, by step id.
	Steps   map[string]StepRecord
	Created time.Time
	Updated time.Time
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

// StepStore is the capability of a store that keeps plans and idempotency
// claims in one database: it writes a step's claim and its record in one
// transaction, so there is no moment in which one is written and the other
// is not. When the executor's store has it, the executor uses it for every
// finished step. The key's tenant scopes both writes.
type StepStore interface {
	// CompleteStep does IdempotencyStore.Complete and PlanStore.SaveStep at
	// once: both or neither.
	CompleteStep(ctx context.Context, key Key, epoch int64, outcome json.RawMessage, runID string, rec StepRecord) error
	// ReleaseStep does IdempotencyStore.Release and PlanStore.SaveStep at
	// once: both or neither.
	ReleaseStep(ctx context.Context, key Key, epoch int64, inDoubt bool, runID string, rec StepRecord) error
}
