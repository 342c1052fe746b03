package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/planexec/planexec/store/postgres"
)

// The tests run against the database PLANEXEC_POSTGRES_URL names, each in a
// schema of its own that it drops when done.
const dsnVar = "PLANEXEC_POSTGRES_URL"

const howToRun = "set " + dsnVar + " to run the PostgreSQL store's tests, e.g. " +
	dsnVar + "='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' go test ./store/postgres/"

// inCI is true where a missing database must fail the tests, not skip them.
var inCI = os.Getenv("CI") == "true"

// unavailable skips the test, or fails it under CI.
func unavailable(t testing.TB, why string) {
	t.Helper()
	if inCI {
		t.Fatalf("%s (CI=true: PostgreSQL is required); %s", why, howToRun)
	}
	t.Skipf("%s; %s", why, howToRun)
}

// testDSN returns the database to test against.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(dsnVar)
	if dsn == "" {
		unavailable(t, dsnVar+" is not set")
	}
	return dsn
}

// shared is the pool the tests share; each test's stores still live in a
// schema of their own.
var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

func sharedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := testDSN(t)
	shared.once.Do(func() {
		shared.pool, shared.err = connect(dsn, 16)
	})
	if shared.err != nil {
		unavailable(t, fmt.Sprintf("PostgreSQL at %s is unreachable: %v", dsnVar, shared.err))
	}
	return shared.pool
}

// connect opens a pool of at most maxConns connections and checks that the
// database answers.
func connect(dsn string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.pool != nil {
		shared.pool.Close()
	}
	os.Exit(code)
}

// freshSchema names a schema nobody uses and drops it when the test ends.
func freshSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "planexec_test_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
		}
	})
	return name
}

// newStore opens a store in a fresh schema on the shared pool.
func newStore(t testing.TB, opts ...postgres.Option) (*postgres.Store, string) {
	t.Helper()
	pool := sharedPool(t)
	schema := freshSchema(t, pool)
	s, err := postgres.New(context.Background(), pool, append([]postgres.Option{postgres.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, schema
}
