package store

import (
	"errors"
	"fmt"
)

// ErrNoRecord reports that a store holds no record for the tenant and key or
// run asked for. One tenant asking for another's run gets this too.
// store.ErrNoRecord is this error.
var ErrNoRecord = errors.New("planexec: no record")

// ErrCompleted reports an attempt to resolve a key whose effect is already
// recorded as done: resolving it again could only undo that record and let
// the effect run twice. store.ErrCompleted is this error.
var ErrCompleted = errors.New("planexec: the effect is already recorded as done")

// ErrInFlight reports a key a live holder has in flight: its outcome is
// about to be known. Resolve returns it rather than settle such a key.
// store.ErrInFlight is this error.
var ErrInFlight = errors.New("planexec: in flight with a live holder")

// ErrDecided reports a decision for a request that already has one that
// stands (see planexec.ApprovalStore.SaveDecision). Nothing was recorded.
var ErrDecided = errors.New("planexec: the request is already decided")

// ErrFenced reports a write from a holder whose claim was since taken over
// (its epoch is stale). The write is refused so it cannot overwrite the
// newer one.
var ErrFenced = errors.New("planexec: claim was taken over by another holder")

// ErrNewerRecord reports a stored record (or schema) written by a newer
// version of this package than the one reading it. It is not read, so
// nothing newer is misunderstood; upgrade the reader.
var ErrNewerRecord = errors.New("planexec: record written by a newer version")

// ErrCorruptRecord reports a stored record that cannot be decoded, or holds
// what this package never writes.
var ErrCorruptRecord = errors.New("planexec: corrupt record")

// Error reports that a store could not do what was asked. Op says what
// ("claim", "save step", "load plan", "migrate"). Nothing was recorded as
// done that was not done: when the database is back, a resume finishes the
// plan. It wraps ErrNewerRecord or ErrCorruptRecord when a record is the
// problem.
type Error struct {
	Store string // "sqlite", "postgres"; "" when the executor found the problem in what a store returned
	Op    string
	Err   error
}

func (e *Error) Error() string {
	if e.Store == "" {
		return fmt.Sprintf("planexec: store: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("planexec: %s store: %s: %v", e.Store, e.Op, e.Err)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }
