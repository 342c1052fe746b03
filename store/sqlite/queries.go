package sqlite

// Every statement the store runs. Each names the tenant: no row is reached
// without it.
const (
	// plans and steps
	qPlanHead = `SELECT plan_id, version, record, created FROM plans WHERE tenant = ? AND run_id = ?`
	qPlanSave = `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated, waiting, delegation)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, run_id) DO UPDATE SET plan_id = excluded.plan_id, version = excluded.version,
			status = excluded.status, record = excluded.record, created = excluded.created, updated = excluded.updated,
			waiting = excluded.waiting, delegation = excluded.delegation`
	qPlanTouch = `UPDATE plans SET updated = CASE WHEN ?1 IS NOT NULL AND (updated IS NULL OR ?1 > updated) THEN ?1 ELSE updated END
		WHERE tenant = ?2 AND run_id = ?3`
	qPlanDelete = `DELETE FROM plans WHERE tenant = ? AND run_id = ?`
	qPlanLoad   = `SELECT version, record, created, updated, waiting, delegation FROM plans WHERE tenant = ? AND run_id = ?`
	qStepSave   = `INSERT INTO steps (tenant, run_id, step_id, plan_id, version, record) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, run_id, step_id) DO UPDATE SET plan_id = excluded.plan_id, version = excluded.version, record = excluded.record`
	qStepsDelete = `DELETE FROM steps WHERE tenant = ? AND run_id = ?`
	qStepsLoad   = `SELECT step_id, version, record FROM steps WHERE tenant = ? AND run_id = ?`

	// listings. The arguments are the tenant, the status when the
	// listing is of one, the listing key and run id of the run the page
	// follows when it follows one, and the limit. listKey is the
	// expression the indexes plans_listed and plans_listed_by_status are
	// built on, written as they were built: a NULL updated (a zero time)
	// sorts after every time. Both conditions on the key after a cursor
	// are needed: the first bounds the range the index is scanned over,
	// the second leaves out the runs of the cursor's instant up to the
	// cursor's run id.
	listKey      = `ifnull(updated, -9223372036854775807 - 1)`
	runColumns   = `SELECT run_id, plan_id, version, status, waiting, created, updated FROM plans`
	listOrder    = ` ORDER BY ` + listKey + ` DESC, run_id`
	qRunsFirst   = runColumns + ` WHERE tenant = ?1` + listOrder + ` LIMIT ?2`
	qRunsAfter   = runColumns + ` WHERE tenant = ?1 AND ` + listKey + ` <= ?2 AND (` + listKey + ` < ?2 OR run_id > ?3)` + listOrder + ` LIMIT ?4`
	qRunsFirstIn = runColumns + ` WHERE tenant = ?1 AND status = ?2` + listOrder + ` LIMIT ?3`
	qRunsAfterIn = runColumns + ` WHERE tenant = ?1 AND status = ?2 AND ` + listKey + ` <= ?3 AND (` + listKey + ` < ?3 OR run_id > ?4)` +
		listOrder + ` LIMIT ?5`

	// events. An event is numbered as it is inserted: one after the run's
	// last, read inside the inserting transaction.
	qEventAdd = `INSERT INTO events (tenant, run_id, seq, event)
		SELECT ?1, ?2, ifnull((SELECT seq FROM events WHERE tenant = ?1 AND run_id = ?2 ORDER BY seq DESC LIMIT 1), 0) + 1, ?3`
	qEventsDelete = `DELETE FROM events WHERE tenant = ? AND run_id = ?`
	qEventsRead   = `SELECT seq, event FROM events WHERE tenant = ? AND run_id = ? AND seq > ? ORDER BY seq LIMIT ?`

	// claims
	qClaimNew = `INSERT INTO claims (tenant, key, state, epoch, holder, lease_expires, run_id, step_id, tool, version)
		VALUES (?, ?, 'acquired', 1, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, key) DO NOTHING`
	qClaimGet = `SELECT state, epoch, holder, lease_expires, outcome, outcome IS NULL, version
		FROM claims WHERE tenant = ? AND key = ?`
	qClaimTake = `UPDATE claims SET state = 'acquired', epoch = ?, holder = ?, lease_expires = ?, outcome = NULL,
			run_id = ?, step_id = ?, tool = ?, version = ?
		WHERE tenant = ? AND key = ?`
	qClaimExists = `SELECT 1 FROM claims WHERE tenant = ? AND key = ?`
	// The three writes of a holder change the row only while its epoch
	// holds the key.
	heldBy         = ` WHERE tenant = ? AND key = ? AND epoch = ? AND state = 'acquired'`
	qClaimExtend   = `UPDATE claims SET lease_expires = ?` + heldBy
	qClaimComplete = `UPDATE claims SET state = 'completed', outcome = ?` + heldBy
	qClaimRelease  = `UPDATE claims SET state = ?` + heldBy
	qClaimResolve  = `UPDATE claims SET state = ?, epoch = ?, outcome = ?, version = ? WHERE tenant = ? AND key = ?`

	// approvals
	qDecisionSave = `INSERT INTO approvals (tenant, record_id, version, decision) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, record_id) DO UPDATE SET version = excluded.version, decision = excluded.decision`
	qDecisionGet = `SELECT version, decision FROM approvals WHERE tenant = ? AND record_id = ?`
)

// writes run on the write pool, reads on the read pool.
var (
	writes = []string{qPlanHead, qPlanSave, qPlanTouch, qPlanDelete, qStepSave, qStepsDelete,
		qEventAdd, qEventsDelete,
		qClaimNew, qClaimGet, qClaimTake, qClaimExists, qClaimExtend, qClaimComplete, qClaimRelease, qClaimResolve,
		qDecisionSave}
	reads = []string{qPlanLoad, qStepsLoad, qDecisionGet, qEventsRead, qRunsFirst, qRunsAfter, qRunsFirstIn, qRunsAfterIn}
)
