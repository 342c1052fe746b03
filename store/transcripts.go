package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrExists reports a record that cannot be created because one with the
// same tenant and id is already stored. Nothing was written.
var ErrExists = errors.New("planexec: a record with this id already exists")

// ErrTurnHeld reports that a turn could not be taken: another turn holds the
// session's lease and it has not run out, or another process took the turn
// first (the epoch read is no longer the session's). Nothing was written.
var ErrTurnHeld = errors.New("planexec: another turn holds the session")

// SessionRecord is one conversation as stored (see package chat): the
// conversation's own document, which the store keeps as written, the state
// of its turn lease, and the number of its last transcript entry.
type SessionRecord struct {
	Tenant string
	ID     string
	// Doc is the conversation's document (its settings, summary and meter),
	// opaque to the store.
	Doc json.RawMessage
	// Turn is the session's turn lease.
	Turn TurnState
	// Seq is the number of the last transcript entry; 0 when there is none.
	Seq     int64
	Created time.Time
	Updated time.Time
}

// TurnState is the lease a running turn holds on its session, so that one
// turn at a time writes the transcript, on any replica.
type TurnState struct {
	// Epoch numbers the turns (and repairs) taken on the session, from 1; 0
	// before the first.
	Epoch int64
	// Holder names the process running the turn; "" when no turn holds the
	// lease.
	Holder string
	// Until is when the lease runs out unless renewed; zero when no turn
	// holds it.
	Until time.Time
	// Cancel is set when someone asked the running turn to stop.
	Cancel bool
}

// Held reports whether a turn holds the lease at now.
func (t TurnState) Held(now time.Time) bool {
	return t.Holder != "" && now.Before(t.Until)
}

// ErrMoved reports a conditional append that found the transcript moved on:
// the session's last entry is no longer the one the writer read. Nothing was
// written; read what came since and decide again.
var ErrMoved = errors.New("planexec: the transcript has moved on since it was read")

// TranscriptEntry is one entry of a session's transcript.
type TranscriptEntry struct {
	// Seq numbers the session's entries from 1 in the order they were
	// stored; the store gives each entry the next number as it appends it.
	Seq int64
	// At is when the entry was stored.
	At time.Time
	// Entry is the entry as package chat wrote it, opaque to the store.
	Entry json.RawMessage
}

// TurnWrite is one write to a session's transcript by a turn.
type TurnWrite struct {
	Tenant  string
	Session string
	// Epoch is, for TakeTurn, the epoch the writer read (the turn before
	// the one it takes); for WriteTurn, the turn's own epoch.
	Epoch int64
	// Holder names the process running the turn.
	Holder string
	// Until is when the lease runs out; each write renews it. Ignored with
	// End.
	Until time.Time
	// Now is the writer's clock: TakeTurn treats a lease that ends at or
	// before Now as free.
	Now time.Time
	// Entries are appended in order, numbered on from the session's last.
	Entries []json.RawMessage
	// Doc, when not nil, replaces the session's document.
	Doc json.RawMessage
	// End releases the lease after the write (and clears Cancel).
	End bool
}

// TurnResult is the session's state after a turn's write.
type TurnResult struct {
	// Epoch is the turn's epoch.
	Epoch int64
	// Seq is the number of the session's last entry after the write.
	Seq int64
	// Cancel reports that someone asked the turn to stop.
	Cancel bool
}

// TranscriptStore keeps conversations: sessions, their append-only
// transcripts and the lease that lets one turn at a time write to each. It
// is a capability a store may have, beside planexec.PlanStore; package chat
// needs it.
//
// Every write of a turn is fenced by its epoch, so a turn whose lease ran
// out and was taken over can no longer write: its writes fail with
// ErrFenced and change nothing.
type TranscriptStore interface {
	// CreateSession stores a new session with no entries and no turn. A
	// session with the same tenant and id is ErrExists.
	CreateSession(ctx context.Context, rec SessionRecord) error
	// Session returns a session as stored, or ErrNoRecord.
	Session(ctx context.Context, tenant, id string) (SessionRecord, error)
	// TakeTurn takes the session's turn lease and makes the write, all or
	// nothing, when the session's epoch is still w.Epoch and no lease is
	// held at w.Now; the new turn's epoch is w.Epoch+1 and its cancel flag
	// is clear. Otherwise it is ErrTurnHeld and nothing is written; a
	// session not stored is ErrNoRecord. With w.End the write is made and
	// the lease left free (a repair of a turn that died).
	TakeTurn(ctx context.Context, w *TurnWrite) (TurnResult, error)
	// WriteTurn makes the write as the turn holding epoch w.Epoch, renewing
	// its lease to w.Until (or releasing it with w.End). A turn that no
	// longer holds the lease (released, or taken over) is ErrFenced and
	// nothing is written; a session not stored is ErrNoRecord. It reports
	// the cancel flag, so a turn learns of a cancel with each write.
	WriteTurn(ctx context.Context, w *TurnWrite) (TurnResult, error)
	// AppendEntries appends entries outside any turn (a person applying a
	// proposal, say); it does not touch the lease. It returns the number of
	// the last entry.
	AppendEntries(ctx context.Context, tenant, session string, entries []json.RawMessage) (int64, error)
	// AppendEntriesAfter appends entries as AppendEntries does, but only
	// while the session's last entry is still number last: a writer that
	// decides by what the whole transcript says (the first decision on a
	// proposal stands) reads it to its end and writes only if nothing came
	// since. Otherwise it is ErrMoved and nothing is written; a session not
	// stored is ErrNoRecord. It returns the number of the last entry.
	AppendEntriesAfter(ctx context.Context, tenant, session string, last int64, entries []json.RawMessage) (int64, error)
	// CancelTurn asks the turn holding the session's lease to stop by
	// setting its cancel flag. It reports whether a turn held the lease at
	// now; with none it changes nothing. A session not stored is
	// ErrNoRecord.
	CancelTurn(ctx context.Context, tenant, session string, now time.Time) (bool, error)
	// Transcript returns up to limit of the session's entries numbered after
	// `after`, in order; none (not an error) when there are no more. A
	// session not stored is ErrNoRecord.
	Transcript(ctx context.Context, tenant, session string, after int64, limit int) ([]TranscriptEntry, error)
}
