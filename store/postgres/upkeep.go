package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

// Ceilings. A spend is two statements sent together and run in one
// (implicit) transaction: the first locks the grant's row, made if it has
// none, until the transaction ends; the second, whose snapshot is taken
// once the lock is held, sees every spend of the grant committed before
// and records this one (or moves the key's spend to it) if the window has
// room. The
// spends of one grant are so checked one at a time, on whichever
// connection, pool or replica, and never pass the ceiling together.
const (
	// lockGrantSQL locks grant $1's row.
	lockGrantSQL = `INSERT INTO {s}.grants AS g (grant_id) VALUES ($1)
ON CONFLICT (grant_id) DO UPDATE SET grant_id = excluded.grant_id`
	// spendSQL records the spend of key $2 under grant $1 (tenant $3,
	// amount $4, at $5), or moves the key's spend there, unless what the
	// grant spent after $6 (a spend at a later time too), but for the
	// key's own spend, plus $4, exceeds the ceiling $7. A key recorded at
	// $5 with $4 already (same) is left as it is. The window is summed
	// whole, from the index, and the key's own spend taken off if it is
	// within it. It says whether the key was so recorded already and
	// whether it recorded it now: neither is ErrCeiling.
	spendSQL = `WITH prior AS (
	SELECT amount, spent_at FROM {s}.spends WHERE grant_id = $1 AND key = $2
), same AS (
	SELECT 1 FROM prior WHERE amount = $4::numeric AND spent_at = $5
), spent AS (
	SELECT coalesce(sum(amount), 0) - coalesce((SELECT amount FROM prior WHERE spent_at > $6), 0) AS total
	FROM {s}.spends WHERE grant_id = $1 AND spent_at > $6
), recorded AS (
	INSERT INTO {s}.spends (grant_id, key, tenant, amount, spent_at)
	SELECT $1, $2, $3, $4::numeric, $5 FROM spent
	WHERE NOT EXISTS (SELECT 1 FROM same) AND spent.total + $4::numeric <= $7::numeric
	ON CONFLICT (grant_id, key) DO UPDATE SET tenant = excluded.tenant, amount = excluded.amount, spent_at = excluded.spent_at
	RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM same), EXISTS (SELECT 1 FROM recorded)`
	// spentSQL sums what grant $1 spent after $2, as text: exact.
	spentSQL = `SELECT coalesce(sum(amount), 0)::text FROM {s}.spends WHERE grant_id = $1 AND spent_at > $2 AND key <> ALL($3::text[])`
)

// Spend implements store.CeilingStore: the check and the record are one
// transaction under the grant's row lock, one round trip. Amounts and the
// ceiling are compared as numeric, exactly. A spend whose grant and key
// are recorded already is moved to sp.At with sp.Amount, by the statement
// that records a new one, and checked as one without the key's old
// record; refused (ErrCeiling), it is left where it was. One recorded at
// sp.At with sp.Amount already is left as it is and succeeds.
func (s *Store) Spend(ctx context.Context, sp store.Spend, window time.Duration, ceiling decimal.Decimal) error {
	args := []any{sp.Grant, sp.Key, sp.Tenant, sp.Amount.String(), sp.At, sp.At.Add(-window), ceiling.String()}
	var same, recorded bool
	for attempt := 1; ; attempt++ {
		b := &pgx.Batch{}
		b.Queue(s.q.lockGrant, sp.Grant)
		b.Queue(s.q.spend, args...).QueryRow(func(row pgx.Row) error { return row.Scan(&same, &recorded) })
		// One Sync for both: they run in one implicit transaction, which
		// Close ends.
		err := s.pool.SendBatch(ctx, b).Close()
		if s.again(ctx, attempt, err) {
			continue
		}
		switch {
		case err != nil:
			return storeErr("spend", err)
		case same || recorded:
			return nil
		}
		return store.ErrCeiling
	}
}

// Spent implements store.CeilingStore.
func (s *Store) Spent(ctx context.Context, grant string, at time.Time, window time.Duration, except []string) (decimal.Decimal, error) {
	const op = "spent"
	var sum string
	if except == nil {
		except = []string{}
	}
	if err := s.scan(ctx, s.q.spent, []any{grant, at.Add(-window), except}, &sum); err != nil {
		return decimal.Zero, storeErr(op, err)
	}
	d, err := decimal.NewFromString(sum)
	if err != nil {
		return decimal.Zero, storeErr(op, fmt.Errorf("the sum of grant %q's spends, %q: %w", grant, sum, err))
	}
	return d, nil
}

// Pruning. Prune is one transaction, its statements in this order, taking
// row locks in the order every other writer takes them (plan row, claim
// row, step rows, histories row), so that none waits for another in a
// circle:
//
//   - an advisory lock on the schema and tenant: one Prune of a tenant at a
//     time (two at once would delete the same rows in orders of their own);
//   - the runs to drop, their plan rows locked in run id order: a SavePlan
//     of one waits, and one that changed a run meanwhile (it is no longer
//     finished, or was saved since) is left out;
//   - their plan rows go; then the claims to drop, whose run has no plan
//     row now; then the runs' step rows; then their histories rows are
//     locked (made if missing, as Forget does: an appender's uncommitted
//     first event is waited for) and the histories go, events and all, by
//     a statement whose snapshot sees every event numbered;
//   - then the histories of runs with no plan, last appended to before the
//     cut, rows locked in run id order (an appender that moved one on
//     meanwhile leaves it out) and dropped likewise;
//   - then decisions and spends.
//
// Rows a newer version of this package wrote (by their version column) are
// left alone.
const (
	// pruneLockSQL: $1 the schema's name, $2 the tenant.
	pruneLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('planexec prune ' || $1 || ' ' || $2, 0))`
	// pruneRunsSQL: $1 tenant, $2 the cut, $3 the plan layout version.
	pruneRunsSQL = `SELECT run_id FROM {s}.plans
WHERE tenant = $1 AND status IN ('completed', 'failed') AND updated < $2 AND version <= $3
ORDER BY run_id COLLATE "C" FOR UPDATE`
	// The statements on runs take the tenant and the run ids ($2, text[]).
	dropPlansSQL = `DELETE FROM {s}.plans WHERE tenant = $1 AND run_id = ANY($2::text[])`
	dropStepsSQL = `DELETE FROM {s}.steps WHERE tenant = $1 AND run_id = ANY($2::text[])`
	// lockHistoriesSQL locks the runs' histories rows in run id order.
	lockHistoriesSQL = `INSERT INTO {s}.histories AS h (tenant, run_id, last_seq, updated)
SELECT $1, r.run_id, 0, now() FROM unnest($2::text[]) AS r(run_id) ORDER BY r.run_id COLLATE "C"
ON CONFLICT (tenant, run_id) DO UPDATE SET last_seq = h.last_seq`
	dropHistoriesSQL = `WITH events AS (DELETE FROM {s}.events WHERE tenant = $1 AND run_id = ANY($2::text[]))
DELETE FROM {s}.histories WHERE tenant = $1 AND run_id = ANY($2::text[])`
	// dropClaimsSQL drops the claims of tenant $1 last written before $2
	// whose effect is once per run, that are settled (completed, or free:
	// given up), of a layout up to $3, and whose run has no plan row.
	dropClaimsSQL = `DELETE FROM {s}.claims AS c
WHERE c.tenant = $1 AND c.updated < $2 AND NOT c.per_tenant AND c.state IN ('completed', 'free') AND c.version <= $3
	AND NOT EXISTS (SELECT 1 FROM {s}.plans AS p WHERE p.tenant = $1 AND p.run_id = c.run_id)`
	// orphanHistoriesSQL locks the histories of tenant $1's runs that have
	// no plan row, last appended to before $2.
	orphanHistoriesSQL = `SELECT h.run_id FROM {s}.histories AS h
WHERE h.tenant = $1 AND h.updated < $2 AND NOT EXISTS (SELECT 1 FROM {s}.plans AS p WHERE p.tenant = $1 AND p.run_id = h.run_id)
ORDER BY h.run_id COLLATE "C" FOR UPDATE OF h`
	// dropDecisionsSQL: $1 tenant, $2 the cut, $3 the decision layout
	// version.
	dropDecisionsSQL = `DELETE FROM {s}.approvals WHERE tenant = $1 AND decided_at < $2 AND version <= $3`
	dropSpendsSQL    = `DELETE FROM {s}.spends WHERE tenant = $1 AND spent_at < $2`
)

// Prune implements store.Pruner, in one transaction: what it reports
// dropped is what it dropped. Runs are judged by their plans row's update
// time (when their record was last saved, as the executor saves it as a
// run ends), claims and histories by when they were last written, by the
// store's clock (WithClock, or the database's), decisions by when they
// were made, spends by their time; all to the microsecond. Its cost grows
// with what it drops, and with the tenant's claims and histories, which it
// reads to find those of runs with no plan.
func (s *Store) Prune(ctx context.Context, tenant string, before time.Time) (store.Pruned, error) {
	var p store.Pruned
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		p = store.Pruned{}
		if _, err := tx.Exec(ctx, s.q.pruneLock, s.schema, tenant); err != nil {
			return err
		}
		runs, err := texts(ctx, tx, s.q.pruneRuns, tenant, before, storecodec.PlanVersion)
		if err != nil {
			return err
		}
		count := func(n *int64, sql string, args ...any) error {
			tag, err := tx.Exec(ctx, sql, args...)
			*n += tag.RowsAffected()
			return err
		}
		var ignored int64
		if len(runs) > 0 {
			if err := count(&p.Runs, s.q.dropPlans, tenant, runs); err != nil {
				return err
			}
		}
		if err := count(&p.Claims, s.q.dropClaims, tenant, before, storecodec.ClaimVersion); err != nil {
			return err
		}
		if len(runs) > 0 {
			for _, sql := range []string{s.q.dropSteps, s.q.lockHistories, s.q.dropHistories} {
				if err := count(&ignored, sql, tenant, runs); err != nil {
					return err
				}
			}
		}
		orphans, err := texts(ctx, tx, s.q.orphanHistories, tenant, before)
		if err != nil {
			return err
		}
		if len(orphans) > 0 {
			if err := count(&p.Histories, s.q.dropHistories, tenant, orphans); err != nil {
				return err
			}
		}
		if err := count(&p.Decisions, s.q.dropDecisions, tenant, before, storecodec.DecisionVersion); err != nil {
			return err
		}
		return count(&p.Spends, s.q.dropSpends, tenant, before)
	})
	if err != nil {
		return store.Pruned{}, storeErr("prune", err)
	}
	return p, nil
}

// texts runs a query of one text column and returns its values.
func texts(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]string, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Recovery. A run is stalled when it is interrupted, or running with a
// lease that ran out at the time given ($1 below; a NULL lease, as a run
// saved running by an earlier version has, ran out long ago). The time is
// the caller's, as leases on runs are: the executor's clock writes them.
const (
	stalledCond = `(status = 'interrupted' OR (status = 'running' AND (lease_expires IS NULL OR lease_expires <= $1)))`
	// stalledSQL lists up to $2 stalled runs of every tenant, of a layout
	// up to $3, by tenant and run id in byte order: a range of
	// plans_unfinished.
	stalledSQL = `SELECT tenant, run_id FROM {s}.plans
WHERE status IN ('running', 'interrupted') AND ` + stalledCond + ` AND version <= $3
ORDER BY tenant COLLATE "C", run_id COLLATE "C" LIMIT $2`
	// takeRunSQL makes $4 the holder of run $3 of tenant $2 until $5, if
	// it is stalled at $1. Takers at once queue on the row's lock; each
	// after the first finds the row changed, judges it again, and finds a
	// live lease.
	takeRunSQL = `UPDATE {s}.plans SET status = 'running', holder = $4, lease_expires = $5
WHERE tenant = $2 AND run_id = $3 AND version <= $6 AND ` + stalledCond
	// extendRunSQL moves holder $3's lease on run $2 of tenant $1 to $4,
	// and says whether it did and whether the run has a plan row.
	extendRunSQL = `WITH extended AS (
	UPDATE {s}.plans SET lease_expires = $4 WHERE tenant = $1 AND run_id = $2 AND holder = $3 AND status IN ('running', 'planning')
	RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM extended), EXISTS (SELECT 1 FROM {s}.plans WHERE tenant = $1 AND run_id = $2)`
)

// Stalled implements store.Recoverer: one statement, a range of the
// plans_unfinished index.
func (s *Store) Stalled(ctx context.Context, now time.Time, limit int) ([]store.RunRef, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []store.RunRef
	for attempt := 1; ; attempt++ {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.q.stalled, now, limit, storecodec.PlanVersion)
		if err == nil {
			var ref store.RunRef
			_, err = pgx.ForEachRow(rows, []any{&ref.Tenant, &ref.RunID}, func() error {
				out = append(out, ref)
				return nil
			})
		}
		if !s.again(ctx, attempt, err) {
			if err != nil {
				return nil, storeErr("stalled", err)
			}
			return out, nil
		}
	}
}

// TakeRun implements store.Recoverer: one conditional UPDATE of the run's
// plans row, so of takers at once, on any replica, one does. The record's
// document keeps the status it was saved with; the status column, which
// LoadPlan and listings read, says running.
func (s *Store) TakeRun(ctx context.Context, run store.RunRef, holder string, now time.Time, lease time.Duration) (bool, error) {
	tag, err := s.exec(ctx, s.q.takeRun, now, run.Tenant, run.RunID, holder, now.Add(lease), storecodec.PlanVersion)
	if err != nil {
		return false, storeErr("take run", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ExtendRun implements store.Recoverer, in one statement.
func (s *Store) ExtendRun(ctx context.Context, run store.RunRef, holder string, expires time.Time) error {
	var extended, exists bool
	if err := s.scan(ctx, s.q.extendRun, []any{run.Tenant, run.RunID, holder, expires}, &extended, &exists); err != nil {
		return storeErr("extend run", err)
	}
	switch {
	case extended:
		return nil
	case exists:
		return store.ErrFenced
	}
	return store.ErrNoRecord
}
