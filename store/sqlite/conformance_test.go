package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/sqlite"
	"github.com/planexec/planexec/storetest"
)

func TestTheStoreConforms(t *testing.T) {
	storetest.Run(t, func(t testing.TB, now func() time.Time) storetest.Stores {
		s, path := openNew(t, sqlite.WithClock(now))
		db := rawDB(t, path)
		db.SetMaxOpenConns(1) // so a PRAGMA holds for the statements after it
		return storetest.Stores{Store: s, Tamper: tamper{db}}
	})
}

// tamper writes into a store's file what the store never would, for the
// conformance suite's checks of damaged and newer records.
type tamper struct{ db *sql.DB }

// where names a record's row.
func where(r storetest.Record) (table, cond string, args []any) {
	switch r.Kind {
	case storetest.KindPlan:
		return "plans", "tenant = ? AND run_id = ?", []any{r.Tenant, r.ID}
	case storetest.KindStep:
		return "steps", "tenant = ? AND run_id = ? AND step_id = ?", []any{r.Tenant, r.ID, r.Step}
	case storetest.KindDecision:
		return "approvals", "tenant = ? AND record_id = ?", []any{r.Tenant, r.ID}
	}
	return "claims", "tenant = ? AND key = ?", []any{r.Tenant, r.ID}
}

// document is the column holding a record's document; "" for claims.
func document(k storetest.RecordKind) string {
	switch k {
	case storetest.KindPlan, storetest.KindStep:
		return "record"
	case storetest.KindDecision:
		return "decision"
	}
	return ""
}

// one runs a statement that must change one row.
func (tp tamper) one(ctx context.Context, query string, args ...any) error {
	res, err := tp.db.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%s changed %d rows (%v), want 1", query, n, err)
	}
	return nil
}

// setEverywhere sets the record's column, where it has one, and its
// document's member of the same name, where it has a document.
func (tp tamper) setEverywhere(ctx context.Context, r storetest.Record, column string, value any) error {
	table, cond, args := where(r)
	if doc := document(r.Kind); doc != "" {
		var b []byte
		if err := tp.db.QueryRowContext(ctx, "SELECT "+doc+" FROM "+table+" WHERE "+cond, args...).Scan(&b); err != nil {
			return err
		}
		b, err := storetest.SetMember(b, column, value)
		if err != nil {
			return err
		}
		if err := tp.one(ctx, "UPDATE "+table+" SET "+doc+" = ? WHERE "+cond, append([]any{string(b)}, args...)...); err != nil {
			return err
		}
	}
	switch {
	case column == "version" || r.Kind == storetest.KindPlan || r.Kind == storetest.KindDecision:
		// Every row has a version column; plans and decisions have a
		// status column too.
	case r.Kind == storetest.KindClaim:
		column = "state"
		// The store's own check would refuse a state it never writes.
		if _, err := tp.db.ExecContext(ctx, "PRAGMA ignore_check_constraints = 1"); err != nil {
			return err
		}
	default:
		return nil // a step keeps its status in its document only
	}
	return tp.one(ctx, "UPDATE "+table+" SET "+column+" = ? WHERE "+cond, append([]any{value}, args...)...)
}

func (tp tamper) SetVersion(ctx context.Context, r storetest.Record, v int) error {
	return tp.setEverywhere(ctx, r, "version", v)
}

func (tp tamper) SetStatus(ctx context.Context, r storetest.Record, status string) error {
	return tp.setEverywhere(ctx, r, "status", status)
}

func (tp tamper) SetOutcome(ctx context.Context, key planexec.Key, outcome []byte) error {
	return tp.one(ctx, "UPDATE claims SET outcome = ? WHERE tenant = ? AND key = ?", outcome, key.Tenant, key.Digest)
}

// effects counts what the crash harness's tools did, in a table of the
// store's own file, each count in a transaction of its own.
type effects struct{ db *sql.DB }

func openEffects(t testing.TB, path string) effects {
	t.Helper()
	db := rawDB(t, path)
	mustExec(t, db, `CREATE TABLE IF NOT EXISTS test_effects (
		run TEXT NOT NULL, step TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (run, step))`)
	return effects{db}
}

func (e effects) Record(ctx context.Context, run, step string) error {
	_, err := e.db.ExecContext(ctx, `INSERT INTO test_effects (run, step, n) VALUES (?, ?, 1)
		ON CONFLICT (run, step) DO UPDATE SET n = n + 1`, run, step)
	return err
}

func (e effects) Counts(ctx context.Context, run string) (map[string]int, error) {
	rows, err := e.db.QueryContext(ctx, `SELECT step, n FROM test_effects WHERE run = ?`, run)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[string]int{}
	for rows.Next() {
		var step string
		var n int
		if err := rows.Scan(&step, &n); err != nil {
			return nil, err
		}
		counts[step] = n
	}
	return counts, rows.Err()
}

// crashDBEnv carries the file from the test to the child processes the
// crash harness starts.
const crashDBEnv = "PLANEXEC_SQLITE_CRASH_DB"

func TestAProcessKilledAnywhereLosesAndRepeatsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 120 child processes")
	}
	// 120 kill points: each of the six points of each of the plan's 20 steps.
	storetest.CrashAnywhere(t, crashDurable(t), 120)
}

func TestAProcessKilledAnywhereInARunOfRoundsLosesAndRepeatsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 42 child processes")
	}
	// 42 kill points: each point of round 2's steps, and those between rounds.
	storetest.CrashAnywhereInRounds(t, crashDurable(t), 42)
}

// crashDurable opens one file, shared with the crash children.
func crashDurable(t *testing.T) storetest.Durable {
	path := os.Getenv(crashDBEnv)
	if path == "" {
		path = filepath.Join(t.TempDir(), "crash.db")
		t.Setenv(crashDBEnv, path)
	}
	return storetest.Durable{Open: func(t testing.TB) (storetest.Stores, storetest.Effects) {
		s := openAt(t, path)
		return storetest.Stores{Store: s}, openEffects(t, path)
	}}
}
