package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec"
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
	// it.
	writePlanSQL = `WITH dropped AS (
	DELETE FROM {s}.steps WHERE tenant = $1 AND run_id = $2
	AND NOT EXISTS (SELECT 1 FROM {s}.plans WHERE tenant = $1 AND run_id = $2 AND plan_id = $3)
)
INSERT INTO {s}.plans (tenant, run_id, plan_id, version, status, record, created, updated)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (tenant, run_id) DO UPDATE SET plan_id = excluded.plan_id, version = excluded.version,
	status = excluded.status, record = excluded.record, created = excluded.created, updated = excluded.updated`
	// saveStepSQL writes a step's row if its run has a plan.
	saveStepSQL = `INSERT INTO {s}.steps (tenant, run_id, step_id, plan_id, version, record)
SELECT $1, $2::text, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM {s}.plans WHERE tenant = $1 AND run_id = $2)` + stepConflict
	stepConflict = `
ON CONFLICT (tenant, run_id, step_id) DO UPDATE SET plan_id = excluded.plan_id, version = excluded.version, record = excluded.record`
	// loadPlanSQL reads the plan and its steps in one statement, so in one
	// snapshot.
	loadPlanSQL = `SELECT p.version, p.record,
	ARRAY(SELECT s.step_id FROM {s}.steps s WHERE s.tenant = p.tenant AND s.run_id = p.run_id ORDER BY s.step_id),
	ARRAY(SELECT s.version FROM {s}.steps s WHERE s.tenant = p.tenant AND s.run_id = p.run_id ORDER BY s.step_id),
	ARRAY(SELECT s.record FROM {s}.steps s WHERE s.tenant = p.tenant AND s.run_id = p.run_id ORDER BY s.step_id)
FROM {s}.plans p WHERE p.tenant = $1 AND p.run_id = $2`
	forgetSQL = `WITH plan AS (DELETE FROM {s}.plans WHERE tenant = $1 AND run_id = $2)
DELETE FROM {s}.steps WHERE tenant = $1 AND run_id = $2`
)

// jointSQL is CompleteStep's or ReleaseStep's statement: the fenced claim
// write (set, parameters $1 to $4) applies only if the run has a plan, and
// the step's record (parameters $5 to $9) is written only if it applied.
// One statement, so both or neither. The join reads the plan row without
// locking it: a concurrent SavePlan of the run does not wait for steps.
func jointSQL(set string) string {
	return `WITH written AS (
	UPDATE {s}.claims AS c SET ` + set + ` FROM {s}.plans AS p
	WHERE c.tenant = $1 AND c.key = $2 AND c.epoch = $3 AND c.state = 'acquired' AND p.tenant = $1 AND p.run_id = $5::text
	RETURNING 1
)
INSERT INTO {s}.steps (tenant, run_id, step_id, plan_id, version, record)
SELECT $1, $5::text, $6::text, $7::text, $9::integer, $8::bytea FROM written` + stepConflict
}

// whyNotSQL says why a joint write did not apply: whether the caller's
// epoch holds the key (NULL: no such key), and whether the run has a plan.
// Parameters: tenant, key, epoch, run.
const whyNotSQL = `SELECT (SELECT epoch = $3 AND state = 'acquired' FROM {s}.claims WHERE tenant = $1 AND key = $2),
	EXISTS (SELECT 1 FROM {s}.plans WHERE tenant = $1 AND run_id = $4)`

// jointAttempts bounds how often a joint write is tried again when the plan
// it missed appeared meanwhile.
const jointAttempts = 3

// SavePlan implements planexec.PlanStore. Rewriting the same plan keeps its
// creation time and its steps; a new plan id drops the steps of the old one,
// in the same transaction.
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
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var (
			oldPlan   string
			oldColumn int
			oldDoc    []byte
		)
		err := tx.QueryRow(ctx, s.q.lockPlan, c.Tenant, c.RunID).Scan(&oldPlan, &oldColumn, &oldDoc)
		switch {
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
		_, err = tx.Exec(ctx, s.q.writePlan, c.Tenant, c.RunID, c.PlanID, c.Version, string(c.Status), doc, c.Created, c.Updated)
		return err
	})
	if err != nil {
		return storeErr(op, err)
	}
	return nil
}

// SaveStep implements planexec.PlanStore. A run with no plan is ErrNoRecord.
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

// CompleteStep implements store.StepStore: the claim is completed and the
// step recorded by one statement, so both or neither. It is the second and
// last round trip of an executed step, after Claim.
func (s *Store) CompleteStep(ctx context.Context, key planexec.Key, epoch int64, outcome json.RawMessage, runID string, rec store.StepRecord) error {
	return s.jointWrite(ctx, "complete step", s.q.completeStep, key, epoch, storecodec.EncodeOutcome(outcome), runID, rec)
}

// ReleaseStep implements store.StepStore, in one statement like
// CompleteStep.
func (s *Store) ReleaseStep(ctx context.Context, key planexec.Key, epoch int64, inDoubt bool, runID string, rec store.StepRecord) error {
	return s.jointWrite(ctx, "release step", s.q.releaseStep, key, epoch, inDoubt, runID, rec)
}

// jointWrite runs CompleteStep's or ReleaseStep's statement. When it does
// not apply it says why, as Complete (or Release) then SaveStep would:
// ErrNoRecord for a key never claimed, ErrFenced for an epoch that no longer
// holds the key, ErrNoRecord for a run with no plan. It wrote nothing.
func (s *Store) jointWrite(ctx context.Context, op, sql string, key planexec.Key, epoch int64, arg any, runID string, rec store.StepRecord) error {
	doc, err := storecodec.EncodeStep(rec)
	if err != nil {
		return storeErr(op, err)
	}
	for range jointAttempts {
		tag, err := s.exec(ctx, sql, key.Tenant, key.Digest, epoch, arg, runID, rec.StepID, rec.PlanID, doc, storecodec.PlanVersion)
		switch {
		case err != nil:
			return storeErr(op, err)
		case tag.RowsAffected() == 1:
			return nil
		}
		var (
			holds   *bool
			planned bool
		)
		if err := s.scan(ctx, s.q.whyNot, []any{key.Tenant, key.Digest, epoch, runID}, &holds, &planned); err != nil {
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

// LoadPlan implements planexec.PlanStore. A record written by a newer
// version of this package is a *store.Error wrapping
// store.ErrNewerRecord; one that cannot be decoded, or that holds a
// status this package never writes, wraps store.ErrCorruptRecord.
func (s *Store) LoadPlan(ctx context.Context, tenant, runID string) (*store.PlanRecord, error) {
	const op = "load plan"
	var (
		version      int
		doc          []byte
		stepIDs      []string
		stepVersions []int
		stepDocs     [][]byte
	)
	err := s.scan(ctx, s.q.loadPlan, []any{tenant, runID}, &version, &doc, &stepIDs, &stepVersions, &stepDocs)
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

// Forget implements planexec.PlanStore, dropping the plan and its steps in
// one statement. The run's idempotency claims stay: they are what keeps its
// effects from being done twice.
func (s *Store) Forget(ctx context.Context, tenant, runID string) error {
	if _, err := s.exec(ctx, s.q.forget, tenant, runID); err != nil {
		return storeErr("forget", err)
	}
	return nil
}
