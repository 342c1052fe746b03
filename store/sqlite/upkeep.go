package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

// Spend implements store.CeilingStore. The check and the record are one
// write transaction, begun IMMEDIATE: it holds the file's write lock from
// its first read, so spenders in this process or another are counted one
// after another and never take the grant past its ceiling together. The
// window's amounts are summed as exact decimals. A grant and key already
// recorded are moved to sp.At with sp.Amount, checked as a new spend
// without the key's own record, by the same statement that records a
// new one; recorded at that time and amount already, they are left as
// they are, and succeed. A spend the ceiling refuses is store.ErrCeiling,
// and leaves what was recorded as it was.
func (s *Store) Spend(ctx context.Context, sp store.Spend, window time.Duration, ceiling decimal.Decimal) error {
	const op = "spend"
	return s.write(ctx, op, func(tx on) error {
		var (
			amount string
			at     int64
		)
		err := tx.row(ctx, qSpendKnown, sp.Grant, sp.Key).Scan(&amount, &at)
		switch {
		case err == nil:
			if d, derr := decimal.NewFromString(amount); derr == nil && d.Equal(sp.Amount) && at == instant(sp.At) {
				return nil // this step spent already, as it spends now
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		spent, err := sumWindow(ctx, tx, sp.Grant, sp.At, window, []string{sp.Key})
		if err != nil {
			return err
		}
		if spent.Add(sp.Amount).GreaterThan(ceiling) {
			return store.ErrCeiling
		}
		_, err = tx.exec(ctx, qSpendAdd, sp.Grant, sp.Key, sp.Tenant, sp.Amount.String(), instant(sp.At))
		return err
	})
}

// Spent implements store.CeilingStore: it sums the window in one snapshot,
// as exact decimals.
func (s *Store) Spent(ctx context.Context, grant string, at time.Time, window time.Duration, except []string) (decimal.Decimal, error) {
	spent, err := sumWindow(ctx, on{s.rs, nil}, grant, at, window, except)
	if err != nil {
		return decimal.Zero, fail("spent", err)
	}
	return spent, nil
}

// sumWindow sums what grant spent within the window of a spend at at:
// every spend after at-window, a later one too, but for the spends of the
// keys in except.
func sumWindow(ctx context.Context, o on, grant string, at time.Time, window time.Duration, except []string) (decimal.Decimal, error) {
	rows, err := o.rows(ctx, qSpendWindow, grant, instant(at.Add(-window)))
	if err != nil {
		return decimal.Zero, err
	}
	defer rows.Close()
	spent := decimal.Zero
	for rows.Next() {
		var key, amount string
		if err := rows.Scan(&key, &amount); err != nil {
			return decimal.Zero, err
		}
		if slices.Contains(except, key) {
			continue
		}
		d, err := decimal.NewFromString(amount)
		if err != nil {
			return decimal.Zero, fmt.Errorf("a spend of grant %q: %w: amount %q is not a decimal", grant, store.ErrCorruptRecord, amount)
		}
		spent = spent.Add(d)
	}
	return spent, rows.Err()
}

// Prune implements store.Pruner, in one write transaction, so that the
// counts are exactly what it dropped. Every statement names the tenant.
// Runs completed or failed and last updated before `before` (a run never
// updated counts as updated at the zero time) go with their steps and
// events; then histories with no plan record whose last event was stored
// before it; then claims of effects once per run, neither in flight nor in
// doubt, last written before it, whose run has no plan record; decisions
// made before it; spends made before it. It goes by columns alone (status,
// times, a claim's state and kind), never by documents, so it drops a row
// whatever layout its document is in. Claims and decisions stored before
// schema 3 whose kind or time is not known are kept.
func (s *Store) Prune(ctx context.Context, tenant string, before time.Time) (store.Pruned, error) {
	var p store.Pruned
	cut := instant(before)
	err := s.write(ctx, "prune", func(tx on) error {
		p = store.Pruned{}
		for _, q := range []string{qPruneRunEvents, qPruneRunSteps} {
			if _, err := tx.exec(ctx, q, tenant, cut); err != nil {
				return err
			}
		}
		var err error
		if p.Runs, err = tx.affected(ctx, qPruneRuns, tenant, cut); err != nil {
			return err
		}
		if p.Histories, err = pruneOrphanHistories(ctx, tx, tenant, cut); err != nil {
			return err
		}
		if p.Claims, err = tx.affected(ctx, qPruneClaims, tenant, cut); err != nil {
			return err
		}
		if p.Decisions, err = tx.affected(ctx, qPruneDecisions, tenant, cut); err != nil {
			return err
		}
		p.Spends, err = tx.affected(ctx, qPruneSpends, tenant, cut)
		return err
	})
	if err != nil {
		return store.Pruned{}, err
	}
	return p, nil
}

// pruneOrphanHistories drops the histories of tenant's runs that have no
// plan record and whose last event was stored before cut, and counts them.
func pruneOrphanHistories(ctx context.Context, tx on, tenant string, cut int64) (int64, error) {
	rows, err := tx.rows(ctx, qOrphanHistories, tenant, cut)
	if err != nil {
		return 0, err
	}
	var runs []string
	for rows.Next() {
		var run string
		if err := rows.Scan(&run); err != nil {
			rows.Close()
			return 0, err
		}
		runs = append(runs, run)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	for _, run := range runs {
		if _, err := tx.exec(ctx, qEventsDelete, tenant, run); err != nil {
			return 0, err
		}
	}
	return int64(len(runs)), nil
}

// Stalled implements store.Recoverer. It reads, in one statement, the
// partial index plans_unfinished from its start: every tenant's running
// and interrupted runs by tenant and run id, the interrupted ones and the
// running ones whose lease ran out at now (or that have none) listed.
// Runs of a layout newer than this package's are not: it could not resume
// them.
func (s *Store) Stalled(ctx context.Context, now time.Time, limit int) ([]store.RunRef, error) {
	const op = "stalled"
	if limit < 1 {
		return nil, nil
	}
	rows, err := on{s.rs, nil}.rows(ctx, qStalled, instant(now), storecodec.PlanVersion, limit)
	if err != nil {
		return nil, storeErr(op, err)
	}
	defer rows.Close()
	var out []store.RunRef
	for rows.Next() {
		var ref store.RunRef
		if err := rows.Scan(&ref.Tenant, &ref.RunID); err != nil {
			return nil, storeErr(op, err)
		}
		out = append(out, ref)
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr(op, err)
	}
	return out, nil
}

// TakeRun implements store.Recoverer. One conditional UPDATE takes the run
// if it is stalled at now: of takers at once, in this process or another,
// the first to write wins and the others find the run held. The run's
// document then says it is running, as its row does; a document that
// cannot be read is left as it is (LoadPlan refuses it anyway).
func (s *Store) TakeRun(ctx context.Context, run store.RunRef, holder string, now time.Time, lease time.Duration) (bool, error) {
	var took bool
	err := s.write(ctx, "take run", func(tx on) error {
		took = false
		var (
			version int
			doc     []byte
		)
		err := tx.row(ctx, qRunTake, instant(now), storecodec.PlanVersion, run.Tenant, run.RunID, orNull(holder), nanos(now.Add(lease))).
			Scan(&version, &doc)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil // no such run, or not stalled
		case err != nil:
			return err
		}
		took = true
		rec, err := storecodec.DecodePlan(run.Tenant, run.RunID, version, doc)
		if err != nil {
			return nil
		}
		rec.Status = store.RunRunning
		if doc, err = storecodec.EncodePlan(rec, storecodec.TimesInColumns); err != nil {
			return err
		}
		_, err = tx.exec(ctx, qPlanRecord, string(doc), run.Tenant, run.RunID)
		return err
	})
	if err != nil {
		return false, err
	}
	return took, nil
}

// ExtendRun implements store.Recoverer: it moves the lease on while holder
// holds the running run; otherwise it is store.ErrFenced, or
// store.ErrNoRecord when the run has no plan record.
func (s *Store) ExtendRun(ctx context.Context, run store.RunRef, holder string, expires time.Time) error {
	return s.write(ctx, "extend run", func(tx on) error {
		return fenced(ctx, tx, qRunExtend, []any{nanos(expires), run.Tenant, run.RunID, orNull(holder)}, qRunExists, run.Tenant, run.RunID)
	})
}
