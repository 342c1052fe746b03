package planexec

import (
	"slices"
	"sync"
	"time"

	"github.com/planexec/planexec/llm"
)

// EventKind names what happened. A plan that was refused is as much a part of
// the run's history as one that ran.
type EventKind string

// The events an executor records, in the order a run produces them.
const (
	EventPlanned           EventKind = "PLANNED"            // a plan passed validation
	EventPlanRefused       EventKind = "PLAN_REFUSED"       // a plan failed validation (Reason says why)
	EventReplanned         EventKind = "REPLANNED"          // the planner is asked again, with the refusal as feedback
	EventAutonomyCleared   EventKind = "AUTONOMY_CLEARED"   // the ladder cleared a step to act under a grant (Grant, Level)
	EventAutonomyEscalated EventKind = "AUTONOMY_ESCALATED" // the ladder sent a step to the approval gate
	EventAutonomyRefused   EventKind = "AUTONOMY_REFUSED"   // the ladder refused a step; nothing runs
	EventApprovalRequired  EventKind = "APPROVAL_REQUIRED"  // a person is asked (RecordID)
	EventApprovalGranted   EventKind = "APPROVAL_GRANTED"   // cleared by Approver (Replayed: from a recorded decision)
	EventApprovalDenied    EventKind = "APPROVAL_DENIED"    // not cleared; nothing runs
	EventApprovalPending   EventKind = "APPROVAL_PENDING"   // the decision is not made yet; the plan is stored
	EventPlanResumed       EventKind = "PLAN_RESUMED"       // a stored plan is picked up again
	EventStepStarted       EventKind = "STEP_STARTED"       // a tool is about to be called
	EventStepExecuted      EventKind = "STEP_EXECUTED"      // a step finished (Replayed: its outcome came from the record)
	EventAutonomyReported  EventKind = "AUTONOMY_REPORTED"  // a step acted under an act_and_report grant: the report
	EventStepFailed        EventKind = "STEP_FAILED"        // a step failed or was stopped before it ran (Detail says which)
	EventPlanCompleted     EventKind = "PLAN_COMPLETED"     // every step finished
	EventPlanFailed        EventKind = "PLAN_FAILED"        // the run stopped with an error
)

// Event is one entry of the record. Fields that do not apply are zero.
type Event struct {
	// Seq numbers the executor's events from 1, in the order they happened.
	Seq      int64
	Kind     EventKind
	Time     time.Time
	RunID    string
	Tenant   string
	PlanID   string
	Revision int
	StepID   string
	Tool     string
	// Reason is the refusal reason, for PLAN_REFUSED.
	Reason Reason
	// Attempt is the planning attempt, for planning events.
	Attempt int
	// Usage is what the model call cost, for planning events; Model and
	// RequestID name the model that answered and the provider's id for the
	// call, where the provider reports them.
	Usage     *llm.Usage
	Model     string
	RequestID string
	// RecordID is the approval record, for approval events.
	RecordID string
	Approver string
	// Grant and Level name the autonomy grant, for AUTONOMY_ events.
	Grant string
	Level Level
	// Replayed marks an outcome or decision taken from the record instead of
	// being produced again.
	Replayed bool
	// Duration is how long the tool ran, for STEP_EXECUTED and STEP_FAILED.
	Duration time.Duration
	// Detail is a short explanation (why a step escalated, how it failed).
	// It never contains argument values.
	Detail string
}

// Observer sees each event as it happens, in order. It is called
// synchronously while the executor holds its record lock: keep it quick and do
// not call back into the executor.
type Observer func(Event)

// record is the executor's ordered event log.
type record struct {
	mu       sync.Mutex
	events   []Event
	observer Observer
	now      func() time.Time
}

func (r *record) emit(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Seq = int64(len(r.events) + 1)
	if e.Time.IsZero() {
		e.Time = r.now()
	}
	r.events = append(r.events, e)
	if r.observer != nil {
		r.observer(e)
	}
}

// reserve makes room for n more events, so a run does not regrow the log.
func (r *record) reserve(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = slices.Grow(r.events, n)
}

func (r *record) snapshot() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Event, len(r.events))
	copy(out, r.events)
	return out
}
