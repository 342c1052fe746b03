package planexec

// The error taxonomy is described in the package documentation (doc.go),
// where godoc shows it.

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/planexec/planexec/store"
)

// ErrNotApplied, wrapped in an error a tool returns, promises that the tool's
// effect did not happen: the request was refused before it reached anything
// that could act on it. Like database/sql/driver.ErrBadConn, return it only
// when that is certain. Without it, the failure of an irreversible step leaves
// its idempotency key in doubt, and the step is not run again.
var ErrNotApplied = errors.New("planexec: effect not applied")

// ErrNoRecord reports that a store holds no record for the tenant and key or
// run asked for. One tenant asking for another's run gets this too.
var ErrNoRecord = store.ErrNoRecord

// ErrCompleted reports an attempt to resolve a key whose effect is already
// recorded as done: resolving it again could only undo that record and let
// the effect run twice.
var ErrCompleted = store.ErrCompleted

// ErrInFlight reports a step whose key a live holder has in flight: its
// outcome is about to be known. Wait and try again; do not resolve it.
// An *IndeterminateOutcomeError for such a step matches it with errors.Is,
// and so does an attempt to resolve its key.
var ErrInFlight = store.ErrInFlight

// ErrInDoubt reports a step whose effect may or may not have landed: an
// irreversible tool failed without promising ErrNotApplied, or its holder
// vanished. It does not run again until someone who knows resolves its key
// (Run.Resolve). An *IndeterminateOutcomeError for such a step matches it
// with errors.Is.
var ErrInDoubt = errors.New("planexec: outcome in doubt")

// ErrRunBusy reports a run asked to execute while it is already executing,
// on this Run or by another execution, on any replica, that holds the run
// in the store: one execution of a run at a time.
var ErrRunBusy = errors.New("planexec: the run is already executing")

// ErrNoOutcome reports a step that has no outcome to read: it did not finish.
var ErrNoOutcome = errors.New("planexec: the step has no outcome")

// ErrNotPending reports a decision for a request the run does not await:
// of another run or tenant, never made, or already decided.
var ErrNotPending = errors.New("planexec: no such request pending")

// ErrStepTimeout is the cause of a tool call's context done at
// Config.StepTimeout, and wraps the error of a step that ran out of time.
var ErrStepTimeout = errors.New("planexec: the step ran out of time")

// ErrInvalidDecision reports a decision that cannot be recorded (it names no
// request, or is neither approved nor denied), or a tool result or reply
// that cannot (not one JSON document, too large).
var ErrInvalidDecision = errors.New("planexec: invalid decision")

// Reason says why a plan was refused. A Reason is also an error, so
// errors.Is(err, planexec.ReasonCycle) tells whether err is a refusal for a
// cycle.
type Reason string

// The reasons a plan is refused, in the order validation checks them.
const (
	// ReasonEmpty: the planning run produced no plan at all, or one with no steps.
	ReasonEmpty Reason = "empty"
	// ReasonMalformed: the planner's output is not a Plan (not JSON, wrong
	// shape, unknown fields, a step without a usable id).
	ReasonMalformed Reason = "malformed"
	// ReasonTooLong: more steps than Limits.MaxSteps. Refused, never truncated.
	ReasonTooLong Reason = "too_long"
	// ReasonDuplicateID: two steps share an id.
	ReasonDuplicateID Reason = "duplicate_id"
	// ReasonUnknownTool: the registry has no such tool.
	ReasonUnknownTool Reason = "unknown_tool"
	// ReasonNotAllowed: the run's delegated scope does not include the tool.
	ReasonNotAllowed Reason = "not_allowed"
	// ReasonArguments: an argument is absent, undeclared, of the wrong type or
	// fails a rule; Violations has the paths.
	ReasonArguments Reason = "arguments"
	// ReasonDuplicateEffect: two steps would perform the same effect (the
	// same tool with the same key arguments), so they would share one
	// idempotency key.
	ReasonDuplicateEffect Reason = "duplicate_effect"
	// ReasonDependency: a step waits on a step nobody planned.
	ReasonDependency Reason = "dependency"
	// ReasonCycle: steps wait on each other (or one on itself); Violations
	// names each step in or behind the loop.
	ReasonCycle Reason = "cycle"
	// ReasonReference: an argument refers to an earlier step's outcome in a
	// way that cannot work: the reference is not written as one, its path is
	// not in the outcome's type, or the type there does not fit the
	// argument. Violations name the argument's path and the reference.
	ReasonReference Reason = "reference"
	// ReasonPrecondition: the world as it stands refuses a step (its tool's
	// Precondition is unmet: the item it names does not exist, say); the
	// violation says why in the tool's words.
	ReasonPrecondition Reason = "precondition"
	// ReasonReplan: the planner produced an invalid plan more times than
	// MaxReplans allowed; the error wraps the last refusal.
	ReasonReplan Reason = "replan"
)

// Error makes a Reason usable as an errors.Is target. It is the bare reason,
// so a Reason prints the same whether formatted as an error or a string.
func (r Reason) Error() string { return string(r) }

// UnmetError is a Precondition that does not hold: Why says what stands in
// the way, in the tool's own words, and is shown to whoever planned the
// step. Write it without values from the arguments.
type UnmetError struct{ Why string }

func (e *UnmetError) Error() string { return "planexec: precondition unmet: " + e.Why }

// Unmet returns an *UnmetError saying why, for a Precondition to return.
func Unmet(why string) error { return &UnmetError{Why: why} }

// Violation is one thing wrong with a plan or its arguments, at a JSON Pointer
// (RFC 6901) path: into a step's arguments for ReasonArguments, into the plan
// otherwise. Why never contains a value from the payload.
type Violation struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

func (v Violation) String() string {
	p := v.Path
	if p == "" {
		p = "(root)"
	}
	return p + ": " + v.Why
}

// PlanValidationError refuses a whole plan. Nothing ran. (As the Err of a
// *StepError, with ReasonArguments, it is one step's arguments failing their
// contract once its references were resolved: that step did not run; the
// steps before it did.)
//
// Its message names the reason, the step and the tool, and the first
// violation; it never contains argument values. The raw planner payload rides
// in Payload for whoever needs to inspect it; keep it out of logs. The error
// implements slog.LogValuer without the payload.
type PlanValidationError struct {
	Reason     Reason
	Step       string // id of the offending step; "" when the plan as a whole is refused
	Tool       string
	Violations []Violation
	// Payload is the planner's raw output, when the plan came from a planner.
	Payload []byte
	// Attempts is how many plans the planner had produced when this was raised.
	Attempts int
	RunID    string
	Tenant   string
	PlanID   string
	Revision int
	// Err is the last refusal, for ReasonReplan.
	Err error
}

func (e *PlanValidationError) Error() string {
	var b strings.Builder
	b.WriteString("planexec: plan refused (")
	b.WriteString(string(e.Reason))
	b.WriteString(")")
	if e.Reason == ReasonReplan {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.Step != "" {
		fmt.Fprintf(&b, ": step %s", quote(e.Step))
	}
	if e.Tool != "" {
		fmt.Fprintf(&b, " (tool %s)", quote(e.Tool))
	}
	if len(e.Violations) > 0 {
		b.WriteString(": ")
		b.WriteString(e.Violations[0].String())
		if n := len(e.Violations) - 1; n > 0 {
			fmt.Fprintf(&b, " (and %d more)", n)
		}
	}
	if e.Reason == ReasonReplan && e.Err != nil {
		var last *PlanValidationError
		if errors.As(e.Err, &last) {
			fmt.Fprintf(&b, "; last refusal: %s", last.Reason)
		}
	}
	return b.String()
}

// Unwrap returns the last refusal of a ReasonReplan error.
func (e *PlanValidationError) Unwrap() error { return e.Err }

// Is reports whether target is this error's Reason.
func (e *PlanValidationError) Is(target error) bool {
	r, ok := target.(Reason)
	return ok && r == e.Reason
}

// LogValue renders the error for slog without the payload.
func (e *PlanValidationError) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("reason", string(e.Reason)),
		slog.String("step", e.Step),
		slog.String("tool", e.Tool),
		slog.Int("violations", len(e.Violations)),
		slog.Int("attempts", e.Attempts),
		slog.String("run_id", e.RunID),
		slog.String("plan_id", e.PlanID),
		slog.Int("revision", e.Revision),
	)
}

// ConfigurationError reports an executor or planner built in a way that could
// not be safe. It is returned where the thing is built, not on the run that
// matters.
type ConfigurationError struct {
	Tool string // the tool concerned, if any
	Why  string
}

func (e *ConfigurationError) Error() string {
	if e.Tool != "" {
		return fmt.Sprintf("planexec: configuration: tool %s: %s", quote(e.Tool), e.Why)
	}
	return "planexec: configuration: " + e.Why
}

// AutonomyRefusedError reports that the autonomy ladder refused a step.
type AutonomyRefusedError struct {
	Step, Tool, Class, Tenant string
	Why                       string
	// AtDispatch is true when the refusal came just before the step was to
	// run, after the plan was cleared (its grant was revoked, expired or used
	// up by other plans meanwhile): earlier steps may have run. When false,
	// the refusal came during clearance and nothing ran.
	AtDispatch bool
}

func (e *AutonomyRefusedError) Error() string {
	consequence := "nothing ran"
	if e.AtDispatch {
		consequence = "the step did not run"
	}
	return fmt.Sprintf("planexec: autonomy refused step %s (tool %s, class %s) for tenant %s: %s; %s",
		quote(e.Step), quote(e.Tool), quote(e.Class), quote(e.Tenant), e.Why, consequence)
}

// ApprovalDeniedError reports a step a person did not clear, or whose decision
// expired or named another record.
type ApprovalDeniedError struct {
	Step, Tool string
	Request    string
	Approver   string
	Why        string
}

func (e *ApprovalDeniedError) Error() string {
	s := fmt.Sprintf("planexec: approval denied for step %s (tool %s)", quote(e.Step), quote(e.Tool))
	if e.Approver != "" {
		s += " by " + quote(e.Approver)
	}
	if e.Why != "" {
		s += ": " + e.Why
	}
	return s
}

// ApprovalPendingError reports that a person has yet to decide. The run is
// stored awaiting the decisions (Stored); once each is recorded (see
// Run.Decide), Resume goes on. Nothing ran unless Ran says so: a step whose
// arguments hold references is cleared when it is ready, after the steps
// it reads ran (see RefKey).
type ApprovalPendingError struct {
	RunID, Tenant string
	Requests      []ApprovalRequest
	// Stored is true when the run was stored awaiting the decisions.
	Stored bool
	// Ran counts the steps of the plan that finished before the run
	// stopped to wait.
	Ran int
}

func (e *ApprovalPendingError) Error() string {
	steps := make([]string, len(e.Requests))
	for i, r := range e.Requests {
		steps[i] = quote(r.StepID)
	}
	ran := "nothing ran"
	switch {
	case e.Ran == 1:
		ran = "1 step before it ran"
	case e.Ran > 1:
		ran = fmt.Sprintf("%d steps before it ran", e.Ran)
	}
	next := "the run is stored: resume it once decided"
	if !e.Stored {
		next = "the run could not be stored"
	}
	return fmt.Sprintf("planexec: approval pending for step %s of run %s; %s; %s",
		strings.Join(steps, ", "), quote(e.RunID), ran, next)
}

// AwaitingReplyError reports that the planner of a run of rounds asked the
// person a question: nothing more runs until they reply (Run.Reply). The run
// is stored awaiting the reply when Stored is true. Question is what the
// model wrote, for the person to read: it is not in the error's message.
type AwaitingReplyError struct {
	RunID, Tenant string
	Round         int
	Question      string
	Stored        bool
}

func (e *AwaitingReplyError) Error() string {
	return fmt.Sprintf("planexec: run %s awaits the person's reply to the planner's question of round %d", quote(e.RunID), e.Round)
}

// IndeterminateOutcomeError reports a step whose effect nobody can vouch for
// yet: another holder has its key in flight, or an irreversible tool failed
// without saying the effect did not land. The step was not run again.
//
// errors.Is tells the two apart: ErrInFlight (wait: the holder's outcome is
// about to be known) or ErrInDoubt (resolve the key with Run.Resolve once the
// real outcome is known).
type IndeterminateOutcomeError struct {
	RunID      string
	Step, Tool string
	Key        Key
	Holder     string
	// InDoubt is true when a tool failed and its effect may have landed; false
	// when the key is merely held in flight by Holder until LeaseExpires.
	InDoubt      bool
	LeaseExpires time.Time
	// Err is the failure that left the step in doubt (a *StepError), if
	// this run saw it.
	Err error
}

// Unwrap returns the failure that left the step in doubt.
func (e *IndeterminateOutcomeError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInDoubt (InDoubt) or ErrInFlight (not).
func (e *IndeterminateOutcomeError) Is(target error) bool {
	return (target == ErrInDoubt && e.InDoubt) || (target == ErrInFlight && !e.InDoubt)
}

func (e *IndeterminateOutcomeError) Error() string {
	if e.InDoubt {
		cause := ""
		if e.Err != nil {
			inner := e.Err
			var se *StepError
			if errors.As(inner, &se) {
				inner = se.Err
			}
			cause = " (" + inner.Error() + ")"
		}
		return fmt.Sprintf("planexec: outcome of step %s (tool %s) is in doubt%s: its effect may have landed; resolve key %s before it can run again",
			quote(e.Step), quote(e.Tool), cause, e.Key.Digest)
	}
	return fmt.Sprintf("planexec: step %s (tool %s) is in flight with holder %s; not run twice",
		quote(e.Step), quote(e.Tool), quote(e.Holder))
}

// StepError is a tool's failure, with the step it happened in.
type StepError struct {
	Step, Tool string
	Err        error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("planexec: step %s (tool %s) failed: %v", quote(e.Step), quote(e.Tool), e.Err)
}

// Unwrap returns the tool's error.
func (e *StepError) Unwrap() error { return e.Err }

// DelegationError reports a delegation that cannot be acted under: it names
// ids that cannot be stored faithfully, it asks to widen its parent, or it no
// longer covers a step (expired, revoked, narrowed). Step is set when a step
// was about to run; nothing ran that it names.
type DelegationError struct {
	RunID, Step, Tool string
	Why               string
	Err               error
}

func (e *DelegationError) Error() string {
	switch {
	case e.Step != "":
		return fmt.Sprintf("planexec: delegation of run %s does not cover step %s (tool %s): %s",
			quote(e.RunID), quote(e.Step), quote(e.Tool), e.Why)
	case e.Tool != "":
		return fmt.Sprintf("planexec: delegation of run %s: tool %s: %s", quote(e.RunID), quote(e.Tool), e.Why)
	}
	return fmt.Sprintf("planexec: delegation of run %s: %s", quote(e.RunID), e.Why)
}

// Unwrap returns the error of a revocation check, if any.
func (e *DelegationError) Unwrap() error { return e.Err }

// clip bounds a model-written name (a step id, a tool name) before it is put
// in an error field, an event or a log: at most max bytes, cut on a rune
// boundary and marked "…", with invalid UTF-8 and control characters shown
// as U+FFFD. Names that validation accepts come through unchanged.
func clip(s string, max int) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean && len(s) <= max {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			r = utf8.RuneError
		}
		if b.Len()+utf8.RuneLen(r) > max {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// quote renders a model-written name for a message: quoted, and cut short so
// a hostile name cannot flood a log.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}
