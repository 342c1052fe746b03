package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec/store"
)

const (
	// counterConflict takes a run's next event numbers: its histories row
	// is made, or moved on, by the number of events appended (the value
	// inserted), and the statement returns the last number taken. The row
	// stays locked until the transaction ends, so the run's next appender
	// waits and then numbers on from this one's last: numbers are taken
	// in commit order, and a reader that has read up to n never finds a
	// new event numbered n or below.
	// The row's updated is set to the time inserted: when the history
	// was last appended to.
	counterConflict = `
ON CONFLICT (tenant, run_id) DO UPDATE SET last_seq = h.last_seq + excluded.last_seq, updated = excluded.updated
RETURNING h.last_seq`
	// appendSQL appends the events $3 (an array, at least one) to run $2
	// of tenant $1, in order, numbered on from its last, at the time the
	// clock $4 gives (NULL: the database's).
	appendSQL = `WITH counter AS (
	INSERT INTO {s}.histories AS h (tenant, run_id, last_seq, updated)
	VALUES ($1, $2, cardinality($3::bytea[]), coalesce($4::timestamptz, now()))` + counterConflict + `
)
INSERT INTO {s}.events (tenant, run_id, seq, event)
SELECT $1, $2, counter.last_seq - cardinality($3::bytea[]) + e.n, e.event
FROM counter, unnest($3::bytea[]) WITH ORDINALITY AS e(event, n)`
	eventsSQL = `SELECT seq, event FROM {s}.events WHERE tenant = $1 AND run_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`
)

// eventsParam is events as a bytea[] parameter: each document as it is
// (an empty one as zero bytes, not NULL), an empty array for none.
func eventsParam(events []json.RawMessage) [][]byte {
	p := make([][]byte, len(events))
	for i, e := range events {
		p[i] = e
		if e == nil {
			p[i] = []byte{}
		}
	}
	return p
}

// AppendEvents implements store.EventStore: the batch is numbered and
// stored by one statement, whole or not at all. Appending none does
// nothing.
func (s *Store) AppendEvents(ctx context.Context, tenant, runID string, events []json.RawMessage) error {
	if len(events) == 0 {
		return nil
	}
	if _, err := s.exec(ctx, s.q.appendEvents, tenant, runID, eventsParam(events), s.now()); err != nil {
		return storeErr("append events", err)
	}
	return nil
}

// Events implements store.EventStore, reading in one statement, so from
// one snapshot: what it returns has no gap. Each event is a copy of its
// own.
func (s *Store) Events(ctx context.Context, tenant, runID string, after int64, limit int) ([]store.EventRecord, error) {
	const op = "events"
	if limit <= 0 {
		return nil, nil
	}
	var out []store.EventRecord
	for attempt := 1; ; attempt++ {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.q.events, tenant, runID, max(after, 0), limit)
		if err == nil {
			var (
				seq int64
				doc []byte // a fresh slice for each row
			)
			_, err = pgx.ForEachRow(rows, []any{&seq, &doc}, func() error {
				out = append(out, store.EventRecord{Seq: seq, Event: doc})
				return nil
			})
		}
		if !s.again(ctx, attempt, err) {
			if err != nil {
				return nil, storeErr(op, err)
			}
			return out, nil
		}
	}
}
