package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/shopspring/decimal"
)

// RunStatus is where a stored run stands. planexec.RunStatus is this type.
type RunStatus string

// Run states.
const (
	// RunRunning: an executor is running the plan.
	RunRunning RunStatus = "running"
	// RunAwaitingApproval: a person has yet to decide on a step (Waiting
	// names the requests); the run goes on when resumed after the decision.
	RunAwaitingApproval RunStatus = "awaiting_approval"
	// RunInDoubt: a step's effect may or may not have landed (Waiting names
	// its key); nothing runs until the key is resolved.
	RunInDoubt RunStatus = "in_doubt"
	// RunInterrupted: the run was stopped before it finished (its context
	// was cancelled) with nothing in doubt; resuming it goes on.
	RunInterrupted RunStatus = "interrupted"
	RunCompleted   RunStatus = "completed"
	// RunFailed: a step failed, or a person or the autonomy ladder refused
	// one.
	RunFailed RunStatus = "failed"
	// RunPlanning: a run of rounds whose last round ended; its planner is
	// asked for the next (the run goes on when Do is called again).
	RunPlanning RunStatus = "planning"
	// RunAwaitingReply: the planner of a run of rounds asked the person a
	// question; the run goes on with their reply.
	RunAwaitingReply RunStatus = "awaiting_reply"
	// RunAwaitingTool: a step of a tool its caller runs was handed back
	// (Waiting names the calls); the run goes on once the results are in.
	RunAwaitingTool RunStatus = "awaiting_tool"
)

// RunStatuses are the statuses a run record may hold, each once.
var RunStatuses = []RunStatus{RunRunning, RunAwaitingApproval, RunInDoubt, RunInterrupted, RunCompleted, RunFailed, RunPlanning, RunAwaitingReply,
	RunAwaitingTool}

// Wait is one thing a stopped run waits for: a person's decision on an
// approval request, or the resolution of a key in doubt.
type Wait struct {
	StepID  string `json:"step_id"`
	Tool    string `json:"tool"`
	Request string `json:"request,omitempty"` // the approval request's id
	Key     string `json:"key,omitempty"`     // the digest of the key in doubt
	Call    string `json:"call,omitempty"`    // the id of a tool call handed back to the caller
	// Detail is what is asked, as the executor wrote it (the approval
	// request, the call handed back), so that whoever answers later needs
	// nothing but the store. A store keeps it as it is.
	Detail json.RawMessage `json:"detail,omitempty"`
}

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

// PlanRecord is a run as stored: its plan, where it stands, what it waits
// for, the delegation it acts under, and each step that has finished.
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
	Status RunStatus
	// Waiting is what the run waits for, when it awaits approval or is in
	// doubt; nil otherwise.
	Waiting []Wait
	// Delegation is the delegation the run acts under, the JSON document
	// the executor wrote, so that any replica can pick the run up.
	Delegation json.RawMessage
	// Holder is the execution that saves the record, and holds the run
	// until LeaseExpires (moved on while it runs: Recoverer.ExtendRun); a
	// zero LeaseExpires lets the run go, and no holder is kept. A record
	// another holder keeps, its lease not run out, is not saved over:
	// SavePlan is ErrFenced. A running run whose lease ran out was left by
	// an execution that died: Recoverer.Stalled finds it.
	Holder       string
	LeaseExpires time.Time
	// Events are appended to the run's history in the same write, by a
	// store that keeps histories (EventStore.AppendEvents); LoadPlan leaves
	// them nil.
	Events []json.RawMessage
	// Steps holds the steps that finished or failed, by step id.
	Steps   map[string]StepRecord
	Created time.Time
	Updated time.Time
	// Update says the run was read from the store (or written by this
	// execution) before: SavePlan only replaces its record, and a run whose
	// record is gone is ErrNoRecord, never written back.
	Update bool
	// Rev numbers the record's saves: LoadPlan gives the stored one (1
	// after the first save). With Update, it is the revision the save is
	// based on (read, or last written by this execution): a record saved
	// since by anyone else is not saved over (ErrFenced). A save stores
	// rec.Rev+1 (1 for a record created); only SavePlan moves it.
	Rev int64
	// Create says the save makes the run's record: a record already
	// stored, whoever saved it, is ErrFenced and nothing is written. Of
	// executions creating one run at once, one does.
	Create bool
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

// StepWrite is one finished step's writes: its claim's end, its record and
// the events of the run's history up to it.
type StepWrite struct {
	Key   Key
	Epoch int64
	RunID string
	// Record is the step's record, saved as PlanStore.SaveStep saves it.
	Record StepRecord
	// Outcome is what CompleteStep records as the claim's outcome.
	Outcome json.RawMessage
	// InDoubt says ReleaseStep keeps the key in doubt instead of freeing it.
	InDoubt bool
	// Events are appended to the run's history as EventStore.AppendEvents
	// appends them, by a store that keeps histories.
	Events []json.RawMessage
}

// StepStore writes a step's claim, its record and the run's events up to it
// in one transaction, so there is no moment in which one is written and the
// others are not: the executor ends every step with it. The key's tenant
// scopes the writes. Each method fails with ErrFenced, writing nothing, when w.Epoch
// no longer holds the key, and with ErrNoRecord when the run has no plan
// record.
type StepStore interface {
	// CompleteStep does IdempotencyStore.Complete, PlanStore.SaveStep and
	// EventStore.AppendEvents at once: all or none.
	CompleteStep(ctx context.Context, w *StepWrite) error
	// ReleaseStep does IdempotencyStore.Release, PlanStore.SaveStep and
	// EventStore.AppendEvents at once: all or none.
	ReleaseStep(ctx context.Context, w *StepWrite) error
}

// EventRecord is one event of a run's history as stored.
type EventRecord struct {
	// Seq numbers the run's events from 1 in the order they were stored:
	// the store gives each event the next number as it appends it, so a
	// reader that has read up to Seq n misses nothing by asking for what
	// comes after n.
	Seq int64
	// Event is the event's JSON document as the executor wrote it.
	Event json.RawMessage
}

// EventStore is the capability of a store that keeps each run's history,
// so that it outlives the process and can be read from any replica. A run
// with no plan record may have a history (a run whose planning failed);
// PlanStore.Forget removes it with the run.
type EventStore interface {
	// AppendEvents appends events to the run's history, in order, numbered
	// on from its last.
	AppendEvents(ctx context.Context, tenant, runID string, events []json.RawMessage) error
	// Events returns up to limit of the run's events numbered after
	// `after`, in order; none (not an error) when there are no more, or
	// the run has no history.
	Events(ctx context.Context, tenant, runID string, after int64, limit int) ([]EventRecord, error)
}

// RunQuery asks for a page of a tenant's runs.
type RunQuery struct {
	// Statuses are the statuses to list; none lists every status.
	Statuses []RunStatus
	// AfterUpdated and AfterRunID continue a listing after the run they
	// name (the last of the previous page): runs are listed most recently
	// updated first, then by run id. Zero: from the start.
	AfterUpdated time.Time
	AfterRunID   string
	// Limit is the most runs to return; at least 1.
	Limit int
}

// RunSummary is a run as a listing shows it.
type RunSummary struct {
	RunID   string
	PlanID  string
	Status  RunStatus
	Waiting []Wait
	// LeaseExpires is the running run's lease (PlanRecord.LeaseExpires):
	// a running run whose lease ran out was left by an executor that died.
	LeaseExpires time.Time
	Created      time.Time
	Updated      time.Time
}

// RunLister is the capability of a store that lists a tenant's runs by
// status, fast however many runs the tenant has.
type RunLister interface {
	// ListRuns returns the tenant's runs that q asks for, in q's order.
	ListRuns(ctx context.Context, tenant string, q RunQuery) ([]RunSummary, error)
}
