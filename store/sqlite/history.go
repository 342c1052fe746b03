package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/planexec/planexec/store"
)

var _ store.EventStore = (*Store)(nil)

// AppendEvents implements store.EventStore. The batch is written in one
// transaction, begun IMMEDIATE, each event numbered as it is inserted, one
// after the run's last: the numbers are read under the write lock, so
// writers in this process or another never number two events alike nor
// leave a gap, and a reader never finds a new event numbered at or below
// one it has read.
func (s *Store) AppendEvents(ctx context.Context, tenant, runID string, events []json.RawMessage) error {
	if len(events) == 0 {
		return nil
	}
	return s.write(ctx, "append events", func(tx on) error { return appendEvents(ctx, tx, tenant, runID, events, s.now()) })
}

// appendEvents appends events to the run's history inside tx, stored at
// now.
func appendEvents(ctx context.Context, tx on, tenant, runID string, events []json.RawMessage, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	add, stored := tx.stmt(ctx, qEventAdd), instant(now)
	for _, e := range events {
		if _, err := add.ExecContext(ctx, tenant, runID, string(e), stored); err != nil {
			return err
		}
	}
	return nil
}

// Events implements store.EventStore. Each event's document comes back as
// it was appended, in a slice of its own.
func (s *Store) Events(ctx context.Context, tenant, runID string, after int64, limit int) ([]store.EventRecord, error) {
	const op = "events"
	if limit <= 0 {
		return nil, nil
	}
	rows, err := on{s.rs, nil}.rows(ctx, qEventsRead, tenant, runID, max(after, 0), limit)
	if err != nil {
		return nil, storeErr(op, err)
	}
	defer rows.Close()
	var out []store.EventRecord
	for rows.Next() {
		var (
			seq int64
			doc []byte // a copy: Scan copies into a []byte
		)
		if err := rows.Scan(&seq, &doc); err != nil {
			return nil, storeErr(op, err)
		}
		out = append(out, store.EventRecord{Seq: seq, Event: doc})
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr(op, err)
	}
	return out, nil
}
