package chat

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/store"
)

// Kind says what an Output is.
type Kind string

// The kinds of output. Every kind but KindText is an entry of the stored
// transcript; KindText is the text of an assistant message, given to
// watchers just before the message itself (the llm.Model interface answers
// whole, so a message is one delta).
const (
	// KindText is text from the planner as it arrives: Text.
	KindText Kind = "text"
	// KindMessage is a whole message: a person's (Role "user", By who) or
	// the planner's (Role "assistant", with the Model that wrote it and
	// its Usage).
	KindMessage Kind = "message"
	// KindToolCall is a call the planner asked for: Call.
	KindToolCall Kind = "tool_call"
	// KindToolResult is what a call returned, or why it did not: Result.
	KindToolResult Kind = "tool_result"
	// KindProposal is a plan the planner proposed, validated, for a person
	// to apply or reject: Proposal.
	KindProposal Kind = "proposal"
	// KindApplying is a person's decision to apply a proposal, or more of
	// it: Decision (Proposal, Steps, Run). It is stored before any step
	// runs, so that the first decision on a proposal is on record before
	// it has any effect; a KindApplied follows with what the run did.
	KindApplying Kind = "applying"
	// KindApplied is what applying a proposal did: Decision.
	KindApplied Kind = "applied"
	// KindRejected is a person's rejection of a proposal: Decision.
	KindRejected Kind = "rejected"
	// KindCompacted is a compaction of the conversation: Compaction.
	KindCompacted Kind = "compacted"
	// KindError is a failure of the turn, in fixed words: Text.
	KindError Kind = "error"
	// KindDone ends a turn: Done.
	KindDone Kind = "done"
)

// Output is one entry of a session's transcript, as a reader and a watcher
// see it. Seq numbers the session's entries from 1; the fields set depend on
// Kind.
type Output struct {
	Seq  int64     `json:"seq"`
	At   time.Time `json:"at"`
	Kind Kind      `json:"kind"`
	// Turn is the number of the turn the entry belongs to; 0 outside a
	// turn (a person applying or rejecting a proposal).
	Turn int64 `json:"turn,omitempty"`

	Role  string    `json:"role,omitempty"`  // message: "user" or "assistant"
	By    string    `json:"by,omitempty"`    // message, applied, rejected: the person
	Text  string    `json:"text,omitempty"`  // text, message, error
	Model string    `json:"model,omitempty"` // assistant message: the model that wrote it
	Usage llm.Usage `json:"usage,omitzero"`  // assistant message: what the call cost

	// For is, on an assistant message, the person the planner worked for;
	// SeenAfter, the entry after which it was shown the transcript (the
	// summary's UpTo; 0 for all of it).
	For       string `json:"for,omitempty"`
	SeenAfter int64  `json:"seen_after,omitempty"`
	// Source is, on a tool result and an applied outcome, the reads or
	// steps whose data the entry holds and the person under whose
	// authority they ran.
	Source *Source `json:"source,omitempty"`

	Call       *Call       `json:"call,omitempty"`
	Result     *Result     `json:"result,omitempty"`
	Proposal   *Proposal   `json:"proposal,omitempty"`
	Decision   *Decision   `json:"decision,omitempty"`
	Compaction *Compaction `json:"compaction,omitempty"`
	Done       *Done       `json:"done,omitempty"`

	// withheld marks an entry, as the planner is shown it, whose data it
	// may not see: its content is replaced by fixed words.
	withheld bool
}

// Source is what an entry's data came from: calls made under the authority
// of the person By. The planner working for another person is shown the
// entry only when that person could make the same calls: a read tool's
// call, under their delegation to the planner, or, Applied, the steps of a
// proposal, under their own on the engine; their scope, the authorizer and
// the tools' contracts decide.
type Source struct {
	By      string `json:"by"`
	Applied bool   `json:"applied,omitempty"`
	Steps   []Step `json:"steps"`
}

// Call is a tool call the planner asked for.
type Call struct {
	// ID names the call within the session.
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Arguments are as the model wrote them.
	Arguments json.RawMessage `json:"arguments"`
}

// CallStatus says how a call ended.
type CallStatus string

// How a call ended.
const (
	// CallOK: the tool ran; Output is what it returned.
	CallOK CallStatus = "ok"
	// CallFailed: the call was refused or the tool failed; Error says why,
	// in words the model may read.
	CallFailed CallStatus = "error"
	// CallNotRun: the call never started: the turn was cancelled, reached
	// its bound of rounds, or its process stopped. Error says which.
	CallNotRun CallStatus = "not_run"
)

// Result is what one call returned, or why it did not.
type Result struct {
	Call   string          `json:"call"`
	Tool   string          `json:"tool"`
	Status CallStatus      `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
	// Truncated reports an output cut to Config.MaxResultBytes for the
	// model; the whole output was never stored.
	Truncated bool       `json:"truncated,omitempty"`
	Error     *ToolError `json:"error,omitempty"`
}

// Proposal is a plan the planner proposed. It was validated as if it were to
// run when proposed; a person applies it (Chat.Apply), whole or in part, or
// rejects it (Chat.Reject). Withheld from a person (see Authority in the
// package documentation), it keeps its ID; its goal is fixed words and it
// has no steps.
type Proposal struct {
	// ID names the proposal in the session: the id of the call that made
	// it.
	ID           string       `json:"id"`
	Plan         ProposedPlan `json:"plan"`
	Irreversible []string     `json:"irreversible,omitempty"` // ids of steps whose effect cannot be undone
}

// ProposedPlan is the plan of a proposal, as the planner wrote it.
type ProposedPlan struct {
	Goal  string `json:"goal"`
	Steps []Step `json:"steps"`
}

// Step is one step of a proposal.
type Step struct {
	ID        string          `json:"id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	DependsOn []string        `json:"depends_on,omitempty"`
	Intent    string          `json:"intent,omitempty"`
}

// Decision is a person's applying or rejecting of a proposal.
type Decision struct {
	Proposal string `json:"proposal"`
	// Steps are the steps applied so far (those named, with what they
	// depend on, and those of earlier applies), in the plan's order.
	Steps []string `json:"steps,omitempty"`
	// Run is the engine's run of an applied proposal.
	Run string `json:"run,omitempty"`
	// Status is where the run stands: "succeeded", "failed",
	// "awaiting_approval", ...; "" for a rejection.
	Status string `json:"status,omitempty"`
	// Results say what each step did, in fixed words and the tools'
	// outputs.
	Results []StepOutcome `json:"results,omitempty"`
	// Reason is the person's, for a rejection.
	Reason string `json:"reason,omitempty"`
}

// StepOutcome is what one applied step did.
type StepOutcome struct {
	Step   string          `json:"step"`
	Tool   string          `json:"tool"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Compaction is one compaction of the conversation: everything up to and
// including entry UpTo is, for the model, the summary made then.
type Compaction struct {
	UpTo            int64 `json:"up_to"`
	EstimatedTokens int64 `json:"estimated_tokens"`
}

// Reason says why a turn ended.
type Reason string

// Why a turn ended.
const (
	// EndTurn: the planner answered without calling a tool.
	EndTurn Reason = "end_turn"
	// MaxRounds: the turn ran Config.MaxRounds rounds of tool calls; a
	// message continues it. Calls asked for past the bound were not run.
	MaxRounds Reason = "max_rounds"
	// Cancelled: a person cancelled the turn, or the service stopped it.
	Cancelled Reason = "cancelled"
	// Failed: the model could not be reached, answered out of shape, or the
	// turn's process stopped; an error output before it says which.
	Failed Reason = "error"
)

// Done ends a turn.
type Done struct {
	Reason Reason `json:"reason"`
	// Rounds is how many rounds of tool calls the turn ran.
	Rounds int `json:"rounds"`
}

// entryVersion is the layout of the stored entries; an entry of a newer one
// is not read.
const entryVersion = 1

// storedEntry is an Output as stored: Seq and At are the store's.
type storedEntry struct {
	V int `json:"v"`
	Output
}

func encodeEntry(o *Output) json.RawMessage {
	b, err := json.Marshal(storedEntry{V: entryVersion, Output: *o})
	if err != nil {
		panic(fmt.Sprintf("chat: an entry does not encode: %v", err)) // only strings, numbers and raw JSON checked on the way in
	}
	return b
}

func decodeEntry(e store.TranscriptEntry) (Output, error) {
	var s storedEntry
	if err := json.Unmarshal(e.Entry, &s); err != nil {
		return Output{}, &store.Error{Op: "read transcript", Err: fmt.Errorf("%w: entry %d: %v", store.ErrCorruptRecord, e.Seq, err)}
	}
	if s.V > entryVersion {
		return Output{}, &store.Error{Op: "read transcript", Err: fmt.Errorf("%w: entry %d has layout %d", store.ErrNewerRecord, e.Seq, s.V)}
	}
	o := s.Output
	o.Seq, o.At = e.Seq, e.At
	return o, nil
}
