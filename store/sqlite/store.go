package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	msqlite "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/planexec/planexec/store"
)

// Store is a durable PlanStore, IdempotencyStore, ApprovalStore,
// StepStore, EventStore, RunLister, CeilingStore, Pruner, Recoverer and
// TranscriptStore in one SQLite file. It is safe for concurrent use by many goroutines, and
// by several processes opening the same file.
type Store struct {
	// w is the pool that writes: one connection, so writers in this process
	// queue in the pool instead of spinning on SQLite's busy handler. Its
	// transactions begin IMMEDIATE: the write lock is taken before the first
	// read, so a read-then-write is never refused half way.
	w *sql.DB
	// r is the pool that reads: a few query-only connections, which in WAL
	// mode never wait for the writer.
	r   *sql.DB
	now func() time.Time
	// ws and rs are every statement the store runs, prepared once on each
	// pool at Open (never later: preparing needs a connection, and the one
	// writing connection may be inside a transaction that needs a statement).
	ws, rs map[string]*sql.Stmt
}

var (
	_ store.StepStore     = (*Store)(nil)
	_ store.ApprovalStore = (*Store)(nil)
	_ store.CeilingStore  = (*Store)(nil)
	_ store.Pruner        = (*Store)(nil)
	_ store.Recoverer     = (*Store)(nil)
)

// Option configures Open.
type Option func(*options)

type options struct {
	now         func() time.Time
	busyTimeout time.Duration
	readers     int
	relaxed     bool
}

// WithRelaxedSync syncs at NORMAL instead of FULL: a commit is no longer
// synced to disk on its own, only at WAL checkpoints. A process that crashes
// loses nothing, but a power cut or an operating-system crash may lose the
// last commits, among them a claim: an irreversible step whose claim was
// lost could then run again. Choose it only where that risk is acceptable or
// the disk is not the durability boundary. Default: FULL.
func WithRelaxedSync() Option {
	return func(o *options) { o.relaxed = true }
}

// WithClock sets the clock against which claim leases are given and run out.
// Default: time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithBusyTimeout sets how long a statement waits for another connection or
// process holding the database's write lock before it fails with a
// *store.Error. Default: 5 seconds.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = d }
}

const (
	defaultBusyTimeout = 5 * time.Second
	// readers bounds the read pool: reads are short, and SQLite serves them
	// from one file, so more connections buy little.
	defaultReaders = 4
)

// Open opens the SQLite database at path, creating the file if it does not
// exist, and creates or migrates its schema. Two processes may open the same
// file at once; one migrates and the other waits for it.
//
// A file whose schema was written by a newer version of this package is
// refused with a *store.Error wrapping store.ErrNewerRecord.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{now: time.Now, busyTimeout: defaultBusyTimeout, readers: defaultReaders}
	for _, opt := range opts {
		opt(&o)
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.busyTimeout < 0 {
		o.busyTimeout = 0
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, storeErr("open", fmt.Errorf("%q is not a file path: Open takes the path of the database file", path))
	}
	w, err := sql.Open("sqlite", dsn(path, o.busyTimeout, false, o.relaxed))
	if err != nil {
		return nil, storeErr("open", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := setUp(ctx, w, o.busyTimeout, schemaVersion); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(path, o.busyTimeout, true, o.relaxed))
	if err != nil {
		w.Close()
		return nil, storeErr("open", err)
	}
	r.SetMaxOpenConns(o.readers)
	r.SetMaxIdleConns(o.readers)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	s := &Store{w: w, r: r, now: o.now}
	if s.ws, err = prepare(ctx, w, writes); err == nil {
		s.rs, err = prepare(ctx, r, reads)
	}
	if err != nil {
		s.Close()
		return nil, storeErr("open", err)
	}
	return s, nil
}

// Close closes the database. Claims held by this store stay on record until
// their leases run out.
func (s *Store) Close() error {
	var errs []error
	for _, m := range []map[string]*sql.Stmt{s.ws, s.rs} {
		for _, st := range m {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, s.r.Close(), s.w.Close())
	if err := errors.Join(errs...); err != nil {
		return storeErr("close", err)
	}
	return nil
}

func prepare(ctx context.Context, db *sql.DB, queries []string) (map[string]*sql.Stmt, error) {
	m := make(map[string]*sql.Stmt, len(queries))
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			for _, st := range m {
				st.Close()
			}
			return nil, err
		}
		m[q] = st
	}
	return m, nil
}

// on runs prepared statements on the write pool, or inside tx when it is
// not nil.
type on struct {
	stmts map[string]*sql.Stmt
	tx    *sql.Tx
}

func (o on) stmt(ctx context.Context, q string) *sql.Stmt {
	st, ok := o.stmts[q]
	if !ok {
		panic("sqlite: a statement that was not prepared: " + q)
	}
	if o.tx != nil {
		return o.tx.StmtContext(ctx, st)
	}
	return st
}

func (o on) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return o.stmt(ctx, q).ExecContext(ctx, args...)
}

// affected runs q and returns how many rows it changed.
func (o on) affected(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := o.exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (o on) row(ctx context.Context, q string, args ...any) *sql.Row {
	return o.stmt(ctx, q).QueryRowContext(ctx, args...)
}

func (o on) rows(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return o.stmt(ctx, q).QueryContext(ctx, args...)
}

// dsn is the driver's name for path. Every connection waits busy for the
// write lock, enforces foreign keys and syncs at FULL (every commit reaches
// the disk before it returns), or NORMAL with WithRelaxedSync. Write
// connections begin IMMEDIATE; read connections are query-only.
func dsn(path string, busy time.Duration, readOnly, relaxed bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if relaxed {
		q.Add("_pragma", "synchronous(NORMAL)")
	} else {
		q.Add("_pragma", "synchronous(FULL)")
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	// SQLite reads the path as a URI: escape what would end or alter it.
	p := filepath.ToSlash(filepath.Clean(path))
	p = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
	return "file:" + p + "?" + q.Encode()
}

// storeErr wraps a driver error as the SDK's store error.
func storeErr(op string, err error) error {
	return &store.Error{Store: "sqlite", Op: op, Err: err}
}

// fail returns err as a method of the store returns it: the SDK's sentinels
// (ErrNoRecord, ErrFenced, ErrInFlight, ErrCompleted, ErrCeiling,
// ErrDecided, ErrExists, ErrTurnHeld, ErrMoved) and store errors as they are,
// anything else wrapped in a *store.Error.
func fail(op string, err error) error {
	var se *store.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNoRecord), errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrInFlight), errors.Is(err, store.ErrCompleted),
		errors.Is(err, store.ErrCeiling), errors.Is(err, store.ErrDecided), errors.Is(err, store.ErrExists), errors.Is(err, store.ErrTurnHeld),
		errors.Is(err, store.ErrMoved), errors.As(err, &se):
		return err
	}
	return storeErr(op, err)
}

// write runs fn in a write transaction (BEGIN IMMEDIATE) and commits it, or
// rolls it back if fn fails.
func (s *Store) write(ctx context.Context, op string, fn func(tx on) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return storeErr(op, err)
	}
	if err := fn(on{s.ws, tx}); err != nil {
		_ = tx.Rollback()
		return fail(op, err)
	}
	if err := tx.Commit(); err != nil {
		return storeErr(op, err)
	}
	return nil
}

// isBusy reports an error that says another connection holds a lock.
func isBusy(err error) bool {
	var e *msqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return true
	}
	return false
}

// nanos is t as stored: Unix nanoseconds, NULL for the zero time, clamped to
// what an int64 holds.
func nanos(t time.Time) sql.NullInt64 {
	switch {
	case t.IsZero():
		return sql.NullInt64{}
	case t.Before(minTime):
		return sql.NullInt64{Int64: math.MinInt64, Valid: true}
	case t.After(maxTime):
		return sql.NullInt64{Int64: math.MaxInt64, Valid: true}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

// instant is t as a column that is never NULL keeps it, to compare with
// others: nanos, the zero time as the least of times.
func instant(t time.Time) int64 { return keyOf(nanos(t)) }

// expiry is when an approval stops counting as the expires column keeps
// it, to compare with the decided column (an instant) of a decision that
// would replace it: Unix nanoseconds, NULL for never (the zero time). A
// time the column cannot hold is kept so that the comparison never finds
// an approval expired before it is: one after the last instant the column
// holds never expires, and one at or before the first expires a
// nanosecond after it, after every decision made at or before it (which
// instant keeps at that first instant).
func expiry(t time.Time) sql.NullInt64 {
	switch {
	case t.IsZero(), t.After(maxTime):
		return sql.NullInt64{}
	case !t.After(minTime):
		return sql.NullInt64{Int64: math.MinInt64 + 1, Valid: true}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

// fromNanos is the inverse of nanos, in UTC.
func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)
