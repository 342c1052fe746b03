package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/storetest"
)

// The conformance suite every store passes, each of its subtests in a schema
// of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	sharedPool(t) // skip (or fail under CI) before the suite starts
	storetest.Run(t, func(t testing.TB, now func() time.Time) storetest.Stores {
		s, schema := newStore(t, postgres.WithClock(now))
		return storetest.Stores{Store: s, Tamper: tamper{t, schema}}
	})
}

// tamper writes into a store's schema what the store never would, for the
// conformance suite's checks of damaged and newer records.
type tamper struct {
	t      testing.TB
	schema string
}

// where names a record's row, as a condition on $1 and $2.
func where(r storetest.Record) (table, cond string, args []any) {
	switch r.Kind {
	case storetest.KindPlan:
		return "plans", "tenant = $1 AND run_id = $2", []any{r.Tenant, r.ID}
	case storetest.KindStep:
		return "steps", "tenant = $1 AND run_id = $2 AND step_id = $3", []any{r.Tenant, r.ID, r.Step}
	case storetest.KindDecision:
		return "approvals", "tenant = $1 AND record_id = $2", []any{r.Tenant, r.ID}
	}
	return "claims", "tenant = $1 AND key = $2", []any{r.Tenant, r.ID}
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

// change runs fn in a transaction in the store's schema, and fails unless
// each of its statements changed one row.
func (tp tamper) change(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := sharedPool(tp.t).Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{tp.schema}.Sanitize()); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func one(ctx context.Context, tx pgx.Tx, sql string, args ...any) error {
	tag, err := tx.Exec(ctx, sql, args...)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("%s changed %d rows, want 1", sql, tag.RowsAffected())
	}
	return err
}

// setEverywhere sets the record's column, where it has one, and its
// document's member of the same name, where it has a document.
func (tp tamper) setEverywhere(ctx context.Context, r storetest.Record, column string, value any) error {
	table, cond, args := where(r)
	return tp.change(ctx, func(tx pgx.Tx) error {
		if doc := document(r.Kind); doc != "" {
			var b []byte
			if err := tx.QueryRow(ctx, "SELECT "+doc+" FROM "+table+" WHERE "+cond, args...).Scan(&b); err != nil {
				return err
			}
			b, err := storetest.SetMember(b, column, value)
			if err != nil {
				return err
			}
			if err := one(ctx, tx, fmt.Sprintf("UPDATE %s SET %s = $%d WHERE %s", table, doc, len(args)+1, cond), append(args, b)...); err != nil {
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
			if _, err := tx.Exec(ctx, "ALTER TABLE claims DROP CONSTRAINT IF EXISTS claims_state_check"); err != nil {
				return err
			}
		default:
			return nil // a step keeps its status in its document only
		}
		return one(ctx, tx, fmt.Sprintf("UPDATE %s SET %s = $%d WHERE %s", table, column, len(args)+1, cond), append(args, value)...)
	})
}

func (tp tamper) SetVersion(ctx context.Context, r storetest.Record, v int) error {
	return tp.setEverywhere(ctx, r, "version", v)
}

func (tp tamper) SetStatus(ctx context.Context, r storetest.Record, status string) error {
	return tp.setEverywhere(ctx, r, "status", status)
}

func (tp tamper) SetOutcome(ctx context.Context, key planexec.Key, outcome []byte) error {
	return tp.change(ctx, func(tx pgx.Tx) error {
		return one(ctx, tx, "UPDATE claims SET outcome = $3 WHERE tenant = $1 AND key = $2", key.Tenant, key.Digest, outcome)
	})
}
