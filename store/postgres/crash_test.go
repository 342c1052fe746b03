package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/storetest"
)

// crashSchemaVar carries the schema from the test to the processes it kills,
// so that each of them opens the same records.
const crashSchemaVar = "PLANEXEC_POSTGRES_CRASH_SCHEMA"

// effects counts what the crash plan's tools did, in a table beside the
// store's, so a kill cannot lose a count the store kept.
type effects struct {
	pool  *pgxpool.Pool
	table string
}

func (e effects) Record(ctx context.Context, run, step string) error {
	_, err := e.pool.Exec(ctx, "INSERT INTO "+e.table+" (run, step, n) VALUES ($1, $2, 1) ON CONFLICT (run, step) DO UPDATE SET n = "+e.table+".n + 1", run, step)
	return err
}

func (e effects) Counts(ctx context.Context, run string) (map[string]int, error) {
	rows, err := e.pool.Query(ctx, "SELECT step, n FROM "+e.table+" WHERE run = $1", run)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	var step string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&step, &n}, func() error {
		counts[step] = n
		return nil
	})
	return counts, err
}

func TestCrashAnywhere(t *testing.T) {
	// Twenty steps, six points in each: every point of every step.
	storetest.CrashAnywhere(t, crashDurable(t), 120)
}

func TestCrashAnywhereInRounds(t *testing.T) {
	// Each point of round 2's steps, and those between rounds.
	storetest.CrashAnywhereInRounds(t, crashDurable(t), 42)
}

// crashDurable opens a fresh schema, shared with the crash children.
func crashDurable(t *testing.T) storetest.Durable {
	pool := sharedPool(t)
	schema, child := os.LookupEnv(crashSchemaVar)
	if !child {
		schema = freshSchema(t, pool)
		t.Setenv(crashSchemaVar, schema)
	}
	open := func(t testing.TB) (storetest.Stores, storetest.Effects) {
		ctx := context.Background()
		s, err := postgres.New(ctx, pool, postgres.WithSchema(schema))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		e := effects{pool: pool, table: pgx.Identifier{schema, "effects"}.Sanitize()}
		if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+e.table+" (run text, step text, n integer NOT NULL, PRIMARY KEY (run, step))"); err != nil {
			t.Fatalf("creating the effects table: %v", err)
		}
		return storetest.Stores{Store: s}, e
	}
	return storetest.Durable{Open: open}
}
