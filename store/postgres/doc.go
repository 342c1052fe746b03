// Package postgres is the shared durable store of planexec: plans, step
// results, idempotency claims and approval decisions in PostgreSQL, for
// several replicas of a service running and resuming the same runs. It uses
// pgx v5.
//
// # Wiring it in
//
// Open a store (or wrap a pool you already have with [New]) and give the
// *Store to the executor as its store:
//
//	store, err := postgres.Open(ctx, "postgres://app@db:5432/app")
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//	ex, err := planexec.NewExecutor(planexec.Config{Tools: tools, Gate: gate, Store: store})
//
// The one value keeps plans, claims and decisions: it is a
// [store.StepStore], so the executor writes a step's completion and its
// record in one statement and there is never one without the other; and a
// [planexec.ApprovalStore], so decisions are kept in the same database and a
// resume on any replica never asks a person twice.
//
// After a replica dies, any other calls Run.Resume (or Run.Do) for the run:
// steps on record are replayed, a step whose claim is still leased to the
// dead replica waits for the lease to run out and is then taken over if it
// is reversible, and an irreversible step that was in flight stays in doubt
// until Run.Resolve says what happened.
//
// # The schema
//
// The store keeps its tables in one schema ("planexec"; [WithSchema] names
// another) and creates and migrates it itself when it is opened. Migration
// runs in one transaction under an advisory lock, so replicas starting at
// once migrate once; the version reached is in the schema_version table. A
// schema migrated by a newer version of this package is refused.
//
//   - plans: one row per run (tenant, run_id), with the plan id, status and
//     record layout version as columns and the record as a JSON document.
//   - steps: one row per step (tenant, run_id, step_id), its layout version
//     and its record. A step costs one row whatever the plan's length.
//     Saving a run under a new plan id drops the old plan's rows in the same
//     transaction.
//   - claims: one row per idempotency key (tenant, key): state, epoch,
//     holder, lease_expires, outcome, layout version, and the run, step and
//     tool that claimed it. Rows are never deleted, not even by Forget: a
//     claim is what keeps an effect from happening twice. A completed
//     claim's outcome is never NULL (an empty one is zero bytes).
//   - approvals: one row per decision (tenant, record_id: the request id), with its layout
//     version, status and time as columns and the decision as a JSON
//     document.
//
// Every statement is scoped by tenant: one tenant never reads, writes or
// forgets another's records.
//
// # Records
//
// Records are JSON, never gob, stored as bytea: the database keeps them
// byte for byte and never parses them. Whatever a planner, a tool or a
// person wrote comes back as written: a NUL ("\u0000", which neither jsonb
// nor any json operator accepts), any character, and a step's arguments
// byte for byte, with the spacing and escapes the planner used between
// their first byte and their last (jsonb would also reorder keys). To read a record in SQL, convert_from(record, 'UTF8')
// gives its text; cast to json, it serves json operators unless it holds a
// \u0000.
//
// Ids (tenants, run ids, step ids, plan ids, tool names, keys, holders,
// record ids) are text columns: they must be valid UTF-8 without a NUL
// byte, as the executor ensures for what a planner names (it refuses ids
// with control characters or invalid UTF-8). PostgreSQL refuses any other,
// and the store returns a *store.Error.
//
// Every record has the version of its layout (plans and steps:
// store.RecordVersion; decisions and claims: a version of their own)
// in its row's version column and, for documents, in the document too. A
// record written by a newer version, by either, is refused with a
// [*store.Error] wrapping [store.ErrNewerRecord] rather than
// misread, and SavePlan does not overwrite a plan a newer version wrote;
// Claim does not take, nor Resolve settle, a key a newer version wrote. A
// record that cannot be decoded, names another run, step or decision than
// its row, or holds a status (for a claim, a state) this package never
// writes, and a completed claim whose outcome is NULL or not JSON, is a
// *store.Error wrapping [store.ErrCorruptRecord]: it is never
// replayed as an outcome nor taken for a step that did not run.
//
// # Claims, leases and fencing
//
// A claim is taken by one INSERT … ON CONFLICT statement: the key is new, or
// free, or its lease ran out and the step is reversible. An in-flight claim
// has a holder, a lease and an epoch. Every acquisition and every resolution
// raises the epoch, and it never goes back. Every write a holder makes
// (Extend, Complete, Release, CompleteStep, ReleaseStep) is an UPDATE that
// matches the holder's epoch, so a holder whose claim was taken over changes
// nothing and gets [store.ErrFenced]. A key left in doubt stays in doubt,
// whatever its lease, until Resolve; Resolve refuses a live holder with
// [store.ErrInFlight].
//
// Leases are measured by the database's clock, so replicas need not agree
// on the time. [WithClock] measures them by a clock of your own instead;
// every store sharing a schema should then use clocks that agree.
//
// # Cost
//
// An executed step costs two round trips, each one statement and one
// commit: the claim, then the completion with the step's record. Finding a
// key taken (a replay, a holder in flight) costs a second read. Saving a
// plan, done when a run starts and ends, is one transaction of two
// statements; loading one is one statement, the plan and its steps read in
// one snapshot.
//
// # Errors
//
// A database that cannot be reached, a dropped connection or a failed
// statement is a [*store.Error] with Store "postgres" and the
// operation in Op; nothing is recorded as done that was not. Answers are the
// planexec sentinels, as the memory store gives them: [store.ErrNoRecord],
// [store.ErrFenced], [store.ErrInFlight], [store.ErrCompleted].
//
// # Testing
//
// The tests need a database: set PLANEXEC_POSTGRES_URL (for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). Each test works
// in a schema of its own and drops it. Without the variable they skip, except
// with CI=true, where they fail.
package postgres
