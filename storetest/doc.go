// Package storetest checks that a store behaves as the planexec executor
// needs: the conformance suite ([Run]) for every [store.Store]; a
// linearizability check of its claims and spends ([Linearizable]); a
// model-based test of the executor's guarantees over it ([Guarantees]:
// never twice, no ceiling passed, one effect per approval, nothing lost);
// for durable ones, checks of two handles on one backing
// ([TranscriptsAcrossHandles]) and a crash harness ([CrashAnywhere],
// [CrashAnywhereInRounds]); and benchmarks every store runs alike.
// The in-memory store (package store/memory) is the reference: it passes
// [Run], and where this package and it disagree, one of them is wrong.
//
// # The conformance suite
//
// Give [Run] a function that opens stores over a fresh, empty backing (a new
// SQLite file, a new Postgres schema) private to the test it is handed, with
// leases on the clock it is handed:
//
//	func TestStoresConform(t *testing.T) {
//		storetest.Run(t, func(t testing.TB, now func() time.Time) storetest.Stores {
//			s := openStore(t, filepath.Join(t.TempDir(), "plans.db"), now)
//			return storetest.Stores{Store: s}
//		})
//	}
//
// Each subtest opens its own stores and moves its clock by hand, so leases
// run out when the test says. A store must keep times to the microsecond (the
// executor writes none finer), give back a zero time as zero, keep decimals exact, and keep
// whatever a planner, a tool or a person writes: text (a goal, an intent,
// an approver, a reason, an error) exactly, whatever it holds — a NUL,
// control characters, characters of the astral plane, U+2028, a lone
// combining mark — and a step's arguments byte for byte, the spacing
// between their tokens and their escapes ("\u0000") as written. Outcomes need only come back as the same
// JSON value: key order, spacing and escaping may change; numbers may not
// go through float64. The subtests are grouped by interface:
//
//   - PlanStore: round trips of plans and step records, whatever a planner
//     wrote in them, across saves of the same run; ErrNoRecord for what
//     was never saved or was forgotten, steps kept for the same plan and
//     dropped for a new one, tenants isolated, records handed out as copies,
//     a run of a thousand steps.
//   - IdempotencyStore: acquisition, leases, take-over, fencing of a holder
//     whose claim moved on, completion, release, doubt, Resolve, tenants,
//     and exactly one winner among 50 goroutines claiming one key (a store
//     must be safe to share between goroutines).
//   - ApprovalStore: round trips (whatever an approver and a reason hold),
//     the first decision standing until an approval expires, tenants.
//   - StepStore: CompleteStep and ReleaseStep write claim, record and events
//     together or not at all.
//   - Boundaries: a save of a run that is gone (SavePlan with Update) is
//     refused and writes nothing, and so is one based on a revision saved
//     over since, or over a run another holder holds; a peek at a claim writes nothing; only the run that took a key
//     resolves it; a spend moves to when its step acts; Spent leaves out
//     what it is told to; of people deciding one request at
//     once exactly one does; what a run waits for comes back as written;
//     every limit is clamped (math.MaxInt, negative); times at the
//     microsecond come back exactly, and a window's edge is the same to
//     every store.
//   - Executor: a plan held for a person, decided, resumed and replayed by
//     new executors over the same stores.
//   - Cancellation: runs cancelled at random moments leave no step in doubt
//     whose tool never acted, and finish with every effect done once.
//   - Rounds: runs of rounds (Run.Do) over the stores: each round's planner
//     told what the steps of the rounds before returned; a run stopped
//     mid-round, or whose planner failed between rounds, stored as
//     interrupted or planning and gone on with by new executors, no
//     finished step run again and no stored round asked for again; an
//     answer given again without planning or acting; a question stored
//     until a reply on a new run goes on with it.
//   - Transcripts: when Plans is a [store.TranscriptStore], sessions
//     (documents byte for byte, ErrExists, tenants), the turn lease (epochs,
//     ErrTurnHeld, take-over, ErrFenced, End, CancelTurn), transcripts
//     numbered 1 to n without gap or repeat, in turns and out of them, paged,
//     and racing turns and writers. Skipped otherwise.
//   - DamagedRecords: when Stores has a [Tamper], records the store never
//     wrote. A plan, step, decision or claim of a newer layout is refused
//     with a [*store.Error] wrapping [store.ErrNewerRecord] (a
//     newer plan is not overwritten, a newer claim neither taken nor
//     resolved); a status or claim state the package never writes, and a
//     completed claim whose outcome is missing or not JSON, with one
//     wrapping [store.ErrCorruptRecord]: never replayed as an outcome,
//     never taken for a step that did not run. Skipped without a Tamper.
//
// A durable store's tests give the suite a Tamper over the same backing,
// which writes with the database's own tools and sets a record's version or
// status everywhere the store keeps it ([SetMember] rewrites one member of
// a stored document):
//
//	storetest.Run(t, func(t testing.TB, now func() time.Time) storetest.Stores {
//		s, db := openStore(t, filepath.Join(t.TempDir(), "plans.db"), now)
//		return storetest.Stores{Store: s, Tamper: tamper{db}}
//	})
//
// # Two handles on one backing
//
// A durable store is shared: two stores opened on one file, two replicas
// on one database. [TranscriptsAcrossHandles] checks that two such handles
// keep conversations as one store would while writers race on both: of
// turns taken at once on one epoch one wins, and writers at once, in the
// turn and out of it, number every entry once; workers taking turn after
// turn never hold the lease two at once and take each epoch once; of
// writers appending after the entry they read, no two append after one
// number, and the refusal is store.ErrMoved itself, not wrapped. Open both
// handles on one [Clock]:
//
//	func TestTurnsAndAppendsOnTwoStoresOverOneFileAreExclusive(t *testing.T) {
//		clk := storetest.NewClock()
//		path := filepath.Join(t.TempDir(), "plans.db")
//		a, b := openStore(t, path, clk.Now), openStore(t, path, clk.Now)
//		storetest.TranscriptsAcrossHandles(t, a, b, clk)
//	}
//
// [TranscriptTimesExact] is for a store that keeps times finer than the
// suite's millisecond: a session's times and its entries' come back exactly
// as its clock gave them, and a lease is held to its last microsecond. Give
// it a clock standing at an instant the store keeps exactly ([NewClock]
// moved back to a whole microsecond, for a store keeping microseconds).
//
// # Benchmarks
//
// [ConcurrentRuns], [TranscriptLoad] and [TurnWrite] are the bodies of
// benchmarks each store runs over a store of its own setup (a file's sync
// mode, a schema), so that stores are measured alike, with the same
// metrics.
//
// # The crash harness
//
// [CrashAnywhere] kills a process in the middle of a plan, at a chosen point,
// again and again, and checks after each kill that resuming neither loses nor
// repeats an effect. It needs a [Durable]: a function that opens the same
// backing each time it is called, in the test process and in each child it
// starts, and an [Effects] kept in that backing, where the harness's tools
// write what they did. A child inherits the test's environment, so the test
// can choose the backing and put it there:
//
//	func TestStoresSurviveKills(t *testing.T) {
//		if os.Getenv("MYSTORE_CRASH_DB") == "" { // unset in the test, set in its children
//			t.Setenv("MYSTORE_CRASH_DB", filepath.Join(t.TempDir(), "crash.db"))
//		}
//		storetest.CrashAnywhere(t, storetest.Durable{Open: func(t testing.TB) (storetest.Stores, storetest.Effects) {
//			s := openStore(t, os.Getenv("MYSTORE_CRASH_DB"), time.Now)
//			return storetest.Stores{Store: s}, effectsTable{s}
//		}}, 100)
//	}
//
// Effects.Record must be one atomic write (a row inserted in its own
// transaction will do): a kill leaves it done or not done.
//
// For each kill point the harness starts the test binary again, running only
// the calling test, with an environment variable that makes CrashAnywhere act
// as the child. Everything the test does before calling CrashAnywhere runs
// in each child too, so call it from a test of its own (or a subtest), and
// keep what comes before it cheap. The child opens the Durable and runs a
// plan of twenty steps, reversible and irreversible, in four lanes that run
// side by side and join at the end. It writes a line to its standard output
// at each point — before and after a claim, in the middle of a tool (before
// and after its effect), before and after the step's completion is written —
// and waits for the parent's go-ahead on its standard input. The parent kills
// it with SIGKILL at the point chosen: a different one for each kill, spread
// over every point of every step, while the other lanes are wherever they
// happen to be.
//
// Then the parent resumes the run with new executors until the plan
// completes. It waits out the dead child's leases (claims last 50ms), and
// settles each *IndeterminateOutcomeError in doubt by what Effects shows:
// recorded, resolved as applied with the tool's outcome; not recorded,
// resolved as not applied, so the step runs again. After the plan completes
// it checks that
//
//   - every step's effect was recorded exactly once;
//   - no step whose completion the child wrote ran again;
//   - every irreversible step the child claimed and never completed surfaced
//     as an *IndeterminateOutcomeError, and ran again only after it was
//     resolved as not applied;
//   - no person was asked again for a decision the child stored;
//   - the plan record says completed, with every step done and its outcome;
//   - a further resume replays every step and calls no tool.
//
// [CrashAnywhereInRounds] does the same for a run of rounds (Run.Do): the
// child runs three rounds, the second asking again for a read and for an
// effect of the first, and is killed at every point of the second round's
// steps, at the saves of the run's record between rounds and as the
// planner is asked for a round. The parent goes on with Do, and checks too
// that the read ran again and the effect did not, that every request told
// the rounds before it, and that the planner was never asked again for a
// round whose plan the child stored.
//
// Every kill point runs under a new run id, so the backing may be shared
// with earlier runs of the test. A kill point costs a child process and a
// lease or two: a hundred take a few seconds over a local database.
package storetest
