package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

// migrations[v] takes the schema from version v-1 to v. Each is applied once,
// in order, and recorded in schema_version; a released migration is never
// edited, only followed by a new one. {s} is the quoted schema name.
var migrations = [...][]string{
	1: {
		// A plan as stored: the record (without its steps) as versioned JSON,
		// and the columns an operator would query by.
		`CREATE TABLE {s}.plans (
			tenant  text        NOT NULL,
			run_id  text        NOT NULL,
			plan_id text        NOT NULL,
			version integer     NOT NULL,
			status  text        NOT NULL,
			record  json        NOT NULL,
			created timestamptz NOT NULL,
			updated timestamptz NOT NULL,
			PRIMARY KEY (tenant, run_id)
		)`,
		// One row per step, so a step's write costs the same whatever the
		// plan's length. A step is written only while its run has a plan
		// row; the check is in the statements, not a foreign key, whose row
		// lock on the plan would cost each step a second write.
		`CREATE TABLE {s}.steps (
			tenant  text NOT NULL,
			run_id  text NOT NULL,
			step_id text NOT NULL,
			plan_id text NOT NULL,
			record  json NOT NULL,
			PRIMARY KEY (tenant, run_id, step_id)
		)`,
		// One row per idempotency key, never deleted: a freed key keeps its
		// epoch, so fencing holds across every later acquisition.
		`CREATE TABLE {s}.claims (
			tenant        text        NOT NULL,
			key           text        NOT NULL,
			state         text        NOT NULL CHECK (state IN ('acquired', 'completed', 'in_doubt', 'free')),
			epoch         bigint      NOT NULL CHECK (epoch > 0),
			holder        text        NOT NULL,
			lease_expires timestamptz NOT NULL,
			outcome       bytea,
			run_id        text        NOT NULL,
			step_id       text        NOT NULL,
			tool          text        NOT NULL,
			updated       timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (tenant, key)
		)`,
		`CREATE TABLE {s}.approvals (
			tenant     text        NOT NULL,
			record_id  text        NOT NULL,
			version    integer     NOT NULL,
			status     text        NOT NULL,
			decision   json        NOT NULL,
			decided_at timestamptz NOT NULL,
			PRIMARY KEY (tenant, record_id)
		)`,
	},
	2: {
		// Records become bytes the database never parses. In json columns
		// they were stored, but any json operator on a record that held
		// \u0000 failed (PostgreSQL's text cannot hold a NUL), and SavePlan
		// read a run's record with one: a planner that wrote "\u0000" left
		// its run unable to save again. json keeps its input text, so the
		// conversion carries every record over byte for byte.
		`ALTER TABLE {s}.plans ALTER COLUMN record TYPE bytea USING convert_to(record::text, 'UTF8')`,
		`ALTER TABLE {s}.steps ALTER COLUMN record TYPE bytea USING convert_to(record::text, 'UTF8')`,
		`ALTER TABLE {s}.approvals ALTER COLUMN decision TYPE bytea USING convert_to(decision::text, 'UTF8')`,
		// Every record has its layout version in a column, as plans and
		// decisions had: steps and claims gain one. Every row there was
		// written in layout 1 (its documents say so too). From now on each
		// writer states its version, so the default goes: a replica still
		// running the first version, which could not record a step in
		// these tables, fails at its claim, before any effect.
		`ALTER TABLE {s}.steps ADD COLUMN version integer NOT NULL DEFAULT 1`,
		`ALTER TABLE {s}.steps ALTER COLUMN version DROP DEFAULT`,
		`ALTER TABLE {s}.claims ADD COLUMN version integer NOT NULL DEFAULT 1`,
		`ALTER TABLE {s}.claims ALTER COLUMN version DROP DEFAULT`,
		// A completed claim's outcome is never NULL from now on (an empty
		// one is zero bytes), so that a NULL there can only be damage.
		// Before, an empty outcome was written as NULL.
		`UPDATE {s}.claims SET outcome = ''::bytea WHERE state = 'completed' AND outcome IS NULL`,
	},
	3: {
		// What a stopped run waits for (a JSON array of waits) and the
		// delegation it acts under (the executor's document, byte for
		// byte), each NULL for none: columns of their own, so that a
		// listing reads what a run waits for without its record. Rows
		// written before hold NULL in both: they wait for nothing the
		// store knows of, under no delegation it keeps.
		`ALTER TABLE {s}.plans ADD COLUMN waiting bytea, ADD COLUMN delegation bytea`,
		// Listings: a tenant's runs most recently updated first, then by
		// run id in byte order ("C", whatever the database's collation),
		// all of them or by status. A page is a range of one of these.
		`CREATE INDEX plans_by_update ON {s}.plans (tenant, updated DESC, run_id COLLATE "C")`,
		`CREATE INDEX plans_by_status ON {s}.plans (tenant, status, updated DESC, run_id COLLATE "C")`,
		// A run's history: its events numbered from 1, and the number of
		// its last. Appending takes the next numbers by updating the
		// run's histories row, whose lock holds off the run's other
		// appenders until the transaction ends: numbers are taken in
		// commit order, so a reader never finds a gap that fills later.
		// Neither table names plans: a run whose planning failed has a
		// history and no plan.
		// updated is when an event was last appended (by the store's
		// clock), for pruning the histories of runs with no plan.
		`CREATE TABLE {s}.histories (
			tenant   text        NOT NULL,
			run_id   text        NOT NULL,
			last_seq bigint      NOT NULL CHECK (last_seq >= 0),
			updated  timestamptz NOT NULL,
			PRIMARY KEY (tenant, run_id)
		)`,
		`CREATE TABLE {s}.events (
			tenant text   NOT NULL,
			run_id text   NOT NULL,
			seq    bigint NOT NULL CHECK (seq > 0),
			event  bytea  NOT NULL,
			PRIMARY KEY (tenant, run_id, seq)
		)`,
		// Recovery: the execution holding a running run and until when
		// (its lease, which it moves on while it runs), both NULL unless
		// the run is running. Rows written before hold NULL: a run left
		// running then has no live lease, and is recovered. The status
		// column is the run's status from now on: taking a run over to
		// recover it sets it to running without rewriting the record.
		`ALTER TABLE {s}.plans ADD COLUMN holder text, ADD COLUMN lease_expires timestamptz`,
		// The runs that may have stopped without finishing, in the order
		// Stalled lists them (run ids in byte order). Leases are not in
		// it, so moving one on leaves the index alone.
		`CREATE INDEX plans_unfinished ON {s}.plans (tenant COLLATE "C", run_id COLLATE "C") WHERE status IN ('running', 'interrupted')`,
		// Whether a claim's effect is once per tenant rather than once
		// per run: pruning never drops such a claim. Every claim written
		// before was once per run (the earlier versions had no other
		// kind), and so is one written by such a version still running:
		// the default stays.
		`ALTER TABLE {s}.claims ADD COLUMN per_tenant boolean NOT NULL DEFAULT false`,
		// Pruning drops a tenant's decisions made before a time.
		`CREATE INDEX approvals_by_decision ON {s}.approvals (tenant, decided_at)`,
		// When an approval stops counting ('infinity': never), which
		// SaveDecision's rule reads with the status column. Decisions
		// stored before are given theirs from their documents by
		// backfillDecisions, which gives an approval of the first
		// layout ("granted" in its status column) the status approved
		// too; one whose document cannot be read keeps its status and
		// never expires. Then the default goes: a replica still running
		// an earlier version of this package, whose SaveDecision replaces
		// any decision, fails to record one rather than record one
		// without its expiry.
		`ALTER TABLE {s}.approvals ADD COLUMN expires timestamptz NOT NULL DEFAULT 'infinity'`,
		`ALTER TABLE {s}.approvals ALTER COLUMN expires DROP DEFAULT`,
		// What windowed grants let through: one row per step that spent
		// under a grant (its key digest, unique per grant), with the
		// tenant of its run, the amount (numeric: exact) and its time.
		// Spending sums a grant's window (spends_by_grant); pruning drops
		// a tenant's old spends (spends_by_tenant).
		`CREATE TABLE {s}.spends (
			grant_id text        NOT NULL,
			key      text        NOT NULL,
			tenant   text        NOT NULL,
			amount   numeric     NOT NULL,
			spent_at timestamptz NOT NULL,
			PRIMARY KEY (grant_id, key)
		)`,
		`CREATE INDEX spends_by_grant ON {s}.spends (grant_id, spent_at) INCLUDE (amount)`,
		`CREATE INDEX spends_by_tenant ON {s}.spends (tenant, spent_at)`,
		// One row per grant that has spent, never deleted: each spend locks
		// its grant's row until it commits, so the spends of one grant
		// check its window one at a time, whichever replica makes them.
		`CREATE TABLE {s}.grants (
			grant_id text PRIMARY KEY
		)`,
	},
	4: {
		// Conversations (store.TranscriptStore): one row per session, with
		// its document as bytes the database never parses (NULL for none;
		// jsonb would reorder its keys), the lease its running turn holds
		// (epoch numbers the turns taken, from 1; holder is '' and
		// lease_until NULL while no turn holds it), whether the turn was
		// asked to stop, and the number of its last transcript entry (0
		// for none). Every write of a session's turn or transcript is one
		// statement that locks this row first: writers of one session,
		// on any replica, are judged and numbered one after another.
		`CREATE TABLE {s}.chat_sessions (
			tenant      text        NOT NULL,
			id          text        NOT NULL,
			doc         bytea,
			epoch       bigint      NOT NULL CHECK (epoch >= 0),
			holder      text        NOT NULL,
			lease_until timestamptz,
			cancel      boolean     NOT NULL,
			seq         bigint      NOT NULL CHECK (seq >= 0),
			created     timestamptz NOT NULL,
			updated     timestamptz NOT NULL,
			PRIMARY KEY (tenant, id)
		)`,
		// One row per transcript entry, numbered from 1 per session in the
		// order stored (by moving the session's seq on), with when it was
		// stored and the entry byte for byte. A page is a range of the
		// primary key.
		`CREATE TABLE {s}.chat_entries (
			tenant  text        NOT NULL,
			session text        NOT NULL,
			seq     bigint      NOT NULL CHECK (seq > 0),
			at      timestamptz NOT NULL,
			entry   bytea       NOT NULL,
			PRIMARY KEY (tenant, session, seq)
		)`,
	},
	5: {
		// The revision of a run's record: SavePlan writes the revision the
		// save was based on plus one, and a save with Update changes the
		// row only while it still holds that revision. Rows written before
		// are at revision 0, and so is a row inserted without the column:
		// the default stays.
		`ALTER TABLE {s}.plans ADD COLUMN rev bigint NOT NULL DEFAULT 0`,
	},
}

// backfills[v], when set, runs right after the statements of migration v,
// in the same transaction: what SQL alone cannot carry over. It is given
// the quoted schema name.
var backfills = map[int]func(ctx context.Context, tx pgx.Tx, schema string) error{
	3: backfillDecisions,
}

// backfillDecisions gives each decision stored before version 3 the
// status and expiry SaveDecision's rule reads, from its document as
// Decision reads it: the first layout's "granted" is approved, and an
// approval with no expiry keeps 'infinity'. A document that cannot be
// read (damaged, or of a newer layout) leaves the row as it is.
func backfillDecisions(ctx context.Context, tx pgx.Tx, schema string) error {
	rows, err := tx.Query(ctx, `SELECT tenant, record_id, version, status, decision FROM `+schema+`.approvals`)
	if err != nil {
		return err
	}
	var (
		tenants, ids, statuses []string
		expiries               []pgtype.Timestamptz
	)
	for rows.Next() {
		var (
			tenant, id, status string
			version            int
			doc                []byte
		)
		if err := rows.Scan(&tenant, &id, &version, &status, &doc); err != nil {
			rows.Close()
			return err
		}
		d, err := storecodec.DecodeDecision(id, version, doc)
		if err != nil || (string(d.Status) == status && d.Expires.IsZero()) {
			continue // unreadable, or its columns say all there is already
		}
		tenants, ids, statuses = append(tenants, tenant), append(ids, id), append(statuses, string(d.Status))
		expiries = append(expiries, expiry(d.Expires))
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE `+schema+`.approvals AS a SET status = u.status, expires = u.expires
FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS u (tenant, record_id, status, expires)
WHERE a.tenant = u.tenant AND a.record_id = u.record_id`, tenants, ids, statuses, expiries)
	return err
}

// SchemaVersion is the version of the tables this package reads and writes.
// A schema that a newer version migrated further is refused.
const SchemaVersion = len(migrations) - 1

// migrate creates the schema or brings it to version (SchemaVersion but in
// tests), in one transaction under an advisory lock keyed by the schema's
// name: replicas that start together wait for each other, and the later
// ones find the work done.
func (s *Store) migrate(ctx context.Context, schema string, version int) error {
	ident := pgx.Identifier{schema}.Sanitize()
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('planexec schema ' || $1, 0))`, schema); err != nil {
			return err
		}
		// Checked before creating, so a role without the CREATE privilege can
		// use a schema someone else made.
		var haveSchema, haveVersions bool
		err := tx.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL, to_regclass($2) IS NOT NULL`,
			ident, ident+".schema_version").Scan(&haveSchema, &haveVersions)
		if err != nil {
			return err
		}
		if !haveSchema {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
				return err
			}
		}
		if !haveVersions {
			if _, err := tx.Exec(ctx, "CREATE TABLE "+ident+".schema_version (version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())"); err != nil {
				return err
			}
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+ident+".schema_version").Scan(&current); err != nil {
			return err
		}
		if current > SchemaVersion {
			return fmt.Errorf("schema %s is at version %d and this package knows %d: %w", ident, current, SchemaVersion, store.ErrNewerRecord)
		}
		for v := current + 1; v <= version; v++ {
			for _, stmt := range migrations[v] {
				if _, err := tx.Exec(ctx, strings.ReplaceAll(stmt, "{s}", ident)); err != nil {
					return fmt.Errorf("migrating to version %d: %w", v, err)
				}
			}
			if fill := backfills[v]; fill != nil {
				if err := fill(ctx, tx, ident); err != nil {
					return fmt.Errorf("migrating to version %d: %w", v, err)
				}
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+ident+".schema_version (version) VALUES ($1)", v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return storeErr("migrate", err)
	}
	return nil
}
