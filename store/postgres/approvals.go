package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

const (
	decisionSQL     = `SELECT version, decision FROM {s}.approvals WHERE tenant = $1 AND record_id = $2`
	saveDecisionSQL = `INSERT INTO {s}.approvals (tenant, record_id, version, status, decision, decided_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant, record_id) DO UPDATE SET version = excluded.version, status = excluded.status,
	decision = excluded.decision, decided_at = excluded.decided_at`
)

// Decision implements planexec.ApprovalStore. A decision written by a newer
// version of this package is a *store.Error wrapping
// store.ErrNewerRecord; one that cannot be decoded, or that holds a
// status this package never writes, wraps store.ErrCorruptRecord.
func (s *Store) Decision(ctx context.Context, tenant, requestID string) (planexec.Decision, error) {
	const op = "decision"
	var (
		version int
		doc     []byte
	)
	err := s.scan(ctx, s.q.decision, []any{tenant, requestID}, &version, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return planexec.Decision{}, store.ErrNoRecord
	}
	if err != nil {
		return planexec.Decision{}, storeErr(op, err)
	}
	d, err := storecodec.DecodeDecision(requestID, version, doc)
	if err != nil {
		return planexec.Decision{}, storeErr(op, err)
	}
	return d, nil
}

// SaveDecision implements planexec.ApprovalStore, replacing an earlier
// decision for the same record.
func (s *Store) SaveDecision(ctx context.Context, tenant string, d planexec.Decision) error {
	const op = "save decision"
	doc, err := storecodec.EncodeDecision(d)
	if err != nil {
		return storeErr(op, err)
	}
	if _, err := s.exec(ctx, s.q.saveDecision, tenant, d.RequestID, storecodec.DecisionVersion, string(d.Status), doc, d.DecidedAt); err != nil {
		return storeErr(op, err)
	}
	return nil
}
