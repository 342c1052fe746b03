package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateTo creates schema at an earlier version than this package's, so a
// test can write rows as an earlier version of the package did and see
// them carried over.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, schema string, version int) error {
	s := &Store{pool: pool, maxConns: int(pool.Config().MaxConns)}
	return s.migrate(ctx, schema, version)
}
