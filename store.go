package planexec

import (
	"context"
	"encoding/json"
	"sync"
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
// database. When an executor's Plans and Idempotency are the same StepStore,
// it writes a step's claim and its record in one transaction, so there is no
// moment in which one is written and the other is not. The key's tenant
// scopes both.
type StepStore interface {
	PlanStore
	IdempotencyStore
	// CompleteStep does Complete and SaveStep at once: both or neither.
	CompleteStep(ctx context.Context, key Key, epoch int64, outcome json.RawMessage, runID string, rec StepRecord) error
	// ReleaseStep does Release and SaveStep at once: both or neither.
	ReleaseStep(ctx context.Context, key Key, epoch int64, inDoubt bool, runID string, rec StepRecord) error
}

// MemoryPlanStore is a PlanStore in memory: for tests and single-process use.
// It does not outlive the process. It keeps approval decisions too (it is an
// ApprovalStore), so executors that share it share decisions. The zero value
// is ready to use.
type MemoryPlanStore struct {
	mu   sync.Mutex
	runs map[[2]string]*PlanRecord
	MemoryApprovalStore
}

// SavePlan implements PlanStore.
func (s *MemoryPlanStore) SavePlan(_ context.Context, rec *PlanRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = map[[2]string]*PlanRecord{}
	}
	k := [2]string{rec.Tenant, rec.RunID}
	c := *rec
	c.Plan = clonePlan(rec.Plan)
	if old, ok := s.runs[k]; ok && old.Plan.ID == rec.Plan.ID {
		c.Steps = old.Steps
		c.Created = old.Created
	} else {
		c.Steps = map[string]StepRecord{}
	}
	s.runs[k] = &c
	return nil
}

// SaveStep implements PlanStore.
func (s *MemoryPlanStore) SaveStep(_ context.Context, tenant, runID string, step StepRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.runs[[2]string{tenant, runID}]
	if !ok {
		return ErrNoRecord
	}
	step.Outcome = append(json.RawMessage(nil), step.Outcome...)
	rec.Steps[step.StepID] = step
	if step.Finished.After(rec.Updated) {
		rec.Updated = step.Finished
	}
	return nil
}

// LoadPlan implements PlanStore.
func (s *MemoryPlanStore) LoadPlan(_ context.Context, tenant, runID string) (*PlanRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.runs[[2]string{tenant, runID}]
	if !ok {
		return nil, ErrNoRecord
	}
	c := *rec
	c.Plan = clonePlan(rec.Plan)
	c.Steps = make(map[string]StepRecord, len(rec.Steps))
	for id, st := range rec.Steps {
		st.Outcome = append(json.RawMessage(nil), st.Outcome...)
		c.Steps[id] = st
	}
	return &c, nil
}

// Forget implements PlanStore.
func (s *MemoryPlanStore) Forget(_ context.Context, tenant, runID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, [2]string{tenant, runID})
	return nil
}

func clonePlan(p Plan) Plan {
	c := p
	c.Steps = make([]Step, len(p.Steps))
	for i, s := range p.Steps {
		s.Arguments = append(json.RawMessage(nil), s.Arguments...)
		s.DependsOn = append([]string(nil), s.DependsOn...)
		c.Steps[i] = s
	}
	return c
}
