package planexec

import (
	"context"

	"github.com/planexec/planexec/store"
)

// PlanStore keeps plans and their step results, so a run that dies mid-plan
// can be resumed. The executor writes the plan before its first step and each
// step as it finishes. Every method is scoped by tenant: one tenant never
// sees another's runs. The records it exchanges, and what writing a store
// takes, are in package store.
type PlanStore interface {
	// SavePlan writes rec's plan and status (creating or replacing the run's
	// record). Its Steps are ignored: steps are written by SaveStep. When
	// rec.PlanID differs from the stored plan's, the run's step records are
	// dropped: they belonged to another plan.
	SavePlan(ctx context.Context, rec *store.PlanRecord) error
	// SaveStep records one step's result.
	SaveStep(ctx context.Context, tenant, runID string, step store.StepRecord) error
	// LoadPlan returns the run's record with its steps, or ErrNoRecord.
	LoadPlan(ctx context.Context, tenant, runID string) (*store.PlanRecord, error)
	// Forget removes the run's record and its steps. Forgetting a run that
	// has no record is not an error.
	Forget(ctx context.Context, tenant, runID string) error
}

// StepStatus is where a finished step stands, in a Result and in the store.
type StepStatus = store.StepStatus

// Step states.
const (
	StepDone    = store.StepDone
	StepFailed  = store.StepFailed
	StepInDoubt = store.StepInDoubt // an irreversible tool failed; its effect may have landed
)
