package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/planexec/planexec/store"
)

// DefaultSchema is the schema a Store keeps its tables in unless WithSchema
// names another.
const DefaultSchema = "planexec"

// Store keeps plans, step results, idempotency claims, approval decisions,
// runs' histories, what windowed grants spent and conversations in
// PostgreSQL. It implements [store.PlanStore], [store.StepStore],
// [store.IdempotencyStore], [store.ApprovalStore], [store.EventStore],
// [store.RunLister], [store.CeilingStore], [store.Pruner],
// [store.Recoverer] and [store.TranscriptStore]. It is safe for concurrent use, and any number of
// Stores, in one process or many, may share a schema.
type Store struct {
	pool     *pgxpool.Pool
	maxConns int
	owned    bool // Close closes the pool
	clock    func() time.Time
	schema   string // the schema's name, unquoted
	q        queries
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.StepStore    = (*Store)(nil)
	_ store.EventStore   = (*Store)(nil)
	_ store.RunLister    = (*Store)(nil)
	_ store.CeilingStore = (*Store)(nil)
	_ store.Pruner       = (*Store)(nil)
	_ store.Recoverer    = (*Store)(nil)
)

// Option configures a Store.
type Option func(*options)

type options struct {
	schema string
	clock  func() time.Time
}

// WithSchema names the schema holding the store's tables (default
// "planexec"). The schema is created if it does not exist. Stores that share
// a schema share their records; stores in different schemas share nothing.
func WithSchema(name string) Option { return func(o *options) { o.schema = name } }

// WithClock measures leases against now instead of the database's clock
// (default: the database's clock, so replicas need no clock agreement of
// their own), and stamps with it when a claim or a history was last
// written, which Prune compares with the time it is given. Every Store
// sharing a schema should use clocks that agree: a lease written against
// one clock is read against another. Tests use it to move time on.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// Open connects to the database at dsn (a URL or a keyword/value string, as
// pgx takes), creates or migrates the schema, and returns a Store that owns
// its connection pool: Close closes it.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, storeErr("connect", err)
	}
	s, err := New(ctx, pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New returns a Store on pool, creating or migrating its schema first. The
// pool stays the caller's: Close leaves it open.
//
// Migration runs under a transaction-scoped advisory lock, so replicas that
// start at once migrate the schema once. A schema migrated by a newer version
// of this package is refused with a *store.Error wrapping
// store.ErrNewerRecord.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, &store.Error{Store: "postgres", Op: "open", Err: errors.New("a nil connection pool")}
	}
	o := options{schema: DefaultSchema}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkSchemaName(o.schema); err != nil {
		return nil, err
	}
	s := &Store{pool: pool, maxConns: int(pool.Config().MaxConns), clock: o.clock, schema: o.schema, q: buildQueries(pgx.Identifier{o.schema}.Sanitize())}
	if err := s.migrate(ctx, o.schema, SchemaVersion); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes the connection pool if Open made it. A Store made by New
// leaves its pool open. It returns nil, and has the shape of the other
// stores' Close (io.Closer), so a service can close whichever it opened.
func (s *Store) Close() error {
	if s.owned {
		s.pool.Close()
	}
	return nil
}

func checkSchemaName(name string) error {
	switch {
	case name == "":
		return &store.Error{Store: "postgres", Op: "open", Err: errors.New("an empty schema name")}
	case len(name) > 63:
		// PostgreSQL would silently cut it, and two long names could meet.
		return &store.Error{Store: "postgres", Op: "open", Err: fmt.Errorf("schema name %.20q… is longer than 63 bytes", name)}
	case strings.ContainsRune(name, 0):
		return &store.Error{Store: "postgres", Op: "open", Err: errors.New("a schema name with a NUL byte")}
	}
	return nil
}

// now is the clock parameter of lease arithmetic: nil makes the query use
// the database's clock.
func (s *Store) now() any {
	if s.clock == nil {
		return nil
	}
	return s.clock()
}

// again reports whether attempt (from 1) failed in a way that may be tried
// again: before anything reached the server, on a pooled connection that
// died while idle, as each does when the server restarts. The pool drops
// the connection, so the attempts are bounded by its size.
func (s *Store) again(ctx context.Context, attempt int, err error) bool {
	return err != nil && attempt <= s.maxConns && pgconn.SafeToRetry(err) && ctx.Err() == nil
}

func (s *Store) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	for attempt := 1; ; attempt++ {
		tag, err := s.pool.Exec(ctx, sql, args...)
		if !s.again(ctx, attempt, err) {
			return tag, err
		}
	}
}

// scan runs a statement that returns one row into dest; no row is
// pgx.ErrNoRows.
func (s *Store) scan(ctx context.Context, sql string, args []any, dest ...any) error {
	for attempt := 1; ; attempt++ {
		err := s.pool.QueryRow(ctx, sql, args...).Scan(dest...)
		if !s.again(ctx, attempt, err) {
			return err
		}
	}
}

// inTx runs fn in a transaction, committed if fn returns nil. A transaction
// that failed before anything reached the server never committed, so it
// too is tried again.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		if !s.again(ctx, attempt, err) {
			return err
		}
	}
}

// storeErr wraps a driver or connection error for op.
func storeErr(op string, err error) error {
	return &store.Error{Store: "postgres", Op: op, Err: err}
}

// micros renders a lease for the database, which counts in microseconds.
func micros(d time.Duration) int64 { return d.Microseconds() }

// queries holds every statement with the schema filled in.
type queries struct {
	claim, held, heldBy, extend, complete, release, resolve    string
	completeStep, releaseStep, whyNot                          string
	lockPlan, writePlan, saveStep, loadPlan                    string
	forgetPlan, forgetSteps, lockHistory, forgetHistory        string
	appendEvents, events, listRuns, listRunsByStatus           string
	decision, saveDecision                                     string
	lockGrant, spend, spent                                    string
	pruneLock, pruneRuns, dropPlans, dropClaims, dropSteps     string
	lockHistories, dropHistories, orphanHistories              string
	dropDecisions, dropSpends                                  string
	stalled, takeRun, extendRun                                string
	createSession, session, takeTurn, writeTurn, appendEntries string
	sessionSeq, cancelTurn, transcript, sessionExists          string
	appendAfter                                                string
}

func buildQueries(schema string) queries {
	in := func(sql string) string { return strings.ReplaceAll(sql, "{s}", schema) }
	return queries{
		claim:            in(claimSQL),
		held:             in(heldSQL),
		extend:           in(fencedSQL(extendSet)),
		complete:         in(fencedSQL(completeSet)),
		release:          in(fencedSQL(releaseSet)),
		resolve:          in(resolveSQL),
		heldBy:           in(heldBySQL),
		completeStep:     in(jointSQL(completeSet)),
		releaseStep:      in(jointSQL(releaseSet)),
		whyNot:           in(whyNotSQL),
		lockPlan:         in(lockPlanSQL),
		writePlan:        in(writePlanSQL),
		saveStep:         in(saveStepSQL),
		loadPlan:         in(loadPlanSQL),
		forgetPlan:       in(forgetPlanSQL),
		forgetSteps:      in(forgetStepsSQL),
		lockHistory:      in(lockHistorySQL),
		forgetHistory:    in(forgetHistorySQL),
		appendEvents:     in(appendSQL),
		events:           in(eventsSQL),
		listRuns:         in(listRunsSQL),
		listRunsByStatus: in(listRunsByStatusSQL),
		decision:         in(decisionSQL),
		saveDecision:     in(saveDecisionSQL),
		lockGrant:        in(lockGrantSQL),
		spend:            in(spendSQL),
		spent:            in(spentSQL),
		pruneLock:        pruneLockSQL,
		pruneRuns:        in(pruneRunsSQL),
		dropPlans:        in(dropPlansSQL),
		dropClaims:       in(dropClaimsSQL),
		dropSteps:        in(dropStepsSQL),
		dropHistories:    in(dropHistoriesSQL),
		orphanHistories:  in(orphanHistoriesSQL),
		lockHistories:    in(lockHistoriesSQL),
		dropDecisions:    in(dropDecisionsSQL),
		dropSpends:       in(dropSpendsSQL),
		stalled:          in(stalledSQL),
		takeRun:          in(takeRunSQL),
		extendRun:        in(extendRunSQL),
		createSession:    in(createSessionSQL),
		session:          in(sessionSQL),
		takeTurn:         in(takeTurnSQL),
		writeTurn:        in(writeTurnSQL),
		appendEntries:    in(appendEntriesSQL),
		appendAfter:      in(appendEntriesAfterSQL),
		sessionSeq:       in(sessionSeqSQL),
		cancelTurn:       in(cancelTurnSQL),
		transcript:       in(transcriptSQL),
		sessionExists:    in(sessionExistsSQL),
	}
}
