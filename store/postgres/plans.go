package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

const (
	// lockPlanSQL reads the run's plan id and record under a lock that
	// orders concurrent SavePlans of one run but lets step writes through.
	// The record is read whole: the database never parses it.
	lockPlanSQL = `SELECT plan_id, version, record FROM {s}.plans WHERE tenant = $1 AND run_id = $2 FOR NO KEY UPDATE`
	// writePlanSQL writes the plan row and drops the run's step rows unless
	// they are the same plan's: a new plan id starts with no steps, and so
	// does a new run (a step that finished while its run was forgotten
	// leaves a row behind). Judged in the statement's snapshot, so a replica
	// saving the plan a moment after another already did drops no step of
	// it. A row another holder keeps (not $13, the saver) under a lease
	// that has not run out at the clock $14 (NULL: the database's) is not
	// updated, nor is a row whose revision is not $16, the one a save with
	// Update is based on (0 for a save that creates the run, which no row
	// has; NULL: a save without Update, which checks none):
	// both judged on the row as locked, the one lockPlanSQL locked or, for
	// a run two savers create at once, the one the first committed. It
	// then changes no row, and SavePlan rolls back (ErrFenced). The row is
	// written at revision $15.
	writePlanSQL = `WITH dropped AS (
	DELETE FROM {s}.steps WHERE tenant = $1 AND run_id = $2
	AND NOT EXISTS (SELECT 1 FROM {s}.plans WHERE tenant = $1 AND run_id = $2 AND plan_id = $3)
)
INSERT INTO {s}.plans AS p (tenant, run_id, plan_id, version, status, record, created, updated, waiting, delegation, holder, lease_expires, rev)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $15)
ON CONFLICT (tenant, run_id) DO UPDATE SET plan_id = excluded.plan_id, version = excluded.version,
	status = excluded.status, record = excluded.record, created = excluded.created, updated = excluded.updated,
	waiting = excluded.waiting, delegation = excluded.delegation, holder = excluded.holder, lease_expires = excluded.lease_expires,
	rev = excluded.rev
WHERE (coalesce(p.holder, '') IN ('', $13::text) OR p.lease_expires IS NULL OR p.lease_expires <= coalesce($14::timestamptz, now()))
	AND ($16::bigint IS NULL OR p.rev = $16::bigint)`
	// saveStepSQL writes a step's row if its run has a plan.
	saveStepSQL = `INSERT INTO {s}.steps (tenant, run_id, step_id, plan_id, version, record)
SELECT $1, $2::text, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM {s}.plans WHERE tenant = $1 AND run_id = $2)` + stepConflict
	stepConflict = `
ON CONFLICT (tenant, run_id, step_id) DO UPDATE SET plan_id = excluded.plan_id, version = excluded.version, record = excluded.record`
	// loadPlanSQL reads the plan and its steps in one statement, so in one
	// snapshot.
	loadPlanSQL = `SELECT p.version, p.record, p.status, p.waiting, p.delegation, p.holder, p.lease_expires, p.rev,
	ARRAY(SELECT s.step_id FROM {s}.steps s WHERE s.tenant = p.tenant AND s.run_id = p.run_id ORDER BY s.step_id),
	ARRAY(SELECT s.version FROM {s}.steps s WHERE s.tenant = p.tenant AND s.run_id = p.run_id ORDER BY s.step_id),
	ARRAY(SELECT s.record FROM {s}.steps s WHERE s.tenant = p.tenant AND s.run_id = p.run_id ORDER BY s.step_id)
FROM {s}.plans p WHERE p.tenant = $1 AND p.run_id = $2`
	// Forget's statements, in one transaction and in this order. The
	// plan and then its steps go first, each row locked in the order
	// SavePlan locks them. Then the run's histories row is locked (made if
	// it has none): the run's appenders that took numbers have committed,
	// and the others wait for the end of the transaction. Then the history
	// goes, counter and events, by a statement whose snapshot sees every
	// event numbered. Every writer takes its locks in this order (plan
	// row, step rows, histories row), so none waits for another in a
	// circle.
	forgetPlanSQL  = `DELETE FROM {s}.plans WHERE tenant = $1 AND run_id = $2`
	forgetStepsSQL = `DELETE FROM {s}.steps WHERE tenant = $1 AND run_id = $2`
	lockHistorySQL = `INSERT INTO {s}.histories AS h (tenant, run_id, last_seq, updated) VALUES ($1, $2, 0, now())
ON CONFLICT (tenant, run_id) DO UPDATE SET last_seq = h.last_seq`
	forgetHistorySQL = `WITH events AS (DELETE FROM {s}.events WHERE tenant = $1 AND run_id = $2)
DELETE FROM {s}.histories WHERE tenant = $1 AND run_id = $2`
)

// jointSQL is CompleteStep's or ReleaseStep's statement: the fenced claim
// write (set, parameters $1 to $4) applies only if the run has a plan, the
// step's record (parameters $5 to $9) is written only if it applied, and
// the events ($10, an array) are appended only if the record was written.
// $11 is the clock (NULL: the database's) that stamps the claim and the
// history. One statement, so all or none. The join reads the plan row without
// locking it: a concurrent SavePlan of the run does not wait for steps.
//
// Each write reads the one before it, which orders the locks the
// statement takes: the claim row, the step row, then the run's histories
// row. That last lock is what numbers the events in commit order (see
// appendSQL): it is taken last so that it is held for the shortest time,
// and always after the step row, as Forget takes them too. A write with
// no events does not touch the histories row at all.
func jointSQL(set string) string {
	return `WITH written AS (
	UPDATE {s}.claims AS c SET ` + strings.ReplaceAll(set, "{now}", clockAt(11)) + ` FROM {s}.plans AS p
	WHERE c.tenant = $1 AND c.key = $2 AND c.epoch = $3 AND c.state = 'acquired' AND p.tenant = $1 AND p.run_id = $5::text
	RETURNING 1
), step AS (
	INSERT INTO {s}.steps (tenant, run_id, step_id, plan_id, version, record)
	SELECT $1, $5::text, $6::text, $7::text, $9::integer, $8::bytea FROM written` + stepConflict + `
	RETURNING 1
), counter AS (
	INSERT INTO {s}.histories AS h (tenant, run_id, last_seq, updated)
	SELECT $1, $5::text, cardinality($10::bytea[]), ` + clockAt(11) + ` FROM step WHERE cardinality($10::bytea[]) > 0` + counterConflict + `
), appended AS (
	INSERT INTO {s}.events (tenant, run_id, seq, event)
	SELECT $1, $5::text, counter.last_seq - cardinality($10::bytea[]) + e.n, e.event
	FROM counter, unnest($10::bytea[]) WITH ORDINALITY AS e(event, n)
)
SELECT count(*) FROM written`
}

// whyNotSQL says why a joint write did not apply: whether the caller's
// epoch holds the key (NULL: no such key), and whether the run has a plan.
// Parameters: tenant, key, epoch, run.
const whyNotSQL = `SELECT (SELECT epoch = $3 AND state = 'acquired' FROM {s}.claims WHERE tenant = $1 AND key = $2),
	EXISTS (SELECT 1 FROM {s}.plans WHERE tenant = $1 AND run_id = $4)`

// jointAttempts bounds how often a joint write is tried again when the plan
// it missed appeared meanwhile.
const jointAttempts = 3

// savedAt is when a record is saved, by the saver's clock (its Updated),
// or the clock now gives (the store's, NULL for the database's) for one
// that does not say.
func savedAt(updated time.Time, now any) any {
	if updated.IsZero() {
		return now
	}
	return updated
}

// SavePlan implements store.PlanStore. Rewriting the same plan keeps its
// creation time and its steps; a new plan id drops the steps of the old one,
// in the same transaction; a record to update (rec.Update) that is gone is
// ErrNoRecord. What the run waits for, its delegation, its
// holder and the holder's lease are written as they are given, each NULL
// for none (an empty holder, a zero lease), but for the holder, NULL when
// the lease is zero: the save lets the run go. The row is written at
// revision rec.Rev+1. A run another holder keeps, its lease running past
// the save's time (rec.Updated), is ErrFenced, and so is a save with
// Update whose rec.Rev is no longer the row's revision (the run was saved
// since): both judged by the statement that writes the row, under its
// lock, so of savers based on one revision at once one saves. Nothing is
// written then.
func (s *Store) SavePlan(ctx context.Context, rec *store.PlanRecord) error {
	const op = "save plan"
	if rec == nil {
		return storeErr(op, errors.New("no record to save"))
	}
	if err := storecodec.CheckWritable(rec.Version); err != nil {
		return storeErr(op, err)
	}
	c := *rec
	c.Version = storecodec.PlanVersion
	waiting, err := storecodec.EncodeWaiting(c.Waiting)
	if err != nil {
		return storeErr(op, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var (
			oldPlan   string
			oldColumn int
			oldDoc    []byte
		)
		err := tx.QueryRow(ctx, s.q.lockPlan, c.Tenant, c.RunID).Scan(&oldPlan, &oldColumn, &oldDoc)
		switch {
		case errors.Is(err, pgx.ErrNoRows) && c.Update:
			return store.ErrNoRecord // read or written before, and dropped since: never written back
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			oldCreated, err := storecodec.CheckReplace(c.RunID, oldColumn, oldDoc)
			switch {
			case err != nil:
				return err
			case oldPlan == c.PlanID && !oldCreated.IsZero():
				// A record that cannot say when it was created is replaced
				// by this one, which can.
				c.Created = oldCreated
			}
		}
		// The plan's times are in its document; its steps are rows of
		// their own.
		doc, err := storecodec.EncodePlan(&c, storecodec.TimesInDocument)
		if err != nil {
			return err
		}
		held := !c.LeaseExpires.IsZero() // a zero lease lets the run go
		tag, err := tx.Exec(ctx, s.q.writePlan, c.Tenant, c.RunID, c.PlanID, c.Version, string(c.Status), doc, c.Created, c.Updated,
			waiting, []byte(c.Delegation), // nil: NULL
			pgtype.Text{String: c.Holder, Valid: held && c.Holder != ""}, pgtype.Timestamptz{Time: c.LeaseExpires, Valid: held},
			c.Holder, savedAt(c.Updated, s.now()), c.Rev+1, basedOn(&c))
		switch {
		case err != nil:
			return err
		case tag.RowsAffected() == 0:
			return store.ErrFenced // another execution holds the run, or saved it since: roll back
		case len(c.Events) == 0:
			return nil
		}
		// The plan's row is locked: the history's counter comes next, as
		// in every write that takes both.
		_, err = tx.Exec(ctx, s.q.appendEvents, c.Tenant, c.RunID, eventsParam(c.Events), s.now())
		return err
	})
	switch {
	case errors.Is(err, store.ErrNoRecord), errors.Is(err, store.ErrFenced):
		return err // a run that is gone, or held, is an answer, not a store that failed
	case err != nil:
		return storeErr(op, err)
	}
	return nil
}

// SaveStep implements store.PlanStore. A run with no plan is ErrNoRecord.
func (s *Store) SaveStep(ctx context.Context, tenant, runID string, step store.StepRecord) error {
	const op = "save step"
	doc, err := storecodec.EncodeStep(step)
	if err != nil {
		return storeErr(op, err)
	}
	tag, err := s.exec(ctx, s.q.saveStep, tenant, runID, step.StepID, step.PlanID, storecodec.PlanVersion, doc)
	switch {
	case err != nil:
		return storeErr(op, err)
	case tag.RowsAffected() == 0:
		return store.ErrNoRecord
	}
	return nil
}

// CompleteStep implements store.StepStore: the claim is completed, the
// step recorded and its events appended by one statement, so all or none.
// It is the second and last round trip of an executed step, after Claim.
func (s *Store) CompleteStep(ctx context.Context, w *store.StepWrite) error {
	return s.jointWrite(ctx, "complete step", s.q.completeStep, w, storecodec.EncodeOutcome(w.Outcome))
}

// ReleaseStep implements store.StepStore, in one statement like
// CompleteStep.
func (s *Store) ReleaseStep(ctx context.Context, w *store.StepWrite) error {
	return s.jointWrite(ctx, "release step", s.q.releaseStep, w, w.InDoubt)
}

// jointWrite runs CompleteStep's or ReleaseStep's statement, with arg as
// its claim write's own parameter. When it does not apply it says why, as
// Complete (or Release) then SaveStep would: ErrNoRecord for a key never
// claimed, ErrFenced for an epoch that no longer holds the key, ErrNoRecord
// for a run with no plan. It wrote nothing.
func (s *Store) jointWrite(ctx context.Context, op, sql string, w *store.StepWrite, arg any) error {
	if w == nil {
		return storeErr(op, errors.New("no step write"))
	}
	doc, err := storecodec.EncodeStep(w.Record)
	if err != nil {
		return storeErr(op, err)
	}
	key, events := w.Key, eventsParam(w.Events)
	for range jointAttempts {
		var applied int64
		err := s.scan(ctx, sql, []any{key.Tenant, key.Digest, w.Epoch, arg, w.RunID, w.Record.StepID, w.Record.PlanID, doc, storecodec.PlanVersion, events, s.now()}, &applied)
		switch {
		case err != nil:
			return storeErr(op, err)
		case applied == 1:
			return nil
		}
		var (
			holds   *bool
			planned bool
		)
		if err := s.scan(ctx, s.q.whyNot, []any{key.Tenant, key.Digest, w.Epoch, w.RunID}, &holds, &planned); err != nil {
			return storeErr(op, err)
		}
		switch {
		case holds == nil:
			return store.ErrNoRecord
		case !*holds:
			return store.ErrFenced // for good: epochs only go up
		case !planned:
			return store.ErrNoRecord
		}
		// The plan was saved after the write looked for it: try again.
	}
	return store.ErrNoRecord
}

// LoadPlan implements store.PlanStore. A record written by a newer
// version of this package is a *store.Error wrapping
// store.ErrNewerRecord; one that cannot be decoded, that holds a status
// this package never writes (in its document or its status column), or
// whose waiting column is damaged wraps store.ErrCorruptRecord. The
// status is the column's: TakeRun changes it without rewriting the
// document. Holder and LeaseExpires are zero when NULL.
func (s *Store) LoadPlan(ctx context.Context, tenant, runID string) (*store.PlanRecord, error) {
	const op = "load plan"
	var (
		version      int
		doc          []byte
		status       string
		waiting      []byte
		delegation   []byte
		holder       pgtype.Text
		expires      pgtype.Timestamptz
		rev          int64
		stepIDs      []string
		stepVersions []int
		stepDocs     [][]byte
	)
	err := s.scan(ctx, s.q.loadPlan, []any{tenant, runID}, &version, &doc, &status, &waiting, &delegation, &holder, &expires, &rev, &stepIDs, &stepVersions, &stepDocs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNoRecord
	}
	if err != nil {
		return nil, storeErr(op, err)
	}
	rec, err := storecodec.DecodePlan(tenant, runID, version, doc)
	if err != nil {
		return nil, storeErr(op, err)
	}
	if rec.Waiting, err = storecodec.DecodeWaiting(runID, waiting); err != nil {
		return nil, storeErr(op, err)
	}
	if !slices.Contains(store.RunStatuses, store.RunStatus(status)) {
		return nil, storeErr(op, fmt.Errorf("plan of run %q: %w: status column %q is none this package writes", runID, store.ErrCorruptRecord, status))
	}
	rec.Status = store.RunStatus(status)
	rec.Delegation = delegation // nil when NULL
	rec.Holder, rec.Rev = holder.String, rev
	if expires.Valid {
		rec.LeaseExpires = expires.Time.UTC()
	}
	rec.Steps = make(map[string]store.StepRecord, len(stepDocs))
	for i := range stepDocs {
		st, err := storecodec.DecodeStep(runID, stepIDs[i], stepVersions[i], stepDocs[i])
		if err != nil {
			return nil, storeErr(op, err)
		}
		rec.Steps[st.StepID] = st
		// A step's write does not touch the plan row, so the plan's last
		// change is found here.
		if st.Finished.After(rec.Updated) {
			rec.Updated = st.Finished
		}
	}
	return rec, nil
}

// Forget implements store.PlanStore, dropping the plan, its steps and
// the run's history in one transaction. The run's idempotency claims stay:
// they are what keeps its effects from being done twice. A run appended to
// after Forget starts a history anew, from 1.
func (s *Store) Forget(ctx context.Context, tenant, runID string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for _, sql := range []string{s.q.forgetPlan, s.q.forgetSteps, s.q.lockHistory, s.q.forgetHistory} {
			if _, err := tx.Exec(ctx, sql, tenant, runID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return storeErr("forget", err)
	}
	return nil
}

// basedOn is the revision a save is based on, as writePlanSQL takes it:
// the one read, for a save with Update; none for a save that creates the
// run (no stored row has revision 0); NULL for a save that checks none.
func basedOn(rec *store.PlanRecord) pgtype.Int8 {
	switch {
	case rec.Create:
		return pgtype.Int8{Int64: 0, Valid: true}
	case rec.Update:
		return pgtype.Int8{Int64: rec.Rev, Valid: true}
	}
	return pgtype.Int8{}
}
