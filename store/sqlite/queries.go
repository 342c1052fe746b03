package sqlite

// Every statement the store runs. Each names the tenant: no row is reached
// without it.
const (
	// plans and steps
	qPlanHead = `SELECT plan_id, version, record, created FROM plans WHERE tenant = ? AND run_id = ?`
	qPlanSave = `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, run_id) DO UPDATE SET plan_id = excluded.plan_id, version = excluded.version,
			status = excluded.status, record = excluded.record, created = excluded.created, updated = excluded.updated`
	qPlanTouch = `UPDATE plans SET updated = CASE WHEN ?1 IS NOT NULL AND (updated IS NULL OR ?1 > updated) THEN ?1 ELSE updated END
		WHERE tenant = ?2 AND run_id = ?3`
	qPlanDelete = `DELETE FROM plans WHERE tenant = ? AND run_id = ?`
	qPlanLoad   = `SELECT version, record, created, updated FROM plans WHERE tenant = ? AND run_id = ?`
	qStepSave   = `INSERT INTO steps (tenant, run_id, step_id, plan_id, version, record) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, run_id, step_id) DO UPDATE SET plan_id = excluded.plan_id, version = excluded.version, record = excluded.record`
	qStepsDelete = `DELETE FROM steps WHERE tenant = ? AND run_id = ?`
	qStepsLoad   = `SELECT step_id, version, record FROM steps WHERE tenant = ? AND run_id = ?`

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
		qClaimNew, qClaimGet, qClaimTake, qClaimExists, qClaimExtend, qClaimComplete, qClaimRelease, qClaimResolve,
		qDecisionSave}
	reads = []string{qPlanLoad, qStepsLoad, qDecisionGet}
)
