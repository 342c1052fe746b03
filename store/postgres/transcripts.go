package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/planexec/planexec/store"
)

var _ store.TranscriptStore = (*Store)(nil)

// Sessions and transcripts. Every write of a session's lease or transcript
// is one statement (so one implicit transaction) that locks the session's
// row before it judges it, and moves its seq on by the entries it appends:
// writers of one session, on any replica, wait for each other on that row
// and are judged and numbered one after another, in commit order. A
// reader that has read up to entry n never later finds an entry numbered
// n or below.
const (
	// createSessionSQL stores a new session with no turn and no entries,
	// created and updated at the clock $4's time (NULL: the database's).
	// It inserts nothing for a session already stored.
	createSessionSQL = `INSERT INTO {s}.chat_sessions (tenant, id, doc, epoch, holder, lease_until, cancel, seq, created, updated)
VALUES ($1, $2, $3::bytea, 0, '', NULL, false, 0, coalesce($4::timestamptz, now()), coalesce($4::timestamptz, now()))
ON CONFLICT (tenant, id) DO NOTHING`
	sessionSQL = `SELECT doc, epoch, holder, lease_until, cancel, seq, created, updated FROM {s}.chat_sessions WHERE tenant = $1 AND id = $2`

	// The turn writes' parameters: tenant, session, the epoch written
	// (TakeTurn: the one read), the lease's end (NULL: none), the entries
	// (a bytea[]), the document (NULL: keep it), whether the turn ends,
	// the clock (NULL: the database's); TakeTurn's then the holder and the
	// writer's time. lockSession, their first step, locks the session's
	// row and reads it as the last writer left it (FOR UPDATE waits for
	// that writer and then reads its version): what the write is judged
	// by. The UPDATE that follows, joined to it, changes the row only if
	// it passes; turnEnd then appends the entries, numbered on from the
	// session's last, and says what happened: whether the session exists,
	// and the turn's epoch, last number and cancel flag if the write was
	// made (NULL otherwise).
	lockSession = `WITH cur AS (
	SELECT epoch, holder, lease_until, cancel FROM {s}.chat_sessions WHERE tenant = $1 AND id = $2 FOR UPDATE
), turn AS (
	UPDATE {s}.chat_sessions AS t SET seq = t.seq + cardinality($5::bytea[]), doc = coalesce($6::bytea, t.doc),
		updated = coalesce($8::timestamptz, now()),
		lease_until = CASE WHEN $7::boolean THEN NULL ELSE $4::timestamptz END, `
	turnEnd = `
), appended AS (
	INSERT INTO {s}.chat_entries (tenant, session, seq, at, entry)
	SELECT $1, $2, turn.seq - cardinality($5::bytea[]) + e.n, coalesce($8::timestamptz, now()), e.entry
	FROM turn, unnest($5::bytea[]) WITH ORDINALITY AS e(entry, n)
)
SELECT EXISTS (SELECT 1 FROM cur), turn.epoch, turn.seq, turn.was FROM (VALUES (1)) AS one (x) LEFT JOIN turn ON true`
	// takeTurnSQL takes the lease if the session's epoch is still $3 and
	// no lease is held at $10 (none, or one that ends at or before it),
	// for holder $9, with the cancel flag clear; with $7 the lease is left
	// free.
	takeTurnSQL = lockSession + `epoch = cur.epoch + 1, holder = CASE WHEN $7::boolean THEN '' ELSE $9::text END, cancel = false
	FROM cur
	WHERE t.tenant = $1 AND t.id = $2 AND cur.epoch = $3
		AND (cur.holder = '' OR cur.lease_until IS NULL OR cur.lease_until <= $10::timestamptz)
	RETURNING t.epoch, t.seq, false AS was` + turnEnd
	// writeTurnSQL writes as the turn of epoch $3 if it still holds the
	// lease (the epoch is the session's, and the lease was not released),
	// and reports the cancel flag as it found it; with $7 the lease is
	// released and the flag cleared.
	writeTurnSQL = lockSession + `cancel = cur.cancel AND NOT $7::boolean, holder = CASE WHEN $7::boolean THEN '' ELSE cur.holder END
	FROM cur
	WHERE t.tenant = $1 AND t.id = $2 AND cur.epoch = $3 AND cur.holder <> ''
	RETURNING t.epoch, t.seq, cur.cancel AS was` + turnEnd

	// appendEntriesSQL appends the entries $3 to session $2 of tenant $1
	// at the clock $4's time (NULL: the database's), and says whether the
	// session exists and the number of the last entry if the entries were
	// appended (NULL otherwise). The UPDATE locks the row and moves seq on
	// from what the last writer left. appendEntriesAfterSQL appends only
	// while that is still $5: an UPDATE that waited for the row's lock
	// judges the row as the writer it waited for left it.
	appendEntriesSQL      = appendHead + appendTail
	appendEntriesAfterSQL = appendHead + ` AND seq = $5::bigint` + appendTail
	appendHead            = `WITH turn AS (
	UPDATE {s}.chat_sessions SET seq = seq + cardinality($3::bytea[]), updated = coalesce($4::timestamptz, now())
	WHERE tenant = $1 AND id = $2`
	appendTail = `
	RETURNING seq
), appended AS (
	INSERT INTO {s}.chat_entries (tenant, session, seq, at, entry)
	SELECT $1, $2, turn.seq - cardinality($3::bytea[]) + e.n, coalesce($4::timestamptz, now()), e.entry
	FROM turn, unnest($3::bytea[]) WITH ORDINALITY AS e(entry, n)
)
SELECT EXISTS (SELECT 1 FROM {s}.chat_sessions WHERE tenant = $1 AND id = $2), (SELECT seq FROM turn)`
	sessionSeqSQL = `SELECT seq FROM {s}.chat_sessions WHERE tenant = $1 AND id = $2`
	// cancelTurnSQL sets the cancel flag if a turn holds the lease at $3
	// (and the session's updated to the clock $4's time if the flag was
	// clear), and says whether it did and whether the session exists.
	cancelTurnSQL = `WITH c AS (
	UPDATE {s}.chat_sessions SET cancel = true, updated = CASE WHEN cancel THEN updated ELSE coalesce($4::timestamptz, now()) END
	WHERE tenant = $1 AND id = $2 AND holder <> '' AND lease_until > $3::timestamptz
	RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM c), EXISTS (SELECT 1 FROM {s}.chat_sessions WHERE tenant = $1 AND id = $2)`
	transcriptSQL    = `SELECT seq, at, entry FROM {s}.chat_entries WHERE tenant = $1 AND session = $2 AND seq > $3 ORDER BY seq LIMIT $4`
	sessionExistsSQL = `SELECT EXISTS (SELECT 1 FROM {s}.chat_sessions WHERE tenant = $1 AND id = $2)`
)

// timeParam is t as a nullable timestamptz parameter: NULL for the zero
// time.
func timeParam(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// bytesParam is a document as a bytea parameter, byte for byte: NULL for
// nil.
func bytesParam(doc json.RawMessage) []byte {
	if doc == nil {
		return nil
	}
	return []byte(doc)
}

// CreateSession implements store.TranscriptStore: one INSERT … ON
// CONFLICT DO NOTHING. The session is stored with its document byte for
// byte and no turn and no entries, whatever rec says, created and updated
// now by the store's clock (by default the database's). A session of the
// same tenant and id is store.ErrExists, and nothing is written.
func (s *Store) CreateSession(ctx context.Context, rec store.SessionRecord) error {
	tag, err := s.exec(ctx, s.q.createSession, rec.Tenant, rec.ID, bytesParam(rec.Doc), s.now())
	switch {
	case err != nil:
		return storeErr("create session", err)
	case tag.RowsAffected() == 0:
		return store.ErrExists
	}
	return nil
}

// Session implements store.TranscriptStore: one statement.
func (s *Store) Session(ctx context.Context, tenant, id string) (store.SessionRecord, error) {
	rec := store.SessionRecord{Tenant: tenant, ID: id}
	var (
		doc   []byte
		until pgtype.Timestamptz
	)
	err := s.scan(ctx, s.q.session, []any{tenant, id},
		&doc, &rec.Turn.Epoch, &rec.Turn.Holder, &until, &rec.Turn.Cancel, &rec.Seq, &rec.Created, &rec.Updated)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.SessionRecord{}, store.ErrNoRecord
	case err != nil:
		return store.SessionRecord{}, storeErr("session", err)
	}
	if doc != nil {
		rec.Doc = doc
	}
	if until.Valid {
		rec.Turn.Until = until.Time.UTC()
	}
	rec.Created, rec.Updated = rec.Created.UTC(), rec.Updated.UTC()
	return rec, nil
}

// TakeTurn implements store.TranscriptStore: one statement, which locks
// the session's row, judges the lease as the last writer left it and, if
// it may, takes it, appends the entries and replaces the document. Of
// turns taken at once on one epoch, on any replica, one takes it and the
// others get store.ErrTurnHeld.
func (s *Store) TakeTurn(ctx context.Context, w *store.TurnWrite) (store.TurnResult, error) {
	const op = "take turn"
	if w == nil {
		return store.TurnResult{}, storeErr(op, errors.New("a nil turn write"))
	}
	return s.turn(ctx, op, s.q.takeTurn, w, store.ErrTurnHeld, w.Holder, w.Now)
}

// WriteTurn implements store.TranscriptStore: one statement, as TakeTurn.
// The turn's epoch must still be the session's and the lease not
// released, or it is store.ErrFenced: a lease that ran out but was not
// taken over is renewed.
func (s *Store) WriteTurn(ctx context.Context, w *store.TurnWrite) (store.TurnResult, error) {
	const op = "write turn"
	if w == nil {
		return store.TurnResult{}, storeErr(op, errors.New("a nil turn write"))
	}
	return s.turn(ctx, op, s.q.writeTurn, w, store.ErrFenced)
}

// turn runs a turn's write, sql, and answers refused when the session
// exists and the write was not made.
func (s *Store) turn(ctx context.Context, op, sql string, w *store.TurnWrite, refused error, more ...any) (store.TurnResult, error) {
	var (
		found      bool
		epoch, seq pgtype.Int8
		cancel     pgtype.Bool
	)
	args := append([]any{w.Tenant, w.Session, w.Epoch, timeParam(w.Until), eventsParam(w.Entries), bytesParam(w.Doc), w.End, s.now()}, more...)
	switch err := s.scan(ctx, sql, args, &found, &epoch, &seq, &cancel); {
	case err != nil:
		return store.TurnResult{}, storeErr(op, err)
	case !found:
		return store.TurnResult{}, store.ErrNoRecord
	case !epoch.Valid:
		return store.TurnResult{}, refused
	}
	return store.TurnResult{Epoch: epoch.Int64, Seq: seq.Int64, Cancel: cancel.Bool}, nil
}

// AppendEntries implements store.TranscriptStore: one statement numbers
// and stores the entries and moves the session's last number on, whole or
// not at all. The lease is left as it is.
func (s *Store) AppendEntries(ctx context.Context, tenant, session string, entries []json.RawMessage) (int64, error) {
	return s.appendOutside(ctx, "append entries", tenant, session, nil, entries)
}

// AppendEntriesAfter implements store.TranscriptStore: AppendEntries's
// statement, whose UPDATE matches the session's row only while its last
// number is still last. Of writers appending after one number at once, on
// any replica, one appends and the others get store.ErrMoved.
func (s *Store) AppendEntriesAfter(ctx context.Context, tenant, session string, last int64, entries []json.RawMessage) (int64, error) {
	return s.appendOutside(ctx, "append entries after", tenant, session, &last, entries)
}

// appendOutside runs AppendEntries's statement or, with after, that of
// AppendEntriesAfter, which writes only while the session's last number is
// still *after.
func (s *Store) appendOutside(ctx context.Context, op, tenant, session string, after *int64, entries []json.RawMessage) (int64, error) {
	var (
		found = true
		last  pgtype.Int8
		err   error
	)
	switch {
	case len(entries) == 0: // nothing to write: the number is read
		if err = s.scan(ctx, s.q.sessionSeq, []any{tenant, session}, &last); errors.Is(err, pgx.ErrNoRows) {
			found, err = false, nil
		}
	case after == nil:
		err = s.scan(ctx, s.q.appendEntries, []any{tenant, session, eventsParam(entries), s.now()}, &found, &last)
	default:
		err = s.scan(ctx, s.q.appendAfter, []any{tenant, session, eventsParam(entries), s.now(), *after}, &found, &last)
	}
	switch {
	case err != nil:
		return 0, storeErr(op, err)
	case !found:
		return 0, store.ErrNoRecord
	case after != nil && (!last.Valid || last.Int64 != *after+int64(len(entries))):
		// Refused by the UPDATE or, with nothing to write, read moved on.
		return 0, store.ErrMoved
	case !last.Valid:
		// The row went between the statement's snapshot and its UPDATE,
		// though no method of the store deletes one.
		return 0, store.ErrNoRecord
	}
	return last.Int64, nil
}

// CancelTurn implements store.TranscriptStore: one conditional UPDATE.
func (s *Store) CancelTurn(ctx context.Context, tenant, session string, now time.Time) (bool, error) {
	var held, found bool
	if err := s.scan(ctx, s.q.cancelTurn, []any{tenant, session, now, s.now()}, &held, &found); err != nil {
		return false, storeErr("cancel turn", err)
	}
	if !found {
		return false, store.ErrNoRecord
	}
	return held, nil
}

// Transcript implements store.TranscriptStore: a range of the entries'
// primary key, in one statement; a second says, when it found none,
// whether the session exists. Each entry is a copy of its own.
func (s *Store) Transcript(ctx context.Context, tenant, session string, after int64, limit int) ([]store.TranscriptEntry, error) {
	const op = "transcript"
	var out []store.TranscriptEntry
	if limit > 0 {
		for attempt := 1; ; attempt++ {
			out = out[:0]
			rows, err := s.pool.Query(ctx, s.q.transcript, tenant, session, max(after, 0), limit)
			if err == nil {
				var (
					seq   int64
					at    time.Time
					entry []byte // a fresh slice for each row
				)
				_, err = pgx.ForEachRow(rows, []any{&seq, &at, &entry}, func() error {
					out = append(out, store.TranscriptEntry{Seq: seq, At: at.UTC(), Entry: entry})
					return nil
				})
			}
			if !s.again(ctx, attempt, err) {
				if err != nil {
					return nil, storeErr(op, err)
				}
				break
			}
		}
		if len(out) > 0 {
			return out, nil // entries are only stored with their session
		}
	}
	var found bool
	if err := s.scan(ctx, s.q.sessionExists, []any{tenant, session}, &found); err != nil {
		return nil, storeErr(op, err)
	}
	if !found {
		return nil, store.ErrNoRecord
	}
	return nil, nil
}
