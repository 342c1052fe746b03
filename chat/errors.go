package chat

import (
	"errors"
	"fmt"
)

// The errors of this package, by what went wrong:
//
//   - ErrTurnBusy: a message sent while a turn runs, on any replica; nothing
//     was stored.
//   - ErrNotPerson: an agent (a delegation with Agent set) tried to do what
//     only a person may: send, apply, reject, cancel.
//   - ErrInTool: a tool, as it ran for a plan or the planner, tried to do
//     what only a person may, with a person's delegation.
//   - ErrNoSession, ErrNoProposal: what was named is not stored for the
//     tenant.
//   - *MessageError: a message that is empty, too long or not valid UTF-8;
//     nothing was stored.
//   - ErrDecided: a proposal already applied or rejected by someone else.
//   - ErrWithheld: a proposal made from what the person applying it may
//     not read (it is withheld from them); nothing ran.
//   - ErrApplying: a proposal that another request is applying at this
//     moment; nothing ran (a decision to apply more steps stays recorded).
//   - ErrWatcherDropped: a watcher fell Config.WatchLag outputs behind;
//     watch again from the last Seq it saw.
//   - ErrClosed: the Chat was closed.
//   - *ToolError: what a tool returns for the planner to read.
//
// A store's failure is returned as the store's own error (a *store.Error).
var (
	// ErrTurnBusy reports a message sent while a turn of the session runs:
	// the message was not stored. Send again when the turn is done, or
	// cancel it.
	ErrTurnBusy = errors.New("chat: a turn of this session is running")
	// ErrNotPerson reports an agent acting where only a person may: the
	// delegation names an agent. Nothing was done.
	ErrNotPerson = errors.New("chat: only a person may do this, not an agent")
	// ErrInTool reports a person's call (Create, Send, Apply, Reject,
	// Cancel) made from inside a tool's execution: a read the planner
	// made, a step of an applied proposal, any step an executor runs. The
	// planner acting for a person never makes the person act. Nothing was
	// done.
	ErrInTool = errors.New("chat: a tool may not act as the person it runs for")
	// ErrApplying reports an apply of a proposal whose run another request
	// (on this process or another) is executing at this moment. No step
	// ran for it. An apply that named steps not applied before recorded
	// that decision (KindApplying) before it found the run busy: they
	// stand decided, not run, and the next apply runs them. Any other
	// recorded nothing. The request under way records what it ran;
	// applying again once it is done returns its outcome or goes on with
	// its run. It is returned wrapping the engine's planexec.ErrRunBusy or
	// planexec.ErrInFlight.
	ErrApplying = errors.New("chat: the proposal is being applied by another request")
	// ErrNoSession reports a session that is not stored for the tenant.
	ErrNoSession = errors.New("chat: no such session")
	// ErrNoProposal reports a proposal the session does not hold.
	ErrNoProposal = errors.New("chat: no such proposal in this session")
	// ErrWithheld reports an apply of a proposal withheld from the person:
	// the planner made it, for another person, from what this one may not
	// read, so they may not see it, nor run it. Nothing ran, and nothing is
	// recorded.
	ErrWithheld = errors.New("chat: the proposal was made from what the person may not read")
	// ErrDecided reports a proposal that was already applied or rejected;
	// the decision that came first stands.
	ErrDecided = errors.New("chat: the proposal was already decided")
	// ErrWatcherDropped ends a watch that fell too far behind the session:
	// watch again from the last Seq seen to go on without a gap.
	ErrWatcherDropped = errors.New("chat: the watcher fell too far behind and was dropped")
	// ErrClosed reports a Chat that was closed.
	ErrClosed = errors.New("chat: closed")
)

// MessageError reports a person's message that cannot be sent: empty, longer
// than the bound, or not valid UTF-8. Nothing was stored.
type MessageError struct {
	Runes int // the message's length in runes (characters)
	Max   int
	Why   string
}

func (e *MessageError) Error() string {
	return "chat: the message cannot be sent: " + e.Why
}

// ToolError is what a tool returns for the planner to read: its Code and
// Message are shown to the model as written (the message cut to
// Config.MaxResultBytes), and the conversation goes on.
// Any other error a tool returns is shown only as "the tool failed", so
// nothing internal reaches the model or a watcher; the error itself goes to
// Config.Logger.
//
//	if item == nil {
//		return nil, &chat.ToolError{Code: "not_found", Message: "no item " + id}
//	}
type ToolError struct {
	// Code is a short word: "not_found", "conflict", "invalid_arguments",
	// "forbidden", "failed", ...
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *ToolError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }
