package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/storetest"
)

// killSQL terminates every connection of one application but the caller's.
const killSQL = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1`

func TestClaimsAndSpendsStayLinearizableWhenCallsAreCancelledAndConnectionsKilled(t *testing.T) {
	t.Parallel()
	admin := sharedPool(t)
	// The store's connections carry a name of their own, so that the kills
	// reach them and no other test's.
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	app := "planexec-linearizable-" + hex.EncodeToString(b)
	storetest.Linearizable(t, func(t testing.TB, now func() time.Time) storetest.Stores {
		cfg, err := pgxpool.ParseConfig(testDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["application_name"] = app
		cfg.MaxConns = 8
		schema := freshSchema(t, admin)
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s, err := postgres.New(context.Background(), pool, postgres.WithSchema(schema), postgres.WithClock(now))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return storetest.Stores{Store: s}
	}, storetest.LinearizableOptions{Kill: func(ctx context.Context) error {
		_, err := admin.Exec(ctx, killSQL, app)
		return err
	}})
}
