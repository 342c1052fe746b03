package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

var _ store.RunLister = (*Store)(nil)

// ListRuns implements store.RunLister. A page is read in one snapshot, as
// a range of an index: of plans_listed for every status; for given
// statuses, a range of plans_listed_by_status for each, merged. So a page
// costs about the same however many runs the tenant has and however deep
// the cursor is. A run updated at the zero time is listed after every
// other. A listed run whose row a newer version wrote is a *store.Error
// wrapping store.ErrNewerRecord; one holding a status this package never
// writes, or waits it cannot read, wraps store.ErrCorruptRecord. A limit
// below 1 lists nothing.
func (s *Store) ListRuns(ctx context.Context, tenant string, q store.RunQuery) ([]store.RunSummary, error) {
	const op = "list runs"
	if q.Limit < 1 {
		return nil, nil
	}
	rtx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, storeErr(op, err)
	}
	defer rtx.Rollback()
	tx := on{s.rs, rtx}
	var (
		page     []listed
		statuses = distinct(q.Statuses)
	)
	if len(statuses) == 0 {
		page, err = listRange(ctx, tx, tenant, nil, q)
	}
	for _, st := range statuses {
		var more []listed
		if more, err = listRange(ctx, tx, tenant, &st, q); err != nil {
			break
		}
		page = append(page, more...)
	}
	if err != nil {
		return nil, storeErr(op, err)
	}
	if len(statuses) > 1 {
		slices.SortFunc(page, func(a, b listed) int {
			if a.key != b.key {
				if a.key > b.key {
					return -1
				}
				return 1
			}
			return strings.Compare(a.runID, b.runID)
		})
		page = page[:min(len(page), q.Limit)]
	}
	out := make([]store.RunSummary, len(page))
	for i, r := range page {
		if out[i], err = r.summary(); err != nil {
			return nil, storeErr(op, err)
		}
	}
	return out, nil
}

// listed is a run's row as a listing reads it.
type listed struct {
	runID, planID    string
	version          int
	status           string
	waiting          []byte
	created, updated sql.NullInt64
	leaseExpires     sql.NullInt64
	key              int64 // listKey's value
}

// listRange reads up to q.Limit runs of tenant that follow q's cursor, in
// listing order: of *status, or of every status when status is nil.
func listRange(ctx context.Context, tx on, tenant string, status *store.RunStatus, q store.RunQuery) ([]listed, error) {
	after := !q.AfterUpdated.IsZero() || q.AfterRunID != ""
	var query string
	switch {
	case status == nil && !after:
		query = qRunsFirst
	case status == nil:
		query = qRunsAfter
	case !after:
		query = qRunsFirstIn
	default:
		query = qRunsAfterIn
	}
	args := []any{tenant}
	if status != nil {
		args = append(args, string(*status))
	}
	if after {
		args = append(args, keyOf(nanos(q.AfterUpdated)), q.AfterRunID)
	}
	rows, err := tx.rows(ctx, query, append(args, q.Limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []listed
	for rows.Next() {
		var r listed
		if err := rows.Scan(&r.runID, &r.planID, &r.version, &r.status, &r.waiting, &r.created, &r.updated, &r.leaseExpires); err != nil {
			return nil, err
		}
		r.key = keyOf(r.updated)
		out = append(out, r)
	}
	return out, rows.Err()
}

// keyOf is listKey's value for an updated column.
func keyOf(updated sql.NullInt64) int64 {
	if !updated.Valid {
		return math.MinInt64
	}
	return updated.Int64
}

// summary checks and decodes the row.
func (r listed) summary() (store.RunSummary, error) {
	what := fmt.Sprintf("the plan of run %q", r.runID)
	switch {
	case r.version > storecodec.PlanVersion:
		return store.RunSummary{}, fmt.Errorf("%s: written in layout version %d, newer than this package's %d: %w",
			what, r.version, storecodec.PlanVersion, store.ErrNewerRecord)
	case r.version < 1:
		return store.RunSummary{}, fmt.Errorf("%s: %w: no layout version", what, store.ErrCorruptRecord)
	case !slices.Contains(store.RunStatuses, store.RunStatus(r.status)):
		return store.RunSummary{}, fmt.Errorf("%s: %w: status %q is none this package writes", what, store.ErrCorruptRecord, r.status)
	}
	waiting, err := storecodec.DecodeWaiting(r.runID, r.waiting)
	if err != nil {
		return store.RunSummary{}, err
	}
	return store.RunSummary{RunID: r.runID, PlanID: r.planID, Status: store.RunStatus(r.status), Waiting: waiting,
		LeaseExpires: fromNanos(r.leaseExpires), Created: fromNanos(r.created), Updated: fromNanos(r.updated)}, nil
}

// distinct returns statuses without repeats, in their first order.
func distinct(statuses []store.RunStatus) []store.RunStatus {
	var out []store.RunStatus
	for _, st := range statuses {
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out
}
