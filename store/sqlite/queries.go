package sqlite

// Every statement the store runs. Each names the tenant: no row is reached
// without it.
const (
	// plans and steps
	qPlanHead = `SELECT plan_id, version, record, created, holder, lease_expires, rev FROM plans WHERE tenant = ? AND run_id = ?`
	qPlanSave = `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated, waiting, delegation, holder, lease_expires, rev)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, run_id) DO UPDATE SET plan_id = excluded.plan_id, version = excluded.version,
			status = excluded.status, record = excluded.record, created = excluded.created, updated = excluded.updated,
			waiting = excluded.waiting, delegation = excluded.delegation, holder = excluded.holder, lease_expires = excluded.lease_expires,
			rev = excluded.rev`
	qPlanTouch = `UPDATE plans SET updated = CASE WHEN ?1 IS NOT NULL AND (updated IS NULL OR ?1 > updated) THEN ?1 ELSE updated END
		WHERE tenant = ?2 AND run_id = ?3`
	qPlanDelete = `DELETE FROM plans WHERE tenant = ? AND run_id = ?`
	qPlanLoad   = `SELECT version, record, created, updated, waiting, delegation, holder, lease_expires, rev FROM plans WHERE tenant = ? AND run_id = ?`
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
	runColumns   = `SELECT run_id, plan_id, version, status, waiting, created, updated, lease_expires FROM plans`
	listOrder    = ` ORDER BY ` + listKey + ` DESC, run_id`
	qRunsFirst   = runColumns + ` WHERE tenant = ?1` + listOrder + ` LIMIT ?2`
	qRunsAfter   = runColumns + ` WHERE tenant = ?1 AND ` + listKey + ` <= ?2 AND (` + listKey + ` < ?2 OR run_id > ?3)` + listOrder + ` LIMIT ?4`
	qRunsFirstIn = runColumns + ` WHERE tenant = ?1 AND status = ?2` + listOrder + ` LIMIT ?3`
	qRunsAfterIn = runColumns + ` WHERE tenant = ?1 AND status = ?2 AND ` + listKey + ` <= ?3 AND (` + listKey + ` < ?3 OR run_id > ?4)` +
		listOrder + ` LIMIT ?5`

	// events. An event is numbered as it is inserted: one after the run's
	// last, read inside the inserting transaction.
	qEventAdd = `INSERT INTO events (tenant, run_id, seq, event, stored)
		SELECT ?1, ?2, ifnull((SELECT seq FROM events WHERE tenant = ?1 AND run_id = ?2 ORDER BY seq DESC LIMIT 1), 0) + 1, ?3, ?4`
	qEventsDelete = `DELETE FROM events WHERE tenant = ? AND run_id = ?`
	qEventsRead   = `SELECT seq, event FROM events WHERE tenant = ? AND run_id = ? AND seq > ? ORDER BY seq LIMIT ?`

	// claims
	qClaimNew = `INSERT INTO claims (tenant, key, state, epoch, holder, lease_expires, run_id, step_id, tool, version, per_tenant, written)
		VALUES (?, ?, 'acquired', 1, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, key) DO NOTHING`
	qClaimGet = `SELECT state, epoch, holder, lease_expires, outcome, outcome IS NULL, version, run_id
		FROM claims WHERE tenant = ? AND key = ?`
	qClaimTake = `UPDATE claims SET state = 'acquired', epoch = ?, holder = ?, lease_expires = ?, outcome = NULL,
			run_id = ?, step_id = ?, tool = ?, version = ?, per_tenant = ?, written = ?
		WHERE tenant = ? AND key = ?`
	qClaimExists = `SELECT 1 FROM claims WHERE tenant = ? AND key = ?`
	// qClaimHeldBy tells whether an epoch holds a key, after a write of its
	// holder changed nothing.
	qClaimHeldBy = `SELECT state = 'acquired' AND epoch = ? FROM claims WHERE tenant = ? AND key = ?`
	// The three writes of a holder change the row only while its epoch
	// holds the key. Each, as every write of a claim, sets when it was
	// written (the last argument before the key).
	heldBy         = `, written = ? WHERE tenant = ? AND key = ? AND epoch = ? AND state = 'acquired'`
	qClaimExtend   = `UPDATE claims SET lease_expires = ?` + heldBy
	qClaimComplete = `UPDATE claims SET state = 'completed', outcome = ?` + heldBy
	qClaimRelease  = `UPDATE claims SET state = ?` + heldBy
	qClaimResolve  = `UPDATE claims SET state = ?, epoch = ?, outcome = ?, version = ?, written = ? WHERE tenant = ? AND key = ?`

	// approvals. qDecisionSave records a decision unless the row it meets
	// must stay, in one statement: SaveDecision's rule
	// (store.Decision.Keeps) on the row's columns. The row is replaced
	// only if this package's layout is as new as its own and it holds a
	// pending decision, or an approval that has expired when the decision
	// is made (a NULL expires never does): the first decision stands. A row whose status is none of those
	// (NULL: its document could not be read when the column was added)
	// stays too.
	qDecisionSave = `INSERT INTO approvals (tenant, record_id, version, decision, decided, status, expires) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, record_id) DO UPDATE SET version = excluded.version, decision = excluded.decision, decided = excluded.decided,
			status = excluded.status, expires = excluded.expires
		WHERE approvals.version <= excluded.version AND (approvals.status = 'pending'
			OR approvals.status = 'approved' AND approvals.expires <= excluded.decided)`
	qDecisionGet = `SELECT version, decision FROM approvals WHERE tenant = ? AND record_id = ?`

	// ceilings. A grant's window is every spend after ?2, a range of
	// spends_window. qSpendAdd records a spend, or moves the one its key
	// recorded.
	qSpendKnown  = `SELECT amount, at FROM spends WHERE grant_id = ? AND key = ?`
	qSpendWindow = `SELECT key, amount FROM spends WHERE grant_id = ?1 AND at > ?2`
	qSpendAdd    = `INSERT INTO spends (grant_id, key, tenant, amount, at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (grant_id, key) DO UPDATE SET tenant = excluded.tenant, amount = excluded.amount, at = excluded.at`

	// recovery. stalled is the condition of a run that stopped without
	// finishing as of ?1: interrupted, or running under a lease that ran
	// out (none counts as run out), in a layout this package can resume
	// (at most ?2). Its first term is the condition of the partial index
	// plans_unfinished, word for word, so that the planner may use it.
	stalled = `status IN ('running', 'interrupted') AND (status = 'interrupted' OR lease_expires IS NULL OR lease_expires <= ?1)
		AND version <= ?2`
	qStalled = `SELECT tenant, run_id FROM plans WHERE ` + stalled + ` ORDER BY tenant, run_id LIMIT ?3`
	// qRunTake takes a stalled run for holder ?5 until ?6, in one
	// statement: of takers at once, the first to write changes the row
	// and the others find it no longer stalled.
	qRunTake = `UPDATE plans SET status = 'running', holder = ?5, lease_expires = ?6
		WHERE tenant = ?3 AND run_id = ?4 AND ` + stalled + ` RETURNING version, record`
	// qPlanRecord puts the run's status in its document as TakeRun
	// changed it in its row.
	qPlanRecord = `UPDATE plans SET record = ? WHERE tenant = ? AND run_id = ?`
	qRunExtend  = `UPDATE plans SET lease_expires = ? WHERE tenant = ? AND run_id = ? AND holder IS ? AND status IN ('running', 'planning')`
	qRunExists  = `SELECT 1 FROM plans WHERE tenant = ? AND run_id = ?`

	// sessions and transcripts (store.TranscriptStore). Every write of a
	// session runs in a write transaction begun IMMEDIATE: qSessionTurn
	// reads the lease and the last entry's number under the write lock,
	// and qSessionWrite writes what the transaction decided from them.
	qSessionNew = `INSERT INTO chat_sessions (tenant, id, doc, epoch, holder, lease_until, cancel, seq, created, updated)
		VALUES (?, ?, ?, 0, '', NULL, 0, 0, ?, ?) ON CONFLICT (tenant, id) DO NOTHING`
	qSessionGet    = `SELECT doc, epoch, holder, lease_until, cancel, seq, created, updated FROM chat_sessions WHERE tenant = ? AND id = ?`
	qSessionTurn   = `SELECT epoch, holder, lease_until, cancel, seq FROM chat_sessions WHERE tenant = ? AND id = ?`
	qSessionExists = `SELECT 1 FROM chat_sessions WHERE tenant = ? AND id = ?`
	// qSessionWrite writes a session's lease and last number, and its
	// document unless ?6 is NULL.
	qSessionWrite = `UPDATE chat_sessions SET epoch = ?1, holder = ?2, lease_until = ?3, cancel = ?4, seq = ?5, doc = ifnull(?6, doc), updated = ?7
		WHERE tenant = ?8 AND id = ?9`
	// qSessionCancel sets the cancel flag of a turn that holds the lease
	// at ?3, and the session's updated to ?4 if the flag was clear.
	qSessionCancel = `UPDATE chat_sessions SET cancel = 1, updated = CASE WHEN cancel THEN updated ELSE ?4 END
		WHERE tenant = ?1 AND id = ?2 AND holder <> '' AND lease_until > ?3`
	qEntryAdd    = `INSERT INTO chat_entries (tenant, session, seq, at, entry) VALUES (?, ?, ?, ?, ?)`
	qEntriesRead = `SELECT seq, at, entry FROM chat_entries WHERE tenant = ? AND session = ? AND seq > ? ORDER BY seq LIMIT ?`

	// pruning: what tenant ?1 finished before ?2. finished is a range of
	// plans_listed_by_status for each of the two statuses: a run never
	// updated counts as updated at the least of times, as it is listed.
	finished        = `tenant = ?1 AND status IN ('completed', 'failed') AND ` + listKey + ` < ?2`
	qPruneRunEvents = `DELETE FROM events WHERE tenant = ?1 AND run_id IN (SELECT run_id FROM plans WHERE ` + finished + `)`
	qPruneRunSteps  = `DELETE FROM steps WHERE tenant = ?1 AND run_id IN (SELECT run_id FROM plans WHERE ` + finished + `)`
	qPruneRuns      = `DELETE FROM plans WHERE tenant = ?1 AND run_id IN (SELECT run_id FROM plans WHERE ` + finished + `)`
	// qOrphanHistories lists the runs of tenant ?1 that have a history
	// and no plan record, and whose last event was stored before ?2. It
	// walks the runs of the events' primary key one seek each, however
	// many events each run has.
	qOrphanHistories = `WITH RECURSIVE runs (run_id) AS (
			SELECT (SELECT run_id FROM events WHERE tenant = ?1 ORDER BY run_id LIMIT 1)
			UNION ALL
			SELECT (SELECT run_id FROM events WHERE tenant = ?1 AND run_id > runs.run_id ORDER BY run_id LIMIT 1)
			FROM runs WHERE runs.run_id IS NOT NULL)
		SELECT run_id FROM runs WHERE run_id IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM plans WHERE plans.tenant = ?1 AND plans.run_id = runs.run_id)
			AND (SELECT stored FROM events WHERE events.tenant = ?1 AND events.run_id = runs.run_id ORDER BY seq DESC LIMIT 1) < ?2`
	// qPruneClaims drops claims of effects once per run that are neither
	// in flight nor in doubt, last written before ?2, whose run has no
	// plan record (any more).
	qPruneClaims = `DELETE FROM claims WHERE tenant = ?1 AND per_tenant = 0 AND state IN ('free', 'completed') AND written < ?2
		AND NOT EXISTS (SELECT 1 FROM plans WHERE plans.tenant = ?1 AND plans.run_id = claims.run_id)`
	qPruneDecisions = `DELETE FROM approvals WHERE tenant = ?1 AND decided < ?2`
	qPruneSpends    = `DELETE FROM spends WHERE tenant = ?1 AND at < ?2`
)

// writes run on the write pool, reads on the read pool.
var (
	writes = []string{qPlanHead, qPlanSave, qPlanTouch, qPlanDelete, qStepSave, qStepsDelete,
		qEventAdd, qEventsDelete,
		qClaimNew, qClaimGet, qClaimTake, qClaimExists, qClaimHeldBy, qClaimExtend, qClaimComplete, qClaimRelease, qClaimResolve,
		qDecisionSave, qDecisionGet,
		qSpendKnown, qSpendWindow, qSpendAdd,
		qRunTake, qPlanRecord, qRunExtend, qRunExists,
		qPruneRunEvents, qPruneRunSteps, qPruneRuns, qOrphanHistories, qPruneClaims, qPruneDecisions, qPruneSpends,
		qSessionNew, qSessionTurn, qSessionExists, qSessionWrite, qSessionCancel, qEntryAdd}
	reads = []string{qPlanLoad, qStepsLoad, qDecisionGet, qClaimGet, qEventsRead, qRunsFirst, qRunsAfter, qRunsFirstIn, qRunsAfterIn,
		qSpendWindow, qStalled, qSessionGet, qSessionTurn, qSessionExists, qEntriesRead}
)
