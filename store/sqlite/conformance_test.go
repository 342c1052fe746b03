package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/planexec/planexec/store/sqlite"
	"github.com/planexec/planexec/storetest"
)

func TestTheStoreConforms(t *testing.T) {
	storetest.Run(t, func(t testing.TB, now func() time.Time) storetest.Stores {
		s, _ := openNew(t, sqlite.WithClock(now))
		return storetest.Stores{Plans: s, Idempotency: s, Approvals: s}
	})
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
	path := os.Getenv(crashDBEnv)
	if path == "" {
		path = filepath.Join(t.TempDir(), "crash.db")
		t.Setenv(crashDBEnv, path)
	}
	// 120 kill points: each of the six points of each of the plan's 20 steps.
	storetest.CrashAnywhere(t, storetest.Durable{Open: func(t testing.TB) (storetest.Stores, storetest.Effects) {
		s := openAt(t, path)
		return storetest.Stores{Plans: s, Idempotency: s, Approvals: s}, openEffects(t, path)
	}}, 120)
}
