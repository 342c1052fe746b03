// Package postgres is the shared durable store of planexec: plans, step
// results, idempotency claims, approval decisions, runs' histories, what
// windowed grants let through and conversations in PostgreSQL, for several
// replicas of a service running, resuming, listing, following, recovering
// and pruning the same runs. It uses pgx v5.
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
// The one value keeps plans, claims, decisions and histories: it is a
// [store.StepStore], so the executor writes a step's completion, its record
// and its events in one statement and there is never one without the
// others; a [store.ApprovalStore], so decisions are kept in the same
// database and a resume on any replica never asks a person twice; a
// [store.EventStore], so any replica reads a run's history; and a
// [store.RunLister], so any replica lists a tenant's runs by status; a
// [store.CeilingStore], so replicas count windowed ceilings together; a
// [store.Pruner], for Executor.Prune; a [store.Recoverer], for
// Executor.Recover; and a [store.TranscriptStore], so any replica runs a
// conversation's turns (package chat), one turn at a time.
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
// schema migrated by a newer version of this package is refused. Version 3
// builds the listing's and recovery's indexes in that transaction: over a
// large plans table, saving a plan waits until they are built.
//
//   - plans: one row per run (tenant, run_id), with the plan id, status,
//     record layout version, creation and update times as columns and the
//     record as a JSON document; what the run waits for (waiting: a JSON
//     array of waits) and the delegation it acts under (delegation: the
//     executor's document, byte for byte), each NULL for none; the
//     execution holding a running run and its lease on it (holder,
//     lease_expires), NULL unless the run is running (rows written before
//     version 3 hold NULL); the record's revision (rev, from version 5:
//     rows written before hold 0), which only SavePlan moves. The status
//     column is the run's status: the record's document keeps the status
//     it was saved with, which TakeRun changes in the column alone. Two
//     indexes serve listings:
//     plans_by_update (tenant, updated DESC, run_id) and plans_by_status
//     (tenant, status, updated DESC, run_id), run ids in byte order (COLLATE
//     "C"); plans_unfinished (tenant, run_id, of running and interrupted
//     runs only) serves recovery.
//   - steps: one row per step (tenant, run_id, step_id), its layout version
//     and its record. A step costs one row whatever the plan's length.
//     Saving a run under a new plan id drops the old plan's rows in the same
//     transaction.
//   - claims: one row per idempotency key (tenant, key): state, epoch,
//     holder, lease_expires, outcome, layout version, the run, step and tool
//     that last took it, whether its effect is once per tenant (per_tenant;
//     false for rows written before version 3, when there was no other
//     kind), and when it was last written (updated). Forget leaves a run's
//     claims: a claim is what keeps an effect from happening twice. Only
//     Prune drops claims, and only settled ones of effects once per run. A
//     completed claim's outcome is never NULL (an empty one is zero bytes).
//   - approvals: one row per decision (tenant, record_id: the request id),
//     with its layout version, status, time (decided_at) and when an
//     approval stops counting (expires: 'infinity' for never; given from
//     their documents to rows written before version 3) as columns and the
//     decision as a JSON document; approvals_by_decision (tenant,
//     decided_at) serves pruning.
//   - events: one row per event of a run's history (tenant, run_id, seq),
//     the event's JSON document in event; histories: one row per run that
//     has a history (tenant, run_id), the number of its last event in
//     last_seq and when an event was last appended in updated. A run with no
//     plan row may have a history. Forget removes both, with the plan and
//     its steps.
//   - spends: one row per step that spent under a windowed grant (grant_id,
//     key: the step's idempotency key digest), with its run's tenant, the
//     amount (numeric: exact) and its time (spent_at); spends_by_grant
//     (grant_id, spent_at, with the amount) sums a window, spends_by_tenant
//     (tenant, spent_at) serves pruning. grants: one row per grant that has
//     spent, never deleted, locked by each spend.
//   - chat_sessions (version 4): one row per conversation (tenant, id), its
//     document as bytes (NULL for none), its turn lease (epoch, holder: empty
//     for none, lease_until, cancel) and the number of its last entry
//     (seq); chat_entries: one row per transcript entry (tenant, session,
//     seq), with when it was stored (at) and the entry as bytes.
//
// Every statement is scoped by tenant: one tenant never reads, writes,
// forgets or prunes another's records. Two are not, by what they do: a
// grant's spends are counted across tenants (Spent names a grant, not a
// tenant), and Stalled lists the stalled runs of every tenant.
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
// writes, a completed claim whose outcome is NULL or not JSON, and a
// waiting column that is not a list of waits, is a *store.Error wrapping
// [store.ErrCorruptRecord]: it is never replayed as an outcome nor taken
// for a step that did not run. A listing refuses a run it cannot read in
// the same way, rather than show it as something it is not. Events and
// delegations are kept as they were given and never read by the store.
//
// # Decisions
//
// SaveDecision is one conditional upsert (INSERT … ON CONFLICT DO UPDATE …
// WHERE) that reads the row's status and expires columns, never its
// document: it records the decision unless the one recorded settles the
// request (a denial, or, when the new decision approves, an approval that
// has not expired when it is made), and then returns [store.ErrDecided]
// and changes nothing. The statement judges the row as the last writer
// left it, under its lock, so of people deciding one request at once, on
// any replica, one decision is recorded and the others get ErrDecided.
// Expiries are compared to the microsecond: an approval whose expiry is
// not a whole microsecond counts until the next one. A decision a newer
// version wrote is never replaced (a *store.Error wrapping
// [store.ErrNewerRecord]); one kept whose document cannot be read is a
// *store.Error wrapping [store.ErrCorruptRecord]. A replica still running
// an earlier version of this package, which would replace any decision,
// fails to record one: the expires column has no default.
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
// [store.ErrInFlight]. A claim that only peeks (ClaimRequest.Peek) skips
// the INSERT: it reads the key's row, inserts and updates nothing, and
// reports a key it would take (or one with no row) free.
//
// Leases are measured by the database's clock, so replicas need not agree
// on the time. [WithClock] measures them by a clock of your own instead;
// every store sharing a schema should then use clocks that agree. The same
// clock stamps when a claim and a history were last written, which Prune
// compares with its cut. Times are kept to the microsecond.
//
// # Histories
//
// A run's events are numbered from 1 in the order they are stored. An
// append (AppendEvents, or a step's joint write with its events) takes its
// numbers by one INSERT … ON CONFLICT DO UPDATE of the run's histories row,
// moving last_seq on by the batch's size, and writes the batch in the same
// statement. The row stays locked until the transaction commits, so the
// run's next appender, on any replica, waits and numbers on from there:
// numbers are taken in commit order. There is no gap and no number twice,
// a batch is stored whole and in order, and a reader that has read up to n
// never later finds an event numbered n or below. Appenders to one run wait
// for each other, for the length of one statement; appenders to different
// runs do not. Events are read by number, a range of the primary key.
//
// # Listings
//
// ListRuns reads one page of a tenant's runs, most recently updated first
// and then by run id, after a cursor (the last run of the page before). A
// page is a range scan of plans_by_update (every status) or, for each
// status asked for, of plans_by_status, at most one page of each, merged:
// its cost does not grow with the tenant's runs or the page's depth. A
// listed run's Updated is its plans row's update time: when its record was
// last saved, as the executor saves it at each change of status. Steps that
// finished since do not move it (a step's write does not touch the plan's
// row; LoadPlan's Updated counts them). It is kept to the microsecond, and
// a cursor taken from a listed run continues after it exactly.
//
// # Ceilings
//
// Spend counts what a windowed grant let through, for every replica at once.
// It is two statements sent in one round trip and run as one (implicit)
// transaction: the first locks the grant's row in grants (INSERT … ON
// CONFLICT DO UPDATE) until the transaction ends; the second, whose
// snapshot is taken once the lock is held, sees every spend of the grant
// committed before it, sums the window (every spend after At-window) and
// records the spend only if the sum plus the amount is within the ceiling.
// Spends of one grant are so checked one at a time, whichever connection
// or replica makes them, and never pass the ceiling together; spends of
// different grants do not wait for each other. A key recorded already (a
// step acting again) is moved by the same statement (INSERT … ON CONFLICT
// DO UPDATE) to the spend's time and amount, its own old amount left out
// of the sum; refused, it stays where it was. One recorded at that time
// and amount already is left as it is and succeeds. Sums and comparisons
// are numeric: exact to the last digit.
//
// # Pruning
//
// Prune drops, for one tenant, what finished before a cut, in one
// transaction: runs completed or failed whose plans row was last saved
// before it, with their steps and histories; histories of runs with no plan
// row last appended to before it; settled claims (completed, or free) of
// effects once per run, last written before it, whose run has no plan row
// (dropped now, forgotten, or never saved); decisions made before it;
// spends made before it. What it reports is what it deleted. It never
// drops a run that may go on, a claim in flight or in doubt, a claim once
// per tenant, nor a row a newer version of this package wrote.
//
// It takes its locks in the order the other writers take theirs (plan row,
// claim row, step rows, histories row; see the comment in upkeep.go), under
// an advisory lock that lets one Prune of a tenant run at a time: it waits
// for, or is waited for by, a step, an append, a Forget or a SavePlan of a
// run it drops, never in a circle. An append in flight to a history it
// drops is dropped with it; one that comes after starts a new history. A
// step whose write read its run's plan row before Prune deleted it may
// leave its step row behind, as one finishing while its run is forgotten
// does: it is dropped when a plan of that run id is saved again.
//
// Its cost grows with what it drops (BenchmarkPostgresPrune: 3,000 finished
// runs of three steps, 45,000 rows, in about 100 ms on two cores) and with
// the tenant's claims and histories, which it reads to find those of runs
// with no plan.
//
// # Recovery
//
// A run saved running, or planning under a lease, names its holder (the
// execution running it) and a lease, which the execution moves on while it
// works (ExtendRun: one UPDATE matching the holder and the running or
// planning status; another holder, or a run that stopped, is
// [store.ErrFenced]). A save with Create is based on revision 0, which no
// row has: of savers creating one run at once, one writes and the others
// change no row ([store.ErrFenced]). A save with no lease lets
// the run go: its holder is written NULL. SavePlan of a run another holder
// keeps, its lease not run out at the save's time (PlanRecord.Updated, the
// saver's clock; the store's for a record that does not say), is
// [store.ErrFenced] and writes nothing: the upsert of the plans row judges
// the holder and lease on the row it locked (the conflict's, so a run two
// savers create at once is judged on the first's row too), and changes
// nothing when the row is held by another. Stalled lists the runs of
// every tenant that are interrupted, or running with a lease that ran out
// (a NULL lease counts as run out), by tenant and run id in byte order: a
// range of plans_unfinished. TakeRun is one conditional UPDATE: it makes
// the caller the holder, and the run running, only if the run is stalled
// when the row is written. Takers at once queue on the row's lock and each
// after the first finds a live lease: one of them takes the run. Times are
// the caller's, as the executor writes leases by its own clock.
//
// # Revisions
//
// A run's row has its record's revision (rev): SavePlan writes the
// revision the save is based on (PlanRecord.Rev) plus one, 1 for a run it
// creates, and LoadPlan gives it back. A save with Update changes the row
// only while it still holds the revision the save is based on: one based
// on an older revision (the run was saved since by another, on any
// replica) is [store.ErrFenced] and writes nothing: no plan, status,
// waits or events, and no step dropped. The upsert judges the revision as
// it judges the holder, in its ON CONFLICT … WHERE on the row it locked,
// so of savers based on one revision at once one saves and the others are
// fenced. A save without Update creates or replaces the run whatever its
// revision, and writes its own PlanRecord.Rev plus one. Only SavePlan
// moves the revision: SaveStep, CompleteStep, ReleaseStep, TakeRun and
// ExtendRun leave it. Rows written before version 5 are at revision 0.
//
// # Conversations
//
// Every write of a conversation's turn or transcript (TakeTurn, WriteTurn,
// AppendEntries, AppendEntriesAfter) is one statement, so one implicit
// transaction. Turn writes lock the session's row first (SELECT … FOR
// UPDATE in a CTE, which waits for the last writer and reads its version),
// judge the lease from it (TakeTurn: the epoch is still the one the
// writer read and no lease is held at its Now; WriteTurn: the epoch is
// still the turn's and the lease was not released), then update the row
// and append the entries, numbered on from seq, or change nothing and
// return [store.ErrTurnHeld] or [store.ErrFenced]. AppendEntries moves
// seq on by one UPDATE, which locks the row likewise; AppendEntriesAfter's
// matches the row only while seq is still the number the writer read (an
// UPDATE that waited for the lock judges the row as the last writer left
// it), else it changes nothing and returns [store.ErrMoved]. Writers of one
// session, on any replica, are so judged and numbered one after another,
// in commit order: of turns taken at once on one epoch one takes it, of
// writers appending after one number at once one appends, and entries are
// numbered once, without gap. CancelTurn is one conditional UPDATE.
// Transcript reads a range of the entries' primary key. Times are the
// store's clock ([WithClock]; by default the database's), kept to the
// microsecond.
//
// # Cost
//
// An executed step costs two round trips, each one statement and one
// commit: the claim, then the completion with the step's record and its
// events. Finding a key taken (a replay, a holder in flight) costs a second
// read. Saving a plan, done when a run starts, stops and ends, is one
// transaction of two statements; loading one is one statement, the plan and
// its steps read in one snapshot. Appending events is one statement, and so
// is reading a page of a history or of a listing. Forget is one transaction
// of four statements. Saving a decision is one statement; one kept costs
// a second read, to say why. A spend is one round trip and one commit;
// Stalled, TakeRun and ExtendRun one statement each; Prune one
// transaction of up to eleven statements. Each write of a conversation is
// one statement and one commit (BenchmarkTurnWrite); reading a page of a
// transcript is one statement (BenchmarkTranscriptLoad10000), and a
// second when it finds no entry.
//
// # Errors
//
// A database that cannot be reached, a dropped connection or a failed
// statement is a [*store.Error] with Store "postgres" and the
// operation in Op; nothing is recorded as done that was not. Answers are the
// planexec sentinels, as the memory store gives them: [store.ErrNoRecord],
// [store.ErrFenced], [store.ErrInFlight], [store.ErrCompleted],
// [store.ErrDecided], [store.ErrExists], [store.ErrTurnHeld],
// [store.ErrMoved].
//
// # Testing
//
// The tests need a database: set PLANEXEC_POSTGRES_URL (for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). Each test works
// in a schema of its own and drops it. Without the variable they skip, except
// with CI=true, where they fail.
package postgres
