package planexec

import (
	"encoding/json"
	"slices"
	"strconv"
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
	EventApprovalRequired  EventKind = "APPROVAL_REQUIRED"  // a person is asked (Request)
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

	// A run of rounds (Run.Do) records these too; its other events carry
	// the round they belong to.
	EventRoundStarted   EventKind = "ROUND_STARTED"   // the planner is asked for the round's plan
	EventRoundCompleted EventKind = "ROUND_COMPLETED" // the round's steps ended; their outcomes go back to the planner
	EventQuestionAsked  EventKind = "QUESTION_ASKED"  // the planner asked the person; the run waits for the reply
	EventReplied        EventKind = "REPLIED"         // the person replied; the run goes on
	EventAnswered       EventKind = "ANSWERED"        // the planner answered the task; the run ends (Detail: at the bound)

	// A step of a tool its caller runs (NewClientTool).
	EventToolCallHandedBack  EventKind = "TOOL_CALL_HANDED_BACK" // the step's call is handed back to the caller (Call)
	EventToolResultSubmitted EventKind = "TOOL_RESULT_SUBMITTED" // the caller gave the call's result (Call)
)

// Event is one entry of the record. Fields that do not apply are zero, and
// are left out of its JSON form, which is how a store keeps it.
type Event struct {
	// Seq numbers the run's events from 1, in the order they happened (in
	// a history read from the store: in the order they were stored).
	Seq      int64     `json:"seq,omitzero"`
	Kind     EventKind `json:"kind"`
	Time     time.Time `json:"time"`
	RunID    string    `json:"run_id"`
	Tenant   string    `json:"tenant"`
	PlanID   string    `json:"plan_id,omitempty"`
	Revision int       `json:"revision,omitempty"`
	// Round is the round of a run of rounds the event belongs to.
	Round  int    `json:"round,omitempty"`
	StepID string `json:"step_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Reason is the refusal reason, for PLAN_REFUSED.
	Reason Reason `json:"reason,omitempty"`
	// Attempt is the planning attempt, for planning events.
	Attempt int `json:"attempt,omitempty"`
	// Usage is what the model call cost, for planning events; Model and
	// RequestID name the model that answered and the provider's id for the
	// call, where the provider reports them.
	Usage     *llm.Usage `json:"usage,omitempty"`
	Model     string     `json:"model,omitempty"`
	RequestID string     `json:"request_id,omitempty"`
	// Request is the approval request's id, for approval events.
	Request string `json:"request,omitempty"`
	// Call is the id of a tool call handed back, for TOOL_ events.
	Call     string `json:"call,omitempty"`
	Approver string `json:"approver,omitempty"`
	// Grant and Level name the autonomy grant, for AUTONOMY_ events.
	Grant string `json:"grant,omitempty"`
	Level Level  `json:"level,omitempty"`
	// Replayed marks an outcome or decision taken from the record instead of
	// being produced again.
	Replayed bool `json:"replayed,omitempty"`
	// Duration is how long the tool ran, for STEP_EXECUTED and STEP_FAILED.
	Duration time.Duration `json:"duration,omitempty"`
	// Detail is a short explanation (why a step escalated, how it failed).
	// It never contains argument values.
	Detail string `json:"detail,omitempty"`
	// Outcome is what the step returned, for STEP_EXECUTED of a step that
	// ran now: for observers and Run.Events (a server showing progress),
	// never in an event's JSON form or a stored history.
	Outcome json.RawMessage `json:"-"`
}

// appendEvent appends e's JSON form, as encoding/json writes it without
// HTML escaping, to b: the document a store keeps (with no seq: the store
// numbers what it keeps).
func appendEvent(b []byte, e *Event) []byte {
	b = append(b, '{')
	if e.Seq != 0 {
		b = append(b, `"seq":`...)
		b = strconv.AppendInt(b, e.Seq, 10)
		b = append(b, ',')
	}
	b = append(b, `"kind":`...)
	b = appendJSONString(b, string(e.Kind))
	b = append(b, `,"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","run_id":`...)
	b = appendJSONString(b, e.RunID)
	b = append(b, `,"tenant":`...)
	b = appendJSONString(b, e.Tenant)
	str := func(name, v string) {
		if v != "" {
			b = append(b, ',', '"')
			b = append(b, name...)
			b = append(b, '"', ':')
			b = appendJSONString(b, v)
		}
	}
	num := func(name string, v int64) {
		if v != 0 {
			b = append(b, ',', '"')
			b = append(b, name...)
			b = append(b, '"', ':')
			b = strconv.AppendInt(b, v, 10)
		}
	}
	str("plan_id", e.PlanID)
	num("revision", int64(e.Revision))
	num("round", int64(e.Round))
	str("step_id", e.StepID)
	str("tool", e.Tool)
	str("reason", string(e.Reason))
	num("attempt", int64(e.Attempt))
	if u := e.Usage; u != nil {
		b = append(b, `,"usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, u.InputTokens, 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, u.OutputTokens, 10)
		b = append(b, `,"calls":`...)
		b = strconv.AppendInt(b, u.Calls, 10)
		b = append(b, '}')
	}
	str("model", e.Model)
	str("request_id", e.RequestID)
	str("request", e.Request)
	str("call", e.Call)
	str("approver", e.Approver)
	str("grant", e.Grant)
	str("level", string(e.Level))
	if e.Replayed {
		b = append(b, `,"replayed":true`...)
	}
	num("duration", int64(e.Duration))
	str("detail", e.Detail)
	return append(b, '}')
}

// Observer sees each event as it happens, in the order of the run's record.
// It is called outside the executor's locks, one event at a time per run: it
// may read the run (Run.Events, Run.Usage) and even act on it; an event such
// an act records is delivered after the observer returns. While steps run at
// once, whichever goroutine is delivering hands over the events the others
// record, so an observer may run on another step's goroutine and lag a little
// behind the steps; a slow observer slows the run.
type Observer func(Event)

// record is one run's ordered event log. Events are appended under mu and
// handed to the observers outside it, in order: whoever appends while no one
// is delivering becomes the deliverer and drains what is queued.
type record struct {
	mu         sync.Mutex
	events     []Event
	delivered  int  // events[:delivered] have been handed to the observers
	delivering bool // some goroutine is draining events[delivered:]
	observers  []Observer
	now        func() time.Time
}

// emit records e, stamped with its sequence number and, unless it has one,
// the time, and returns that time. e is copied: the caller's may be reused.
func (r *record) emit(e *Event) time.Time {
	r.mu.Lock()
	e.Seq = int64(len(r.events) + 1)
	if e.Time.IsZero() {
		e.Time = r.now()
	}
	r.events = append(r.events, *e)
	if len(r.observers) == 0 || r.delivering {
		r.mu.Unlock()
		return e.Time
	}
	r.delivering = true
	var next Event
	for r.delivered < len(r.events) {
		next = r.events[r.delivered]
		r.delivered++
		r.mu.Unlock()
		r.deliver(&next)
		r.mu.Lock()
	}
	r.delivering = false
	r.mu.Unlock()
	return e.Time
}

// deliver hands e to each observer. A panicking observer is a bug in the
// caller's code and panics on; the record stays usable.
func (r *record) deliver(e *Event) {
	for _, o := range r.observers {
		func() {
			defer func() {
				if p := recover(); p != nil {
					r.mu.Lock()
					r.delivering = false
					r.mu.Unlock()
					panic(p)
				}
			}()
			o(*e)
		}()
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
	return slices.Clone(r.events)
}
