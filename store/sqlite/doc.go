// Package sqlite is the embedded durable store of planexec: plans, step
// results, idempotency claims, approval decisions, run histories, what
// windowed grants spent and conversations, in one SQLite file that
// survives restarts. It uses modernc.org/sqlite, so it
// needs no cgo.
//
// # Wiring it in
//
// Open a file (it is created if missing) and give the *Store to the
// executor as its store:
//
//	store, err := sqlite.Open(ctx, "/var/lib/myagent/runs.db")
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//	ex, err := planexec.NewExecutor(planexec.Config{Tools: tools, Gate: gate, Store: store})
//
// The one value keeps plans, claims, decisions and histories: it is a
// [store.StepStore], so the executor completes a step's claim, writes its
// record and appends its events in one transaction and there is no moment
// when one is on disk and the others are not; a [store.ApprovalStore],
// so decisions recorded with Run.Decide are kept in the same file and a
// resume never asks a person twice; a [store.EventStore], so a run's
// history can be read from any process that opens the file; a
// [store.RunLister], so a tenant's runs can be listed by status; a
// [store.CeilingStore], so every executor over the file counts one window
// per grant; a [store.Pruner], for Executor.Prune; a [store.Recoverer],
// for Executor.Recover; and a [store.TranscriptStore], for package chat's
// conversations.
//
// After a crash, open the same file and call Run.Resume (or Run.Do) for the
// run: finished steps are replayed from their records, a step whose claim is
// still held waits for the lease to run out, and an irreversible step that
// was in flight stays in doubt until Run.Resolve says what happened.
//
// # Claims
//
// Each idempotency key has one row with a state, a holder, a lease and an
// epoch. The epoch goes up with every acquisition and every resolution and
// never goes back, even after the key is freed: a holder whose claim was taken
// over gets [store.ErrFenced] on its late writes. A lease that ran out
// lets another holder take a reversible step over; an irreversible one is
// reported in doubt. Leases are measured against the clock given with
// [WithClock] (default time.Now); processes sharing a file should have
// clocks that agree. A claim's row records too whether its effect is once
// per tenant (ClaimRequest.PerTenant) and when it was last written, for
// Prune; Prune may delete the row of a settled claim, and the key is then
// claimed again from epoch 1. A claim that only peeks
// (ClaimRequest.Peek) reads the key's row on a read connection and
// writes nothing: a key it would take is reported free.
//
// # Histories
//
// A run's history is its events, one row each, numbered from 1 per tenant
// and run in the order they were stored. An event is numbered as it is
// inserted, one after the run's last, inside the transaction that appends
// it, which holds the write lock from its start: two writers, in one
// process or in two, never give two events one number nor leave a gap, a
// batch is appended whole and in order, and a reader that has read up to
// event n never finds a new event numbered n or below. Events reads a
// range of the events' primary key. Each event's document is kept byte for
// byte. A run with no plan record may have a history; Forget removes the
// history with the run, whether it has a plan record or not.
//
// # Listings
//
// ListRuns lists a tenant's runs most recently updated first, then by run
// id, a page at a time after the last run of the previous page. Two
// indexes keep them in that order, one over every run of a tenant and one
// by status, so that a page is a range of an index, read from the cursor
// on, and costs about the same whether the tenant has a hundred runs or a
// hundred thousand and however deep the page is. A listing of several
// statuses reads a range for each, in one snapshot, and merges them. A
// run whose update time is the zero time (a NULL updated) is listed after
// every other. A listed row that a newer version wrote is refused with
// [store.ErrNewerRecord], one with a status this package never writes or
// waits it cannot read with [store.ErrCorruptRecord].
//
// # Ceilings
//
// What a windowed grant let through is a table of spends, one row per
// grant and step key, with the run's tenant, the amount as the exact
// decimal's text and the time. Spend checks and records in one write
// transaction begun IMMEDIATE: it holds the file's write lock from its
// first read, so spenders in one process or in several are counted one
// after another and never take a grant past its ceiling together. The
// window (every spend after at-window) is a range of an index on grant and
// time, amounts included; its amounts are summed in Go as exact decimals,
// never as floating point, so a spend up to the ceiling to the last digit
// goes through and one a fraction past it is refused with
// [store.ErrCeiling], recording nothing. A spend reads its window, so its
// cost grows with the spends within it. A grant and key already recorded
// are moved to the spend's time and amount, checked against the window
// there without the key's own row, by the same upsert that records a new
// spend; refused, the row is left as it was. One already at that time and
// amount is left as it is and succeeds: a step spends once, when it last
// acted. An amount that is not a decimal is refused with
// [store.ErrCorruptRecord].
//
// # Pruning
//
// Prune drops what one tenant finished before a cut, in one write
// transaction, and counts exactly what it dropped: runs completed or
// failed and last updated before it (a run never updated counts as the
// oldest), with their steps and events; histories of runs with no plan
// record whose last event was stored before it (each event row records
// when it was stored); claims of effects once per run, neither in flight
// nor in doubt, last written before it, whose run has no plan record
// (those of the runs it drops included); decisions made before it; spends
// made before it. It goes by columns alone, never by documents. Each kind
// of row is found in an index range on the tenant and the cut, but for
// histories with no plan record, found with one seek per run that has a
// history, however many events it has. It never drops a run that may go
// on, a claim in flight or in doubt, the claim of an effect once per
// tenant, nor another tenant's rows. It holds the write lock while it
// runs (BenchmarkPrune: some 80 µs per dropped run, with its three steps,
// their claims and six events).
//
// # Recovery
//
// A run's row has the execution that holds it (holder) and when its lease
// on the run runs out (lease_expires), NULL unless it is running: SavePlan
// writes the holder only with a lease, and NULL when a zero lease lets the
// run go. SavePlan of a run another holder keeps, its lease not run out at
// the save's time (PlanRecord.Updated, the saver's clock; the store's for
// a record that does not say), is [store.ErrFenced] and writes nothing:
// the holder and lease are read and judged in the write transaction that
// writes the row, under the file's write lock, so of executions saving
// one run at once, in one process or several, one holds it. Stalled
// lists, across tenants by tenant and run id, the runs interrupted or
// running under a lease that ran out (a running run with no lease counts
// as one): a walk of a partial index over running and interrupted runs.
// TakeRun is one conditional UPDATE that makes the caller the holder if
// the run is stalled at that moment, so that of takers at once, in one
// process or several, exactly one wins; in the same transaction it puts
// the new status in the run's document, the plan byte for byte. ExtendRun
// moves the lease on for the run's holder while it runs or plans its next
// round; another caller, or a run that stopped, gets [store.ErrFenced], a run with no plan
// record [store.ErrNoRecord]. Runs of a layout newer than this package's
// are neither listed nor taken.
//
// # Revisions
//
// A run's row has its record's revision (rev): SavePlan stores the
// revision the save is based on (PlanRecord.Rev) plus one, 1 for a run
// it creates, and LoadPlan gives it back. A save with Update is written
// only while the row still holds the revision it is based on: one based
// on an older revision (the run was saved since by another) is
// [store.ErrFenced] and writes nothing: no plan, status, waits or events,
// and no step dropped. The revision is read and judged in the write
// transaction that writes the row, as the holder is, so of savers based
// on one revision at once, in one process or several, one saves and the
// others are fenced. A save without Update creates or replaces the run
// whatever its revision, and stores its own PlanRecord.Rev plus one. Only
// SavePlan moves the revision: SaveStep, CompleteStep, ReleaseStep,
// TakeRun and ExtendRun leave it. Runs saved before schema 5 are at
// revision 0.
//
// # Decisions
//
// A request's decision is one row: its document, and as columns its
// layout version, when it was made (decided), its status and when an
// approval stops counting (expires, Unix nanoseconds; NULL for never).
// SaveDecision is one conditional upsert (INSERT … ON CONFLICT DO UPDATE
// … WHERE) that reads those columns, never the document: it records the
// decision unless the one recorded settles the request (a denial, or,
// when the new decision approves, an approval that has not expired when
// it is made), and then returns [store.ErrDecided] and changes nothing.
// The check and the write are one statement, so of people deciding one
// request at once, through one process or several, one decision is
// recorded and the others get ErrDecided. A decision a newer version
// wrote is never replaced (a *store.Error wrapping
// [store.ErrNewerRecord]), nor one whose document could not be read
// when schema 3 gave it its status ([store.ErrCorruptRecord]).
//
// # Conversations
//
// A conversation (store.TranscriptStore) is a row of chat_sessions, with
// its document byte for byte, its turn lease (epoch, holder, lease_until,
// cancel) and the number of its last entry (seq), and its transcript, one
// row of chat_entries per entry, numbered from 1, with when it was stored
// by the store's clock. Every write (TakeTurn, WriteTurn, AppendEntries,
// AppendEntriesAfter, CancelTurn, CreateSession) is one write transaction
// begun IMMEDIATE: it reads the session's row under the file's write lock,
// judges the lease (TakeTurn: the epoch is still the one the writer read
// and no lease is held at its Now; WriteTurn: the epoch is still the
// turn's and the lease was not released, else [store.ErrTurnHeld] or
// [store.ErrFenced]) or, for AppendEntriesAfter, the last number (still
// the one the writer read, else [store.ErrMoved]), appends the entries
// numbered on from seq and writes the row back, or writes nothing. Of
// turns taken at once on one epoch, in one process or several, one takes
// it, and of writers appending after one number at once one appends;
// entries are never numbered twice nor with a gap.
// Transcript reads a range of the entries' primary key (BenchmarkTurnWrite,
// BenchmarkTranscriptLoad10000). A session not stored is
// [store.ErrNoRecord], one created twice [store.ErrExists].
//
// # Concurrency and durability
//
// A *Store is safe for many goroutines, and several processes (or several
// Stores in one process) may open the same file. The file is put in WAL
// mode: readers never wait for the writer. Within a process, writes go
// through one connection and queue there; between processes they wait for
// SQLite's write lock up to the busy timeout ([WithBusyTimeout], default 5s),
// then fail with a *store.Error. Every write that reads before it
// writes runs in a transaction begun IMMEDIATE, so it holds the write lock
// from its first read and is never refused half way.
//
// Connections run with synchronous=FULL: every commit, a claim above all, is
// on the disk before the step that depends on it goes on, so not even a power
// cut can lose a claim and let an irreversible step run twice. That costs an
// fsync per commit. WithRelaxedSync trades it away (synchronous=NORMAL: the
// WAL is synced at checkpoints; a process crash loses nothing, a power cut
// may lose the last commits) for a step cost in the tens of microseconds.
//
// # Schema and records
//
// The store creates its tables on first Open and migrates them on later
// ones; the schema version is the file's PRAGMA user_version, and two
// processes opening a new file at once migrate it once. The tables are plans
// (one row per tenant and run), steps (one row per finished step, so writing
// the thousandth step costs what the first did), claims, approvals, events
// (one row per event of a run's history), spends, and, from schema 4,
// chat_sessions and chat_entries (conversations). Besides its document
// and, from schema 5, its revision (rev: 0 for runs saved before), a
// run's row has columns for what the run waits for (a JSON array of
// store.Wait), for the delegation it acts under (the executor's document,
// byte for byte) and for its holder and lease, each NULL when it has none:
// runs saved before schema 3 have none of them (a running one among them
// is stalled). Schema 3 also gives claims per_tenant and written (claims
// written before have neither kind nor time known: they count as once per
// tenant and are never pruned), approvals decided (when the decision was
// made, carried over from each stored document; one that cannot be read
// keeps NULL and is never pruned), approvals status and expires (what
// SaveDecision's rule reads, carried over likewise; one that cannot be
// read keeps NULL and is never replaced) and events stored. SavePlan refuses waits LoadPlan could not read
// back (one naming neither or both a request and a key). Every row is
// keyed by tenant first, and every query names the tenant: one tenant
// asking for another's run gets [store.ErrNoRecord].
//
// Records are JSON documents in TEXT columns, which SQLite keeps as they
// are given: whatever a planner, a tool or a person wrote comes back as
// written, a NUL ("\u0000") and any character included, and a step's
// arguments byte for byte, with the spacing and escapes the planner used
// between their first byte and their last. Ids (tenants, run ids, step
// ids, plan ids, tool names, keys, holders, record ids) are TEXT too, kept
// as given and compared byte by byte; keep them valid UTF-8 without a NUL
// byte, as the executor ensures for what a planner names, so that other
// tools read the file as this package does.
//
// Every record has the version of its layout (plans and steps:
// store.RecordVersion; decisions and claims: a version of their own)
// in its row's version column and, for documents, in the document too. A
// file whose schema is newer than this package is refused at Open, and a
// record of a newer version, by either, when it is read, with a
// *store.Error wrapping [store.ErrNewerRecord]: upgrade the
// reader rather than misread the data. SavePlan does not overwrite a plan
// a newer version wrote; Claim does not take, nor Resolve settle, a key a
// newer version wrote. A record that cannot be decoded, names another run,
// step or decision than its row, or holds a status (for a claim, a state)
// this package never writes, a run whose waits are not a JSON array of
// waits each naming a step and either a request or a key, and a completed
// claim whose outcome is NULL or not JSON, is a *store.Error wrapping
// [store.ErrCorruptRecord]: it is never replayed as an outcome nor taken
// for a step that did not run.
//
// # Errors
//
// Failures of the database come back as *store.Error with Store
// "sqlite" and Op naming the operation ("claim", "complete step", "load
// plan", "append events", "list runs", "spend", "prune", "take run",
// "take turn", "write turn", "transcript", "migrate"). The SDK's sentinels
// come back as they are: [store.ErrNoRecord], [store.ErrFenced],
// [store.ErrInFlight], [store.ErrCompleted], [store.ErrCeiling],
// [store.ErrDecided], [store.ErrExists], [store.ErrTurnHeld] and
// [store.ErrMoved], for errors.Is.
package sqlite
