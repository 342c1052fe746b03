package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/planexec/planexec/store"
)

// SchemaVersion is the schema this package writes.
var SchemaVersion = schemaVersion

// MigrateTo creates the file at path with the schema of an earlier version
// than this package's, so a test can write rows as an earlier version of
// the package did and see them carried over.
func MigrateTo(ctx context.Context, path string, version int) error {
	db, err := sql.Open("sqlite", dsn(path, 5*time.Second, false, false))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return setUp(ctx, db, 5*time.Second, version)
}

// Queries are the statements whose plans a test checks, by name, with
// arguments of the kinds they take.
var Queries = []struct {
	Name  string
	Query string
	Args  []any
}{
	{"list runs", qRunsFirst, []any{"acme", 50}},
	{"list runs after a cursor", qRunsAfter, []any{"acme", int64(1), "run-1", 50}},
	{"list runs of a status", qRunsFirstIn, []any{"acme", "completed", 50}},
	{"list runs of a status after a cursor", qRunsAfterIn, []any{"acme", "completed", int64(1), "run-1", 50}},
	{"append an event", qEventAdd, []any{"acme", "run-1", "{}", int64(1)}},
	{"read events", qEventsRead, []any{"acme", "run-1", int64(0), 50}},
}

// SavePlans saves recs as SavePlan saves each, in one transaction: to
// build a large file quickly.
func (s *Store) SavePlans(ctx context.Context, recs []*store.PlanRecord) error {
	return s.write(ctx, "save plan", func(tx on) error {
		for _, rec := range recs {
			row, err := encodePlan(rec)
			if err != nil {
				return err
			}
			if err := savePlan(ctx, tx, rec, row, savedAt(rec, s.now)); err != nil {
				return err
			}
		}
		return nil
	})
}

// UpkeepQueries are the statements of ceilings, recovery and pruning
// whose plans a test checks, with arguments of the kinds they take.
var UpkeepQueries = []struct {
	Name  string
	Query string
	Args  []any
}{
	{"sum a grant's window", qSpendWindow, []any{"g", int64(1), int64(2)}},
	{"stalled runs", qStalled, []any{int64(1), 1, 50}},
	{"take a run", qRunTake, []any{int64(1), 1, "acme", "run-1", "h", int64(2)}},
	{"drop finished runs' events", qPruneRunEvents, []any{"acme", int64(1)}},
	{"drop finished runs' steps", qPruneRunSteps, []any{"acme", int64(1)}},
	{"drop finished runs", qPruneRuns, []any{"acme", int64(1)}},
	{"find histories with no run", qOrphanHistories, []any{"acme", int64(1)}},
	{"drop claims", qPruneClaims, []any{"acme", int64(1)}},
	{"drop decisions", qPruneDecisions, []any{"acme", int64(1)}},
	{"drop spends", qPruneSpends, []any{"acme", int64(1)}},
}

// TranscriptQueries are the statements that read sessions and
// transcripts, with arguments of the kinds they take.
var TranscriptQueries = []struct {
	Name  string
	Query string
	Args  []any
}{
	{"read a session", qSessionGet, []any{"acme", "c1"}},
	{"read a session's lease", qSessionTurn, []any{"acme", "c1"}},
	{"read a page of a transcript", qEntriesRead, []any{"acme", "c1", int64(0), 1000}},
	{"cancel a turn", qSessionCancel, []any{"acme", "c1", int64(1), int64(2)}},
}

// ClaimFromRow answers req as Claim does once its insert has met a row:
// from the key's row, in a write transaction.
func (s *Store) ClaimFromRow(ctx context.Context, req store.ClaimRequest) (store.Claim, error) {
	return s.claimRow(ctx, req)
}
