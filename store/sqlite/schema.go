package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/planexec/planexec"
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
}

// schemaVersion is the schema this package writes.
var schemaVersion = len(migrations)

// setUp puts the file in WAL mode and migrates its schema. Another process
// doing the same at the same moment can make either step report busy even
// under the busy timeout (changing the journal mode takes an exclusive lock
// without waiting); both are idempotent, so they are tried again until the
// timeout.
func setUp(ctx context.Context, db *sql.DB, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	for {
		err := setUpOnce(ctx, db)
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

func setUpOnce(ctx context.Context, db *sql.DB) error {
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
	if v == schemaVersion {
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
	for _, m := range migrations[v:] {
		for _, stmt := range m {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return storeErr("migrate", err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
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
			v, schemaVersion, planexec.ErrNewerRecord))
	}
	if v < 0 {
		return storeErr("migrate", fmt.Errorf("the database file has schema version %d: %w", v, planexec.ErrCorruptRecord))
	}
	return nil
}
