package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/planexec/planexec/store"
)

var _ store.TranscriptStore = (*Store)(nil)

// CreateSession implements store.TranscriptStore. The session is stored
// with its document byte for byte and no turn and no entries, whatever rec
// says, created and updated now by the store's clock. A session of the
// same tenant and id is store.ErrExists, and nothing is written.
func (s *Store) CreateSession(ctx context.Context, rec store.SessionRecord) error {
	return s.write(ctx, "create session", func(tx on) error {
		now := nanos(s.now())
		n, err := tx.affected(ctx, qSessionNew, rec.Tenant, rec.ID, document(rec.Doc), now, now)
		if err == nil && n == 0 {
			return store.ErrExists
		}
		return err
	})
}

// document is a session's document as its column keeps it, byte for byte:
// NULL for none.
func document(doc json.RawMessage) any {
	if doc == nil {
		return nil
	}
	return string(doc)
}

// Session implements store.TranscriptStore: one read of the session's row.
func (s *Store) Session(ctx context.Context, tenant, id string) (store.SessionRecord, error) {
	const op = "session"
	rec := store.SessionRecord{Tenant: tenant, ID: id}
	var (
		doc              []byte // a copy: Scan copies into a []byte
		until            sql.NullInt64
		created, updated sql.NullInt64
	)
	err := on{s.rs, nil}.row(ctx, qSessionGet, tenant, id).
		Scan(&doc, &rec.Turn.Epoch, &rec.Turn.Holder, &until, &rec.Turn.Cancel, &rec.Seq, &created, &updated)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.SessionRecord{}, store.ErrNoRecord
	case err != nil:
		return store.SessionRecord{}, storeErr(op, err)
	}
	rec.Doc = doc
	rec.Turn.Until, rec.Created, rec.Updated = fromNanos(until), fromNanos(created), fromNanos(updated)
	return rec, nil
}

// TakeTurn implements store.TranscriptStore. The lease is read, checked
// and taken, the entries appended and the document replaced in one write
// transaction begun IMMEDIATE: it holds the file's write lock from its
// first read, so of turns taken at once on one epoch, in this process or
// another, one takes it and the others get store.ErrTurnHeld.
func (s *Store) TakeTurn(ctx context.Context, w *store.TurnWrite) (store.TurnResult, error) {
	return s.turn(ctx, "take turn", w, true)
}

// WriteTurn implements store.TranscriptStore, in one write transaction
// begun IMMEDIATE, as TakeTurn. The turn's epoch must still be the
// session's and the lease not released, or it is store.ErrFenced: a lease
// that ran out but was not taken over is renewed.
func (s *Store) WriteTurn(ctx context.Context, w *store.TurnWrite) (store.TurnResult, error) {
	return s.turn(ctx, "write turn", w, false)
}

// turn runs TakeTurn's write (take) or WriteTurn's.
func (s *Store) turn(ctx context.Context, op string, w *store.TurnWrite, take bool) (store.TurnResult, error) {
	if w == nil {
		return store.TurnResult{}, storeErr(op, errors.New("a nil turn write"))
	}
	var res store.TurnResult
	err := s.write(ctx, op, func(tx on) error {
		var (
			t     store.TurnState
			until sql.NullInt64
			seq   int64
		)
		err := tx.row(ctx, qSessionTurn, w.Tenant, w.Session).Scan(&t.Epoch, &t.Holder, &until, &t.Cancel, &seq)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNoRecord
		case err != nil:
			return err
		}
		t.Until = fromNanos(until)
		if take {
			if t.Epoch != w.Epoch || t.Held(w.Now) {
				return store.ErrTurnHeld
			}
			t = store.TurnState{Epoch: w.Epoch + 1, Holder: w.Holder}
		} else if t.Epoch != w.Epoch || t.Holder == "" {
			return store.ErrFenced
		}
		res = store.TurnResult{Epoch: t.Epoch, Cancel: t.Cancel}
		lease := nanos(w.Until)
		if w.End {
			t.Holder, lease, t.Cancel = "", sql.NullInt64{}, false
		}
		now := s.now()
		if seq, err = appendEntries(ctx, tx, w.Tenant, w.Session, seq, w.Entries, now); err != nil {
			return err
		}
		res.Seq = seq
		_, err = tx.exec(ctx, qSessionWrite, t.Epoch, t.Holder, lease, t.Cancel, seq, document(w.Doc), nanos(now), w.Tenant, w.Session)
		return err
	})
	if err != nil {
		return store.TurnResult{}, err
	}
	return res, nil
}

// appendEntries inserts entries into the session's transcript inside tx,
// numbered on from last, stored at now, and returns the number of the
// last. The caller writes it into the session's row in the same
// transaction.
func appendEntries(ctx context.Context, tx on, tenant, session string, last int64, entries []json.RawMessage, now time.Time) (int64, error) {
	if len(entries) == 0 {
		return last, nil
	}
	add, at := tx.stmt(ctx, qEntryAdd), instant(now)
	for _, e := range entries {
		last++
		if _, err := add.ExecContext(ctx, tenant, session, last, at, string(e)); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// AppendEntries implements store.TranscriptStore: the entries are numbered
// and stored, and the session's last number moved on, in one write
// transaction begun IMMEDIATE, whole or not at all. The lease is left as
// it is.
func (s *Store) AppendEntries(ctx context.Context, tenant, session string, entries []json.RawMessage) (int64, error) {
	return s.appendOutside(ctx, "append entries", tenant, session, nil, entries)
}

// AppendEntriesAfter implements store.TranscriptStore, in AppendEntries's
// transaction: the session's last number is read under the write lock, so
// of writers appending after one number at once, in this process or
// another, one appends and the others get store.ErrMoved.
func (s *Store) AppendEntriesAfter(ctx context.Context, tenant, session string, last int64, entries []json.RawMessage) (int64, error) {
	return s.appendOutside(ctx, "append entries after", tenant, session, &last, entries)
}

// appendOutside runs AppendEntries's write or, with after, that of
// AppendEntriesAfter, which writes only while the session's last number is
// still *after.
func (s *Store) appendOutside(ctx context.Context, op, tenant, session string, after *int64, entries []json.RawMessage) (int64, error) {
	var last int64
	read := func(o on) (t store.TurnState, until sql.NullInt64, err error) {
		err = o.row(ctx, qSessionTurn, tenant, session).Scan(&t.Epoch, &t.Holder, &until, &t.Cancel, &last)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			err = store.ErrNoRecord
		case err == nil && after != nil && last != *after:
			err = store.ErrMoved
		}
		return t, until, err
	}
	var err error
	if len(entries) == 0 { // nothing to write: the number is read
		_, _, err = read(on{s.rs, nil})
		err = fail(op, err)
	} else {
		err = s.write(ctx, op, func(tx on) error {
			t, until, err := read(tx)
			if err != nil {
				return err
			}
			now := s.now()
			if last, err = appendEntries(ctx, tx, tenant, session, last, entries, now); err != nil {
				return err
			}
			_, err = tx.exec(ctx, qSessionWrite, t.Epoch, t.Holder, until, t.Cancel, last, nil, nanos(now), tenant, session)
			return err
		})
	}
	if err != nil {
		return 0, err
	}
	return last, nil
}

// CancelTurn implements store.TranscriptStore: one conditional UPDATE sets
// the flag if a turn holds the lease at now (and stamps the session
// updated by the store's clock if the flag was clear).
func (s *Store) CancelTurn(ctx context.Context, tenant, session string, now time.Time) (bool, error) {
	var held bool
	err := s.write(ctx, "cancel turn", func(tx on) error {
		err := fenced(ctx, tx, qSessionCancel, []any{tenant, session, instant(now), nanos(s.now())}, qSessionExists, tenant, session)
		switch {
		case err == nil:
			held = true
		case errors.Is(err, store.ErrFenced):
			held, err = false, nil
		}
		return err
	})
	if err != nil {
		return false, err
	}
	return held, nil
}

// Transcript implements store.TranscriptStore: a range of the entries'
// primary key. Each entry comes back byte for byte, in a slice of its own.
func (s *Store) Transcript(ctx context.Context, tenant, session string, after int64, limit int) ([]store.TranscriptEntry, error) {
	const op = "transcript"
	r := on{s.rs, nil}
	var out []store.TranscriptEntry
	if limit > 0 {
		rows, err := r.rows(ctx, qEntriesRead, tenant, session, max(after, 0), limit)
		if err != nil {
			return nil, storeErr(op, err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				seq, at int64
				entry   []byte // a copy: Scan copies into a []byte
			)
			if err := rows.Scan(&seq, &at, &entry); err != nil {
				return nil, storeErr(op, err)
			}
			out = append(out, store.TranscriptEntry{Seq: seq, At: fromNanos(sql.NullInt64{Int64: at, Valid: true}), Entry: entry})
		}
		if err := rows.Err(); err != nil {
			return nil, storeErr(op, err)
		}
		if len(out) > 0 {
			return out, nil // entries are only stored with their session
		}
	}
	var one int
	err := r.row(ctx, qSessionExists, tenant, session).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, store.ErrNoRecord
	case err != nil:
		return nil, storeErr(op, err)
	}
	return nil, nil
}
