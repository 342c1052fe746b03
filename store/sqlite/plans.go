package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

// SavePlan implements store.PlanStore. A plan id other than the stored
// one drops the run's step records in the same transaction; a record to
// update (rec.Update) that is gone is ErrNoRecord. The record is
// written at store.RecordVersion; a stored record of a newer version
// (in its row or its document) is not overwritten (ErrNewerRecord). What
// the run waits for and its delegation are columns of the run's row, NULL
// when it has none, and so are its holder and the lease on it: the holder
// is rec.Holder while rec.LeaseExpires holds the run, NULL once a zero
// lease lets it go. The row's rev column is the record's revision: a save
// stores rec.Rev+1, and one with Update whose rec.Rev is no longer the
// row's (saved since by another) is ErrFenced. A run another holder keeps,
// its lease not run out at the save's time (rec.Updated, or the store's
// clock), is ErrFenced too. Both are read and judged in the write
// transaction, under the write lock, so of executions saving one run at
// once one holds it, and of savers based on one revision one saves. Waits
// that could not be read back (one naming neither or both a request and a
// key) are refused. Nothing is written when the save is refused.
func (s *Store) SavePlan(ctx context.Context, rec *store.PlanRecord) error {
	const op = "save plan"
	row, err := encodePlan(rec)
	if err != nil {
		return storeErr(op, err)
	}
	return s.write(ctx, op, func(tx on) error {
		if err := savePlan(ctx, tx, rec, row, savedAt(rec, s.now)); err != nil {
			return err
		}
		return appendEvents(ctx, tx, rec.Tenant, rec.RunID, rec.Events, s.now())
	})
}

// planRow is a plan record as its row holds it, but for its times and ids.
type planRow struct {
	doc        string
	waiting    any // TEXT or NULL
	delegation any // TEXT or NULL
}

// encodePlan checks rec and renders its row.
func encodePlan(rec *store.PlanRecord) (planRow, error) {
	if rec == nil {
		return planRow{}, errors.New("a nil plan record")
	}
	if err := storecodec.CheckWritable(rec.Version); err != nil {
		return planRow{}, err
	}
	// The plan's times are columns of its row and its steps rows of their
	// own: the document holds neither.
	doc, err := storecodec.EncodePlan(rec, storecodec.TimesInColumns)
	if err != nil {
		return planRow{}, err
	}
	waiting, err := storecodec.EncodeWaiting(rec.Waiting)
	if err != nil {
		return planRow{}, err
	}
	// A wait LoadPlan would refuse as damaged is not written: the run
	// could not be read again.
	if _, err := storecodec.DecodeWaiting(rec.RunID, waiting); err != nil {
		return planRow{}, fmt.Errorf("what the run waits for cannot be stored: %w", err)
	}
	return planRow{doc: string(doc), waiting: text(waiting), delegation: text(rec.Delegation)}, nil
}

// text is b as a TEXT column keeps it, byte for byte: NULL when empty.
func text(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// orNull is s as a TEXT column keeps it: NULL when empty.
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// savedAt is when rec is saved, by the saver's clock (rec.Updated), or the
// store's for a record that does not say.
func savedAt(rec *store.PlanRecord, now func() time.Time) time.Time {
	if rec.Updated.IsZero() {
		return now()
	}
	return rec.Updated
}

// savePlan writes rec's row at revision rec.Rev+1 inside tx, unless
// another holder keeps the run at now, the save's time, or rec.Update and
// the row's revision is not rec.Rev (ErrFenced).
func savePlan(ctx context.Context, tx on, rec *store.PlanRecord, row planRow, now time.Time) error {
	var (
		oldPlan    string
		oldColumn  int
		oldDoc     []byte
		created    = nanos(rec.Created)
		oldCreated sql.NullInt64
		oldHolder  sql.NullString
		oldLease   sql.NullInt64
		oldRev     int64
	)
	err := tx.row(ctx, qPlanHead, rec.Tenant, rec.RunID).Scan(&oldPlan, &oldColumn, &oldDoc, &oldCreated, &oldHolder, &oldLease, &oldRev)
	switch {
	case errors.Is(err, sql.ErrNoRows) && rec.Update:
		return store.ErrNoRecord // read or written before, and dropped since: never written back
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	default:
		if _, err := storecodec.CheckReplace(rec.RunID, oldColumn, oldDoc); err != nil {
			return err
		}
		if rec.Create || (rec.Update && oldRev != rec.Rev) {
			return store.ErrFenced // saved since the revision the save is based on
		}
		if h := oldHolder.String; h != "" && h != rec.Holder && oldLease.Valid && oldLease.Int64 > instant(now) {
			return store.ErrFenced // another execution holds the run
		}
		if oldPlan == rec.PlanID {
			created = oldCreated
		} else if _, err := tx.exec(ctx, qStepsDelete, rec.Tenant, rec.RunID); err != nil {
			return err
		}
	}
	holder := rec.Holder
	if rec.LeaseExpires.IsZero() {
		holder = "" // the run is let go
	}
	_, err = tx.exec(ctx, qPlanSave, rec.Tenant, rec.RunID, rec.PlanID, storecodec.PlanVersion, string(rec.Status), row.doc,
		created, nanos(rec.Updated), row.waiting, row.delegation, orNull(holder), nanos(rec.LeaseExpires), rec.Rev+1)
	return err
}

// SaveStep implements store.PlanStore. A run with no plan record is
// ErrNoRecord.
func (s *Store) SaveStep(ctx context.Context, tenant, runID string, step store.StepRecord) error {
	const op = "save step"
	doc, err := storecodec.EncodeStep(step)
	if err != nil {
		return storeErr(op, err)
	}
	return s.write(ctx, op, func(tx on) error { return saveStep(ctx, tx, tenant, runID, step, doc) })
}

// saveStep writes one step row and moves the run's updated time on to the
// step's, inside tx.
func saveStep(ctx context.Context, tx on, tenant, runID string, step store.StepRecord, doc []byte) error {
	n, err := tx.affected(ctx, qPlanTouch, nanos(step.Finished), tenant, runID)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNoRecord
	}
	_, err = tx.exec(ctx, qStepSave, tenant, runID, step.StepID, step.PlanID, storecodec.PlanVersion, string(doc))
	return err
}

// LoadPlan implements store.PlanStore. It reads the plan and its steps in
// one snapshot. A record of a newer version is a *store.Error
// wrapping store.ErrNewerRecord; one that cannot be decoded, or that
// holds a status this package never writes, wraps store.ErrCorruptRecord.
func (s *Store) LoadPlan(ctx context.Context, tenant, runID string) (*store.PlanRecord, error) {
	const op = "load plan"
	rtx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, storeErr(op, err)
	}
	defer rtx.Rollback()
	tx := on{s.rs, rtx}
	var (
		version             int
		record              []byte
		created, updated    sql.NullInt64
		waiting, delegation []byte
		holder              sql.NullString
		lease               sql.NullInt64
		rev                 int64
	)
	err = tx.row(ctx, qPlanLoad, tenant, runID).Scan(&version, &record, &created, &updated, &waiting, &delegation, &holder, &lease, &rev)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNoRecord
	}
	if err != nil {
		return nil, storeErr(op, err)
	}
	rec, err := storecodec.DecodePlan(tenant, runID, version, record)
	if err != nil {
		return nil, storeErr(op, err)
	}
	rec.Created, rec.Updated = fromNanos(created), fromNanos(updated)
	if rec.Waiting, err = storecodec.DecodeWaiting(runID, waiting); err != nil {
		return nil, storeErr(op, err)
	}
	rec.Delegation = delegation
	rec.Holder, rec.LeaseExpires, rec.Rev = holder.String, fromNanos(lease), rev
	rows, err := tx.rows(ctx, qStepsLoad, tenant, runID)
	if err != nil {
		return nil, storeErr(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id   string
			v    int
			data []byte
		)
		if err := rows.Scan(&id, &v, &data); err != nil {
			return nil, storeErr(op, err)
		}
		step, err := storecodec.DecodeStep(runID, id, v, data)
		if err != nil {
			return nil, storeErr(op, err)
		}
		rec.Steps[id] = step
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr(op, err)
	}
	return rec, nil
}

// Forget implements store.PlanStore. The run's history goes with it,
// whether or not the run has a plan record.
func (s *Store) Forget(ctx context.Context, tenant, runID string) error {
	return s.write(ctx, "forget", func(tx on) error {
		if _, err := tx.exec(ctx, qEventsDelete, tenant, runID); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, qStepsDelete, tenant, runID); err != nil {
			return err
		}
		_, err := tx.exec(ctx, qPlanDelete, tenant, runID)
		return err
	})
}

// Decision implements store.ApprovalStore. A decision written by a newer
// version of this package is a *store.Error wrapping
// store.ErrNewerRecord; one that cannot be decoded, or that holds a
// status this package never writes, wraps store.ErrCorruptRecord.
func (s *Store) Decision(ctx context.Context, tenant, requestID string) (store.Decision, error) {
	const op = "decision"
	var (
		version int
		data    []byte
	)
	err := on{s.rs, nil}.row(ctx, qDecisionGet, tenant, requestID).Scan(&version, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Decision{}, store.ErrNoRecord
	}
	if err != nil {
		return store.Decision{}, storeErr(op, err)
	}
	d, err := storecodec.DecodeDecision(requestID, version, data)
	if err != nil {
		return store.Decision{}, storeErr(op, err)
	}
	return d, nil
}

// SaveDecision implements store.ApprovalStore. The decision recorded
// for the request is kept, and SaveDecision returns store.ErrDecided, when
// it settles the request: a denial, or, when d approves, an approval that
// has not expired at d.DecidedAt. Check and write are one statement
// (qDecisionSave), which reads the row's status and expiry columns, so of
// writers deciding one request at once, in one process or several, one
// is recorded and each of the others finds it. A decision a newer version
// wrote is never replaced: that is a *store.Error wrapping
// store.ErrNewerRecord, and one that cannot be read and so cannot be
// judged is one wrapping store.ErrCorruptRecord. When the decision was
// made is a column too, for Prune.
func (s *Store) SaveDecision(ctx context.Context, tenant string, d store.Decision) error {
	const op = "save decision"
	doc, err := storecodec.EncodeDecision(d)
	if err != nil {
		return storeErr(op, err)
	}
	return s.write(ctx, op, func(tx on) error {
		n, err := tx.affected(ctx, qDecisionSave, tenant, d.RequestID, storecodec.DecisionVersion, string(doc), instant(d.DecidedAt),
			string(d.Status), expiry(d.Expires))
		if err != nil || n > 0 {
			return err
		}
		return keptDecision(ctx, tx, tenant, d.RequestID)
	})
}

// keptDecision says why qDecisionSave kept the decision recorded for
// requestID, read in the same transaction: the error reading it gives (a
// newer layout, damage), or store.ErrDecided.
func keptDecision(ctx context.Context, tx on, tenant, requestID string) error {
	var (
		version int
		data    []byte
	)
	if err := tx.row(ctx, qDecisionGet, tenant, requestID).Scan(&version, &data); err != nil {
		return err
	}
	if _, err := storecodec.DecodeDecision(requestID, version, data); err != nil {
		return err
	}
	return store.ErrDecided
}
