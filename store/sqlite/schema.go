package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

// migrations[i] takes the schema from version i to version i+1. The version
// is the file's PRAGMA user_version, written in the same transaction as the
// migration. Append; never edit a migration that has shipped.
var migrations = [][]string{
	{
		// One row per run. record is the JSON of the plan record without its
		// steps and times: {"version","tenant","run_id","plan","status"}.
		// Times are Unix nanoseconds.
		`CREATE TABLE plans (
			tenant  TEXT NOT NULL,
			run_id  TEXT NOT NULL,
			plan_id TEXT NOT NULL,
			version INTEGER NOT NULL,
			status  TEXT NOT NULL,
			record  TEXT NOT NULL,
			created INTEGER,
			updated INTEGER,
			PRIMARY KEY (tenant, run_id)
		) WITHOUT ROWID`,
		// One row per finished step, so writing a step costs the same
		// whatever the plan's length. record is a StepRecord's JSON.
		`CREATE TABLE steps (
			tenant  TEXT NOT NULL,
			run_id  TEXT NOT NULL,
			step_id TEXT NOT NULL,
			plan_id TEXT NOT NULL,
			version INTEGER NOT NULL,
			record  TEXT NOT NULL,
			PRIMARY KEY (tenant, run_id, step_id),
			FOREIGN KEY (tenant, run_id) REFERENCES plans (tenant, run_id) ON DELETE CASCADE
		) WITHOUT ROWID`,
		// One row per idempotency key; never deleted, so an epoch never goes
		// back. lease_expires is Unix nanoseconds.
		`CREATE TABLE claims (
			tenant        TEXT NOT NULL,
			key           TEXT NOT NULL,
			state         TEXT NOT NULL CHECK (state IN ('free', 'acquired', 'completed', 'in_doubt')),
			epoch         INTEGER NOT NULL,
			holder        TEXT NOT NULL,
			lease_expires INTEGER,
			outcome       BLOB,
			run_id        TEXT NOT NULL,
			step_id       TEXT NOT NULL,
			tool          TEXT NOT NULL,
			PRIMARY KEY (tenant, key)
		) WITHOUT ROWID`,
		// One decision per bound approval record. decision is an
		// ApprovalDecision's JSON.
		`CREATE TABLE approvals (
			tenant    TEXT NOT NULL,
			record_id TEXT NOT NULL,
			version   INTEGER NOT NULL,
			decision  TEXT NOT NULL,
			PRIMARY KEY (tenant, record_id)
		) WITHOUT ROWID`,
	},
	{
		// Step and decision documents name their layout version, as plan
		// documents do; before, only their rows' version column did. Every
		// such document this package wrote starts with `{"`, so the member
		// is put first without parsing, and so without changing, the rest.
		`UPDATE steps SET record = '{"version":' || version || ',' || substr(record, 2) WHERE substr(record, 1, 2) = '{"'`,
		`UPDATE approvals SET decision = '{"version":' || version || ',' || substr(decision, 2) WHERE substr(decision, 1, 2) = '{"'`,
		// Claims have a layout version, as every other record does. Every
		// row there was written in layout 1; writers state the version
		// (SQLite cannot drop the default without rebuilding the table).
		`ALTER TABLE claims ADD COLUMN version INTEGER NOT NULL DEFAULT 1`,
		// A completed claim's outcome is never NULL from now on (an empty
		// one is a BLOB of zero bytes), so that a NULL there can only be
		// damage. Before, an empty outcome was written as NULL.
		`UPDATE claims SET outcome = x'' WHERE state = 'completed' AND outcome IS NULL`,
	},
	{
		// What a stopped run waits for (a JSON array of store.Wait) and
		// the delegation it acts under (the executor's document, byte for
		// byte): NULL when none. Runs saved before have neither.
		`ALTER TABLE plans ADD COLUMN waiting TEXT`,
		`ALTER TABLE plans ADD COLUMN delegation TEXT`,
		// One row per event of a run's history, numbered from 1 per tenant
		// and run in the order stored, with when it was stored (Unix
		// nanoseconds, by the store's clock). A run with no plan record may
		// have events, so there is no foreign key to plans; Prune drops
		// such a history by when its last event was stored.
		`CREATE TABLE events (
			tenant TEXT NOT NULL,
			run_id TEXT NOT NULL,
			seq    INTEGER NOT NULL,
			event  TEXT NOT NULL,
			stored INTEGER NOT NULL,
			PRIMARY KEY (tenant, run_id, seq)
		) WITHOUT ROWID`,
		// A tenant's runs in listing order (most recently updated first,
		// then by run id), all of them and by status, so that a page is a
		// range of an index. A NULL updated (a zero time) sorts as the
		// least of times: the key is the same expression the listing
		// queries use (listKey).
		`CREATE INDEX plans_listed ON plans (tenant, ifnull(updated, -9223372036854775807 - 1) DESC, run_id)`,
		`CREATE INDEX plans_listed_by_status ON plans (tenant, status, ifnull(updated, -9223372036854775807 - 1) DESC, run_id)`,
		// The execution running a run and when its lease on the run runs
		// out (Unix nanoseconds): NULL unless the run is running. Runs
		// saved before have neither: a running one among them is stalled.
		`ALTER TABLE plans ADD COLUMN holder TEXT`,
		`ALTER TABLE plans ADD COLUMN lease_expires INTEGER`,
		// The runs that may have stalled, in the order Stalled lists them
		// (every tenant's, by tenant and run id), with what tells whether
		// they have: a page is a walk of this index from its start.
		`CREATE INDEX plans_unfinished ON plans (tenant, run_id, status, lease_expires, version) WHERE status IN ('running', 'interrupted')`,
		// Whether a claim's effect is once per tenant (1) or once per run
		// (0), and when the claim was last written (Unix nanoseconds).
		// Prune drops only claims known to be once per run: claims
		// written before are counted once per tenant (nobody knows which
		// they were) and have no time, so they are kept. Writers state
		// both. From here on Prune deletes claims rows: a key whose row
		// was pruned is claimed again from epoch 1.
		`ALTER TABLE claims ADD COLUMN per_tenant INTEGER NOT NULL DEFAULT 1`,
		`ALTER TABLE claims ADD COLUMN written INTEGER`,
		// The claims Prune may drop, oldest first: a prune reads the
		// claims written before its cut, not every claim of the tenant.
		`CREATE INDEX claims_prunable ON claims (tenant, written) WHERE per_tenant = 0`,
		// When a decision was made (the document's decided_at, Unix
		// nanoseconds; the least of times for the zero time), for Prune.
		// Decisions stored before are given theirs from their documents
		// by backfillDecided; one whose document cannot be read keeps
		// NULL, and is never pruned.
		`ALTER TABLE approvals ADD COLUMN decided INTEGER`,
		`CREATE INDEX approvals_decided ON approvals (tenant, decided)`,
		// What SaveDecision's rule reads of the decision a row holds
		// (see qDecisionSave): its status ('approved', 'denied' or
		// 'pending') and when it stops counting as an approval (Unix
		// nanoseconds, as expiry renders it; NULL for never).
		// Decisions stored before are given both from their documents
		// by backfillDecisions; one whose document cannot be read keeps
		// NULL status, and is never replaced.
		`ALTER TABLE approvals ADD COLUMN status TEXT`,
		`ALTER TABLE approvals ADD COLUMN expires INTEGER`,
		// What windowed grants let through: one row per grant and step
		// key (a step spends once), the amount as the exact decimal's text,
		// at Unix nanoseconds. Grants are not a tenant's: a grant's
		// window is summed over every tenant's spends; tenant is the run's,
		// for Prune.
		`CREATE TABLE spends (
			grant_id TEXT NOT NULL,
			key      TEXT NOT NULL,
			tenant   TEXT NOT NULL,
			amount   TEXT NOT NULL,
			at       INTEGER NOT NULL,
			PRIMARY KEY (grant_id, key)
		) WITHOUT ROWID`,
		// A grant's window is a range of this index, amounts included.
		`CREATE INDEX spends_window ON spends (grant_id, at, amount)`,
		`CREATE INDEX spends_by_tenant ON spends (tenant, at)`,
	},
	{
		// One row per conversation (store.TranscriptStore): its document,
		// byte for byte (NULL for none), the lease its running turn holds
		// (epoch numbers the turns taken, from 1; holder is '' and
		// lease_until NULL when no turn holds it; lease_until is Unix
		// nanoseconds), whether the turn was asked to stop, and the number
		// of its last transcript entry (0 for none). created and updated
		// are Unix nanoseconds, by the store's clock.
		`CREATE TABLE chat_sessions (
			tenant      TEXT NOT NULL,
			id          TEXT NOT NULL,
			doc         TEXT,
			epoch       INTEGER NOT NULL CHECK (epoch >= 0),
			holder      TEXT NOT NULL,
			lease_until INTEGER,
			cancel      INTEGER NOT NULL CHECK (cancel IN (0, 1)),
			seq         INTEGER NOT NULL CHECK (seq >= 0),
			created     INTEGER,
			updated     INTEGER,
			PRIMARY KEY (tenant, id)
		) WITHOUT ROWID`,
		// One row per transcript entry, numbered from 1 per session in the
		// order stored (the session's seq, moved on in the transaction that
		// inserts them), with when it was stored (Unix nanoseconds, by the
		// store's clock) and the entry byte for byte. A page of a
		// transcript is a range of the primary key.
		`CREATE TABLE chat_entries (
			tenant  TEXT NOT NULL,
			session TEXT NOT NULL,
			seq     INTEGER NOT NULL CHECK (seq > 0),
			at      INTEGER NOT NULL,
			entry   TEXT NOT NULL,
			PRIMARY KEY (tenant, session, seq)
		) WITHOUT ROWID`,
	},
	{
		// The revision of a run's record: SavePlan stores the revision the
		// save was based on plus one, and a save with Update is written
		// only while the row still holds that revision. Runs saved before
		// are at revision 0, and so is a row written without the column.
		`ALTER TABLE plans ADD COLUMN rev INTEGER NOT NULL DEFAULT 0`,
	},
}

// backfills[v], when set, runs right after the statements that take the
// schema to version v, in the same transaction: what SQL alone cannot
// carry over.
var backfills = map[int]func(context.Context, *sql.Tx) error{
	3: backfillDecisions,
}

// backfillDecisions gives each decision stored before schema 3 the columns
// schema 3 gave decisions, read from its document as Decision reads it:
// the time it was made, for Prune; its status (the first layout's
// "granted" is approved) and its expiry, for SaveDecision's rule. A
// document that cannot be read (damaged, or of a newer layout) leaves all
// three NULL: Decision refuses it, Prune keeps it, and SaveDecision does
// not replace it.
func backfillDecisions(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT tenant, record_id, version, decision FROM approvals WHERE decided IS NULL`)
	if err != nil {
		return err
	}
	type columns struct {
		tenant, id string
		at         int64
		status     string
		expires    sql.NullInt64
	}
	var found []columns
	for rows.Next() {
		var (
			c       columns
			version int
			doc     []byte
		)
		if err := rows.Scan(&c.tenant, &c.id, &version, &doc); err != nil {
			rows.Close()
			return err
		}
		if dec, err := storecodec.DecodeDecision(c.id, version, doc); err == nil {
			c.at, c.status, c.expires = instant(dec.DecidedAt), string(dec.Status), expiry(dec.Expires)
			found = append(found, c)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, c := range found {
		if _, err := tx.ExecContext(ctx, `UPDATE approvals SET decided = ?, status = ?, expires = ? WHERE tenant = ? AND record_id = ?`,
			c.at, c.status, c.expires, c.tenant, c.id); err != nil {
			return err
		}
	}
	return nil
}

// schemaVersion is the schema this package writes.
var schemaVersion = len(migrations)

// setUp puts the file in WAL mode and migrates its schema to version
// (schemaVersion but in tests). Another process
// doing the same at the same moment can make either step report busy even
// under the busy timeout (changing the journal mode takes an exclusive lock
// without waiting); both are idempotent, so they are tried again until the
// timeout.
func setUp(ctx context.Context, db *sql.DB, busy time.Duration, version int) error {
	deadline := time.Now().Add(busy)
	for {
		err := setUpOnce(ctx, db, version)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return storeErr("open", context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func setUpOnce(ctx context.Context, db *sql.DB, version int) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return storeErr("open", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return storeErr("open", fmt.Errorf("the database cannot be put in WAL mode (journal mode %q); is it on a network file system?", mode))
	}
	v, err := userVersion(ctx, db)
	if err != nil {
		return err
	}
	if v >= version && v <= schemaVersion {
		return nil
	}
	if err := checkVersion(v); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: one process migrates, the others wait
	if err != nil {
		return storeErr("migrate", err)
	}
	defer tx.Rollback()
	// Read again under the write lock: another process may have migrated
	// while this one waited.
	if v, err = userVersion(ctx, tx); err != nil {
		return err
	}
	if err := checkVersion(v); err != nil {
		return err
	}
	if v >= version {
		return nil
	}
	for i, m := range migrations[v:version] {
		for _, stmt := range m {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return storeErr("migrate", err)
			}
		}
		if fill := backfills[v+i+1]; fill != nil {
			if err := fill(ctx, tx); err != nil {
				return storeErr("migrate", err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version)); err != nil {
		return storeErr("migrate", err)
	}
	if err := tx.Commit(); err != nil {
		return storeErr("migrate", err)
	}
	return nil
}

func userVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, storeErr("migrate", err)
	}
	return v, nil
}

func checkVersion(v int) error {
	if v > schemaVersion {
		return storeErr("migrate", fmt.Errorf("the database file is at schema version %d and this package knows versions up to %d: %w",
			v, schemaVersion, store.ErrNewerRecord))
	}
	if v < 0 {
		return storeErr("migrate", fmt.Errorf("the database file has schema version %d: %w", v, store.ErrCorruptRecord))
	}
	return nil
}
