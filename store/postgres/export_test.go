package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/planexec/planexec/store"
)

// MigrateTo creates schema at an earlier version than this package's, so a
// test can write rows as an earlier version of the package did and see
// them carried over.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, schema string, version int) error {
	s := &Store{pool: pool, maxConns: int(pool.Config().MaxConns)}
	return s.migrate(ctx, schema, version)
}

// StalledSQL is Stalled's statement; its parameters are the time, the
// limit and the plan layout version.
func StalledSQL(s *Store) string { return s.q.stalled }

// ExplainListRuns runs ListRuns's statement for q under EXPLAIN (ANALYZE,
// BUFFERS) in format ("json" or "text") and returns the plan. Planned as a
// prepared statement is: for these parameters (custom), or, as PostgreSQL
// may settle on after five executions, for any (generic).
func ExplainListRuns(ctx context.Context, s *Store, tenant string, q store.RunQuery, format string, generic bool) (string, error) {
	sql, args := s.listQuery(tenant, q)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	mode := "force_custom_plan"
	if generic {
		mode = "force_generic_plan"
	}
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		return "", err
	}
	defer conn.Exec(context.Background(), "RESET plan_cache_mode")
	if _, err := conn.Exec(ctx, "PREPARE explained_list_runs AS "+sql); err != nil {
		return "", err
	}
	defer conn.Exec(context.Background(), "DEALLOCATE explained_list_runs")
	// EXECUTE takes no parameters of the protocol's: its arguments are
	// written out.
	params := make([]string, len(args))
	for i, a := range args {
		params[i] = literal(a)
	}
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT "+format+") EXECUTE explained_list_runs("+strings.Join(params, ", ")+")")
	if err != nil {
		return "", err
	}
	var out, line string
	_, err = pgx.ForEachRow(rows, []any{&line}, func() error {
		out += line + "\n"
		return nil
	})
	return out, err
}

// literal writes a listing's argument as SQL.
func literal(v any) string {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := v.(type) {
	case string:
		return quote(v)
	case int:
		return fmt.Sprint(v)
	case pgtype.Timestamptz:
		if v.InfinityModifier == pgtype.Infinity {
			return "'infinity'::timestamptz"
		}
		return quote(v.Time.Format(time.RFC3339Nano)) + "::timestamptz"
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = quote(s)
		}
		return "ARRAY[" + strings.Join(q, ", ") + "]::text[]"
	}
	panic(fmt.Sprintf("literal of %T", v))
}
