package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/internal/storecodec"
)

// planDoc is what the plans table's record column holds: a PlanRecord
// without its steps (rows of their own) and times (columns of their own).
type planDoc struct {
	Version int                 `json:"version"`
	Tenant  string              `json:"tenant"`
	RunID   string              `json:"run_id"`
	Plan    planexec.Plan       `json:"plan"`
	Status  planexec.PlanStatus `json:"status"`
}

// decisionVersion is the version of the approvals table's decision layout.
const decisionVersion = 1

// encode renders v as JSON without escaping HTML, so stored arguments and
// outcomes stay as close to what was written as JSON allows.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// decode reads a stored record whose layout this package reads up to
// version newest: a newer one is ErrNewerRecord (checked first, so a newer
// layout is never reported as corrupt), one that is not a JSON object of the
// layout is ErrCorruptRecord. The row's version column says the version, and
// so does the record's own "version" field when versioned is set. what names
// the row in the error.
func decode(op, what string, version int64, data []byte, newest int, versioned bool, v any) error {
	newer := func(n int64) error {
		return storeErr(op, fmt.Errorf("%s has record version %d and this package reads versions up to %d: %w", what, n, newest, planexec.ErrNewerRecord))
	}
	corrupt := func(why string) error {
		return storeErr(op, fmt.Errorf("%s cannot be decoded: %s: %w", what, why, planexec.ErrCorruptRecord))
	}
	if version > int64(newest) {
		return newer(version)
	}
	var probe struct {
		Version *int64 `json:"version"`
	}
	if d := bytes.TrimSpace(data); len(d) == 0 || d[0] != '{' {
		return corrupt("not a JSON object")
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return corrupt(err.Error())
	}
	if versioned {
		switch {
		case probe.Version == nil || *probe.Version < 1:
			return corrupt("no record version")
		case *probe.Version > int64(newest):
			return newer(*probe.Version)
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return corrupt(err.Error())
	}
	return nil
}

// SavePlan implements planexec.PlanStore. A plan id other than the stored
// one drops the run's step records in the same transaction. The record is
// written at planexec.PlanRecordVersion; a stored record of a newer version
// is not overwritten (ErrNewerRecord).
func (s *Store) SavePlan(ctx context.Context, rec *planexec.PlanRecord) error {
	const op = "save plan"
	if rec == nil {
		return storeErr(op, errors.New("a nil plan record"))
	}
	doc, err := encode(planDoc{Version: planexec.PlanRecordVersion, Tenant: rec.Tenant, RunID: rec.RunID, Plan: rec.Plan, Status: rec.Status})
	if err != nil {
		return storeErr(op, err)
	}
	return s.write(ctx, op, func(tx on) error {
		var (
			oldPlan    string
			oldVersion int64
			created    = nanos(rec.Created)
			oldCreated sql.NullInt64
		)
		err := tx.row(ctx, qPlanHead, rec.Tenant, rec.RunID).Scan(&oldPlan, &oldVersion, &oldCreated)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case oldVersion > planexec.PlanRecordVersion:
			return storeErr(op, fmt.Errorf("run %q of tenant %q has record version %d and this package writes version %d: %w",
				rec.RunID, rec.Tenant, oldVersion, planexec.PlanRecordVersion, planexec.ErrNewerRecord))
		case oldPlan == rec.Plan.ID:
			created = oldCreated
		default:
			if _, err := tx.exec(ctx, qStepsDelete, rec.Tenant, rec.RunID); err != nil {
				return err
			}
		}
		_, err = tx.exec(ctx, qPlanSave, rec.Tenant, rec.RunID, rec.Plan.ID, planexec.PlanRecordVersion, string(rec.Status), string(doc), created, nanos(rec.Updated))
		return err
	})
}

// SaveStep implements planexec.PlanStore. A run with no plan record is
// ErrNoRecord.
func (s *Store) SaveStep(ctx context.Context, tenant, runID string, step planexec.StepRecord) error {
	const op = "save step"
	doc, err := encode(step)
	if err != nil {
		return storeErr(op, err)
	}
	return s.write(ctx, op, func(tx on) error { return saveStep(ctx, tx, tenant, runID, step, doc) })
}

// saveStep writes one step row and moves the run's updated time on to the
// step's, inside tx.
func saveStep(ctx context.Context, tx on, tenant, runID string, step planexec.StepRecord, doc []byte) error {
	n, err := tx.affected(ctx, qPlanTouch, nanos(step.Finished), tenant, runID)
	if err != nil {
		return err
	}
	if n == 0 {
		return planexec.ErrNoRecord
	}
	_, err = tx.exec(ctx, qStepSave, tenant, runID, step.StepID, step.PlanID, planexec.PlanRecordVersion, string(doc))
	return err
}

// LoadPlan implements planexec.PlanStore. It reads the plan and its steps in
// one snapshot. A record of a newer version is a *planexec.StoreError
// wrapping planexec.ErrNewerRecord; one that cannot be decoded wraps
// planexec.ErrCorruptRecord.
func (s *Store) LoadPlan(ctx context.Context, tenant, runID string) (*planexec.PlanRecord, error) {
	const op = "load plan"
	rtx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, storeErr(op, err)
	}
	defer rtx.Rollback()
	tx := on{s.rs, rtx}
	var (
		version          int64
		record           []byte
		created, updated sql.NullInt64
	)
	err = tx.row(ctx, qPlanLoad, tenant, runID).Scan(&version, &record, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, planexec.ErrNoRecord
	}
	if err != nil {
		return nil, storeErr(op, err)
	}
	var doc planDoc
	if err := decode(op, fmt.Sprintf("the plan record of run %q", runID), version, record, planexec.PlanRecordVersion, true, &doc); err != nil {
		return nil, err
	}
	rec := &planexec.PlanRecord{
		Version: doc.Version, Tenant: tenant, RunID: runID, Plan: doc.Plan, Status: doc.Status,
		Steps: map[string]planexec.StepRecord{}, Created: fromNanos(created), Updated: fromNanos(updated),
	}
	rows, err := tx.rows(ctx, qStepsLoad, tenant, runID)
	if err != nil {
		return nil, storeErr(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id   string
			v    int64
			data []byte
			step planexec.StepRecord
		)
		if err := rows.Scan(&id, &v, &data); err != nil {
			return nil, storeErr(op, err)
		}
		where := fmt.Sprintf("the record of step %q of run %q", id, runID)
		if err := decode(op, where, v, data, planexec.PlanRecordVersion, false, &step); err != nil {
			return nil, err
		}
		rec.Steps[id] = step
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr(op, err)
	}
	return rec, nil
}

// Forget implements planexec.PlanStore.
func (s *Store) Forget(ctx context.Context, tenant, runID string) error {
	return s.write(ctx, "forget", func(tx on) error {
		if _, err := tx.exec(ctx, qStepsDelete, tenant, runID); err != nil {
			return err
		}
		_, err := tx.exec(ctx, qPlanDelete, tenant, runID)
		return err
	})
}

// Decision implements planexec.ApprovalStore.
func (s *Store) Decision(ctx context.Context, tenant, requestID string) (planexec.Decision, error) {
	const op = "decision"
	var (
		version int64
		data    []byte
		d       planexec.Decision
	)
	err := on{s.rs, nil}.row(ctx, qDecisionGet, tenant, requestID).Scan(&version, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return d, planexec.ErrNoRecord
	}
	if err != nil {
		return d, storeErr(op, err)
	}
	what := fmt.Sprintf("the decision on request %q", requestID)
	var probe json.RawMessage
	if err := decode(op, what, version, data, decisionVersion, false, &probe); err != nil {
		return planexec.Decision{}, err
	}
	d, err = storecodec.DecodeDecision(data)
	if err != nil {
		return planexec.Decision{}, storeErr(op, fmt.Errorf("%s cannot be decoded: %s: %w", what, err, planexec.ErrCorruptRecord))
	}
	return d, nil
}

// SaveDecision implements planexec.ApprovalStore.
func (s *Store) SaveDecision(ctx context.Context, tenant string, d planexec.Decision) error {
	const op = "save decision"
	doc, err := encode(d)
	if err != nil {
		return storeErr(op, err)
	}
	_, err = on{s.ws, nil}.exec(ctx, qDecisionSave, tenant, d.RequestID, decisionVersion, string(doc))
	if err != nil {
		return storeErr(op, err)
	}
	return nil
}
