package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

// The listing statements read a page of a tenant's runs, most recently
// updated first, then by run id in byte order, after the run the cursor
// names ($2 its update time, $3 its run id; the first page's cursor is
// infinity and ""), at most $4. The cursor's condition is written so that
// its first half (updated <= $2) bounds an index range and the second
// only drops the runs updated at $2 that came before: a page is a range
// scan of plans_by_update or plans_by_status, whatever the depth.
const (
	runColumns = `run_id, plan_id, version, status, waiting, created, updated, lease_expires`
	afterRun   = `updated <= $2 AND (updated < $2 OR run_id COLLATE "C" > $3)`
	runOrder   = `updated DESC, run_id COLLATE "C"`
	// listRunsSQL lists every status.
	listRunsSQL = `SELECT ` + runColumns + ` FROM {s}.plans
WHERE tenant = $1 AND ` + afterRun + `
ORDER BY ` + runOrder + ` LIMIT $4`
	// listRunsByStatusSQL lists the statuses $5 (each once): a page of
	// each, read as a range of plans_by_status, then the first $4 of
	// them. It reads at most $4 runs of each status, whichever page.
	listRunsByStatusSQL = `SELECT r.* FROM unnest($5::text[]) AS st(status), LATERAL (
	SELECT ` + runColumns + ` FROM {s}.plans
	WHERE tenant = $1 AND status = st.status AND ` + afterRun + `
	ORDER BY ` + runOrder + ` LIMIT $4
) AS r
ORDER BY ` + runOrder + ` LIMIT $4`
)

// ListRuns implements store.RunLister. A page costs one statement that
// reads, through an index, the runs it returns (with several statuses, at
// most q.Limit of each status), however many runs the tenant has and
// however deep the page.
//
// A run's Updated in a listing is its plans row's: when its record was
// last saved, as the executor saves it at each change of status. Steps
// that finished since do not move it (LoadPlan's Updated counts them): a
// step's write does not touch its run's row. The database keeps microseconds; a
// cursor taken from a listed run continues after it exactly. A run whose
// row a newer version of this package wrote is a *store.Error wrapping
// store.ErrNewerRecord; one with a status this package never writes, or a
// damaged waiting column, wraps store.ErrCorruptRecord.
func (s *Store) ListRuns(ctx context.Context, tenant string, q store.RunQuery) ([]store.RunSummary, error) {
	const op = "list runs"
	if q.Limit <= 0 {
		return nil, nil
	}
	sql, args := s.listQuery(tenant, q)
	var out []store.RunSummary
	for attempt := 1; ; attempt++ {
		out = out[:0]
		rows, err := s.pool.Query(ctx, sql, args...)
		if err == nil {
			out, err = scanRuns(rows, out)
		}
		if !s.again(ctx, attempt, err) {
			if err != nil {
				return nil, storeErr(op, err)
			}
			return out, nil
		}
	}
}

// listQuery is the statement that lists q and its arguments.
func (s *Store) listQuery(tenant string, q store.RunQuery) (string, []any) {
	after := pgtype.Timestamptz{Time: q.AfterUpdated, Valid: true}
	if q.AfterUpdated.IsZero() && q.AfterRunID == "" {
		after = pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	args := []any{tenant, after, q.AfterRunID, q.Limit}
	if len(q.Statuses) == 0 {
		return s.q.listRuns, args
	}
	statuses := make([]string, 0, len(q.Statuses))
	for _, st := range q.Statuses {
		if !slices.Contains(statuses, string(st)) {
			statuses = append(statuses, string(st))
		}
	}
	return s.q.listRunsByStatus, append(args, statuses)
}

// scanRuns reads listed runs, refusing one it cannot read.
func scanRuns(rows pgx.Rows, out []store.RunSummary) ([]store.RunSummary, error) {
	var (
		r       store.RunSummary
		version int
		status  string
		waiting []byte
		lease   pgtype.Timestamptz
	)
	_, err := pgx.ForEachRow(rows, []any{&r.RunID, &r.PlanID, &version, &status, &waiting, &r.Created, &r.Updated, &lease}, func() error {
		what := fmt.Sprintf("the listing of run %q", r.RunID)
		switch {
		case version > storecodec.PlanVersion:
			return fmt.Errorf("%s: written in layout version %d, newer than this package's %d: %w", what, version, storecodec.PlanVersion, store.ErrNewerRecord)
		case version < 1:
			return fmt.Errorf("%s: %w: no layout version", what, store.ErrCorruptRecord)
		case !slices.Contains(store.RunStatuses, store.RunStatus(status)):
			return fmt.Errorf("%s: %w: status %q is none this package writes", what, store.ErrCorruptRecord, status)
		}
		r.Status = store.RunStatus(status)
		var err error
		if r.Waiting, err = storecodec.DecodeWaiting(r.RunID, waiting); err != nil {
			return err
		}
		r.Created, r.Updated, r.LeaseExpires = r.Created.UTC(), r.Updated.UTC(), time.Time{}
		if lease.Valid {
			r.LeaseExpires = lease.Time.UTC()
		}
		out = append(out, r)
		return nil
	})
	return out, err
}
