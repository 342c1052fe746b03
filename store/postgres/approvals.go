package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

const (
	decisionSQL = `SELECT version, decision FROM {s}.approvals WHERE tenant = $1 AND record_id = $2`
	// saveDecisionSQL records a decision unless the row it meets must
	// stay, in one statement: SaveDecision's rule (store.Decision.Keeps)
	// on the row's columns, judged on the row as the last writer left it
	// and under its lock, so that of writers at once each judges the
	// decision of the one before. The row is replaced only if this
	// package's layout is as new as its own and it holds a pending
	// decision, or an approval that has expired when the decision is
	// made: the first decision stands. A row whose status is none of
	// those (a first-layout "granted" whose document could not be read)
	// stays too.
	saveDecisionSQL = `INSERT INTO {s}.approvals AS a (tenant, record_id, version, status, decision, decided_at, expires)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (tenant, record_id) DO UPDATE SET version = excluded.version, status = excluded.status,
	decision = excluded.decision, decided_at = excluded.decided_at, expires = excluded.expires
WHERE a.version <= excluded.version AND (a.status = 'pending'
	OR a.status = 'approved' AND a.expires <= excluded.decided_at)`
)

// Decision implements store.ApprovalStore. A decision written by a newer
// version of this package is a *store.Error wrapping
// store.ErrNewerRecord; one that cannot be decoded, or that holds a
// status this package never writes, wraps store.ErrCorruptRecord.
func (s *Store) Decision(ctx context.Context, tenant, requestID string) (store.Decision, error) {
	const op = "decision"
	var (
		version int
		doc     []byte
	)
	err := s.scan(ctx, s.q.decision, []any{tenant, requestID}, &version, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Decision{}, store.ErrNoRecord
	}
	if err != nil {
		return store.Decision{}, storeErr(op, err)
	}
	d, err := storecodec.DecodeDecision(requestID, version, doc)
	if err != nil {
		return store.Decision{}, storeErr(op, err)
	}
	return d, nil
}

// SaveDecision implements store.ApprovalStore. The decision recorded
// for the request is kept, and SaveDecision returns store.ErrDecided, when
// it settles the request: a denial, or, when d approves, an approval that
// has not expired at d.DecidedAt. Check and write are one statement
// (saveDecisionSQL), which reads the row's status and expires columns, so
// of writers deciding one request at once, on any replica, one is
// recorded and each of the others finds it. A decision a newer version
// wrote is never replaced: that is a *store.Error wrapping
// store.ErrNewerRecord, and a kept one that cannot be read is one wrapping
// store.ErrCorruptRecord.
func (s *Store) SaveDecision(ctx context.Context, tenant string, d store.Decision) error {
	const op = "save decision"
	doc, err := storecodec.EncodeDecision(d)
	if err != nil {
		return storeErr(op, err)
	}
	tag, err := s.exec(ctx, s.q.saveDecision, tenant, d.RequestID, storecodec.DecisionVersion, string(d.Status), doc, d.DecidedAt, expiry(d.Expires))
	switch {
	case err != nil:
		return storeErr(op, err)
	case tag.RowsAffected() > 0:
		return nil
	}
	// Kept: say why. The row is read again, after the statement; should it
	// be gone since (pruned, say), the decision was still kept.
	var (
		version int
		kept    []byte
	)
	err = s.scan(ctx, s.q.decision, []any{tenant, d.RequestID}, &version, &kept)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return storeErr(op, err)
	default:
		if _, err := storecodec.DecodeDecision(d.RequestID, version, kept); err != nil {
			return storeErr(op, err)
		}
	}
	return store.ErrDecided
}

// expiry is when an approval stops counting as the expires column keeps
// it: 'infinity' for never (the zero time), and otherwise rounded up to
// the microsecond, the column's unit. A decision's time goes to the
// database rounded down (as pgx sends every time), so an approval is never
// found expired before it is: one that expires on a whole microsecond
// expires exactly then, one that expires within a microsecond at its end.
func expiry(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	if r := t.Truncate(time.Microsecond); r.Before(t) {
		t = r.Add(time.Microsecond)
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}
