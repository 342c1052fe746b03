package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
)

// fillSQL writes $2 runs of tenant $1 at once, as SavePlan would have
// saved them: run-000000 on, updated a second apart three at a time (the
// run id breaks the ties) from $3, in statuses spread as a service's runs
// are: most completed, some failed, a few running, awaiting approval, in
// doubt or interrupted. Those awaiting approval or in doubt say what they
// wait for.
const fillSQL = `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated, waiting)
SELECT $1, r.id, 'plan-' || r.id, 1, r.status,
	convert_to(json_build_object('version', 1, 'tenant', $1::text, 'run_id', r.id,
		'plan', json_build_object('id', 'plan-' || r.id, 'goal', 'g', 'revision', 1, 'steps', '[]'::json),
		'status', r.status, 'steps', NULL, 'created', r.at, 'updated', r.at)::text, 'UTF8'),
	r.at, r.at,
	CASE r.status
		WHEN 'awaiting_approval' THEN convert_to('[{"step_id":"s2","tool":"book_flight","request":"sha256:r-' || r.id || '"}]', 'UTF8')
		WHEN 'in_doubt' THEN convert_to('[{"step_id":"s3","tool":"pay","key":"sha256:k-' || r.id || '"}]', 'UTF8')
	END
FROM (
	SELECT format('run-%s', lpad(i::text, 6, '0')) AS id,
		$3::timestamptz + (i / 3) * interval '1 second' AS at,
		CASE WHEN m < 70 THEN 'completed' WHEN m < 80 THEN 'failed' WHEN m < 85 THEN 'running'
			WHEN m < 92 THEN 'awaiting_approval' WHEN m < 95 THEN 'in_doubt' ELSE 'interrupted' END AS status
	FROM generate_series(0, $2::integer - 1) AS i, LATERAL (SELECT (i * 7919) % 100 AS m) AS spread
) AS r`

// fillRuns writes n runs of tenant into the store's schema, and has the
// database gather the table's statistics, as autovacuum does after such a
// change.
func fillRuns(tb testing.TB, schema, tenant string, n int, from time.Time) {
	tb.Helper()
	ctx := context.Background()
	tx, err := sharedPool(tb).Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		tb.Fatal(err)
	}
	if _, err := tx.Exec(ctx, fillSQL, tenant, n, from); err != nil {
		tb.Fatalf("filling %d runs: %v", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		tb.Fatal(err)
	}
	if _, err := sharedPool(tb).Exec(ctx, "ANALYZE "+pgx.Identifier{schema, "plans"}.Sanitize()); err != nil {
		tb.Fatal(err)
	}
}

// Statuses of the filled runs' mix, for the listings below.
var (
	oneStatus  = []store.RunStatus{store.RunCompleted}
	twoDeep    = []store.RunStatus{store.RunFailed, store.RunInDoubt}
	allButDone = []store.RunStatus{store.RunRunning, store.RunAwaitingApproval, store.RunInDoubt, store.RunInterrupted, store.RunFailed}
)

// cursorAt returns the cursor after the run listed at position depth of
// tenant's runs in statuses.
func cursorAt(tb testing.TB, s *postgres.Store, tenant string, statuses []store.RunStatus, depth int) store.RunQuery {
	tb.Helper()
	q := store.RunQuery{Statuses: statuses, Limit: 1000}
	for seen := 0; ; {
		page, err := s.ListRuns(context.Background(), tenant, q)
		if err != nil || len(page) == 0 {
			tb.Fatalf("ListRuns: %d runs, %v, looking for run %d", len(page), err, depth)
		}
		if seen+len(page) > depth {
			last := page[depth-seen]
			return store.RunQuery{Statuses: statuses, AfterUpdated: last.Updated, AfterRunID: last.RunID}
		}
		seen += len(page)
		last := page[len(page)-1]
		q.AfterUpdated, q.AfterRunID = last.Updated, last.RunID
	}
}

// planNode is a node of EXPLAIN's plan in JSON.
type planNode struct {
	NodeType      string     `json:"Node Type"`
	Relation      string     `json:"Relation Name"`
	Index         string     `json:"Index Name"`
	ActualRows    float64    `json:"Actual Rows"`
	ActualLoops   float64    `json:"Actual Loops"`
	RemovedByCond float64    `json:"Rows Removed by Filter"`
	Plans         []planNode `json:"Plans"`
}

// walk calls fn on the node and each below it.
func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.walk(fn)
	}
}

// A page of a tenant's 100,000 runs, of every status, of one, of several,
// first or deep in, is a range of an index: the plans table is read only
// through plans_by_update or plans_by_status, no more rows than the page
// (with several statuses, a page of each) and the runs at the cursor's
// instant. So it is, planned for the page's parameters and planned for
// any, as PostgreSQL may plan a prepared statement after a few runs. And
// the page is the one a plain sort of the tenant's runs gives.
func TestAListingPageIsAnIndexRangeScan(t *testing.T) {
	t.Parallel()
	s, schema := newStore(t)
	ctx := context.Background()
	from := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fillRuns(t, schema, "acme", 100_000, from)
	fillRuns(t, schema, "globex", 20_000, from)
	const limit = 50
	cases := map[string]store.RunQuery{
		"every status, first page": {Limit: limit},
		"every status, deep in":    cursorAt(t, s, "acme", nil, 80_000),
		"one status, first page":   {Statuses: oneStatus, Limit: limit},
		"one status, deep in":      cursorAt(t, s, "acme", oneStatus, 50_000),
		"two statuses, first page": {Statuses: twoDeep, Limit: limit},
		"two statuses, deep in":    cursorAt(t, s, "acme", twoDeep, 10_000),
		"five statuses, deep in":   cursorAt(t, s, "acme", allButDone, 20_000),
	}
	for name, q := range cases {
		q.Limit = limit
		t.Run(name, func(t *testing.T) {
			for _, generic := range []bool{false, true} {
				out, err := postgres.ExplainListRuns(ctx, s, "acme", q, "json", generic)
				if err != nil {
					t.Fatal(err)
				}
				var plans []struct{ Plan planNode }
				if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
					t.Fatalf("EXPLAIN gave %s: %v", out, err)
				}
				read, removed, loops := 0.0, 0.0, 0.0
				plans[0].Plan.walk(func(n planNode) {
					if n.Relation != "plans" {
						return
					}
					if n.NodeType != "Index Scan" || (n.Index != "plans_by_update" && n.Index != "plans_by_status") {
						t.Errorf("generic plan %v: plans is read by %s on %q, want an index scan of the listing's indexes", generic, n.NodeType, n.Index)
					}
					read += n.ActualRows * n.ActualLoops
					removed += n.RemovedByCond * n.ActualLoops
					loops += n.ActualLoops
				})
				if want := float64(limit * max(1, len(q.Statuses))); read == 0 || read > want {
					t.Errorf("generic plan %v: %v rows read for a page of %d, want at most %v", generic, read, limit, want)
				}
				if removed > 2*loops { // the runs at the cursor's instant, three at each
					t.Errorf("generic plan %v: %v rows read and dropped", generic, removed)
				}
			}
			got, err := s.ListRuns(ctx, "acme", q)
			if err != nil {
				t.Fatal(err)
			}
			want := sortedPage(t, schema, "acme", q)
			if len(got) != limit || len(want) != limit {
				t.Fatalf("listed %d runs, a plain sort gives %d; want %d", len(got), len(want), limit)
			}
			for i := range got {
				if got[i].RunID != want[i] {
					t.Fatalf("run %d listed is %s, a plain sort gives %s", i, got[i].RunID, want[i])
				}
			}
		})
	}
}

// sortedPage is the page q asks for, by a plain sort of every run of
// tenant, in Go's order of strings.
func sortedPage(t *testing.T, schema, tenant string, q store.RunQuery) []string {
	t.Helper()
	rows, err := sharedPool(t).Query(context.Background(), "SELECT run_id, status, updated FROM "+pgx.Identifier{schema, "plans"}.Sanitize()+" WHERE tenant = $1", tenant)
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		id, status string
		updated    time.Time
	}
	var all []run
	var r run
	if _, err := pgx.ForEachRow(rows, []any{&r.id, &r.status, &r.updated}, func() error {
		if len(q.Statuses) == 0 || slices.Contains(q.Statuses, store.RunStatus(r.status)) {
			all = append(all, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(all, func(a, b run) int {
		if c := b.updated.Compare(a.updated); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	var page []string
	for _, r := range all {
		if !q.AfterUpdated.IsZero() && (r.updated.After(q.AfterUpdated) || (r.updated.Equal(q.AfterUpdated) && r.id <= q.AfterRunID)) {
			continue
		}
		if page = append(page, r.id); len(page) == q.Limit {
			break
		}
	}
	return page
}

// What a run waits for is read from a column of its own: damaged, it is
// refused by LoadPlan and by a listing that shows the run, never read as
// waiting for nothing.
func TestADamagedWaitingColumnIsCorrupt(t *testing.T) {
	t.Parallel()
	for name, damage := range map[string]string{
		"not JSON":                     `convert_to('[{"step_id":', 'UTF8')`,
		"not a list":                   `convert_to('{"step_id": "s2", "request": "r"}', 'UTF8')`,
		"an empty list":                `convert_to('[]', 'UTF8')`,
		"a wait naming nothing":        `convert_to('[{"step_id": "s2", "tool": "pay"}]', 'UTF8')`,
		"a wait with a member unknown": `convert_to('[{"step_id": "s2", "tool": "pay", "key": "k", "until": "never"}]', 'UTF8')`,
		"bytes of another format":      `'\x1f8b0800'::bytea`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, schema := newStore(t)
			ctx := context.Background()
			rec := record("acme", "run-1", plan("p1", "s1"), time.Now())
			rec.Status, rec.Waiting = store.RunAwaitingApproval, []store.Wait{{StepID: "s1", Tool: "tool", Request: "r1"}}
			if err := s.SavePlan(ctx, rec); err != nil {
				t.Fatal(err)
			}
			sqlExec(t, schema, `UPDATE plans SET waiting = `+damage)
			_, err := s.LoadPlan(ctx, "acme", "run-1")
			wantStoreError(t, "LoadPlan", err, store.ErrCorruptRecord)
			for _, statuses := range [][]store.RunStatus{nil, {store.RunAwaitingApproval}} {
				page, err := s.ListRuns(ctx, "acme", store.RunQuery{Statuses: statuses, Limit: 10})
				wantStoreError(t, fmt.Sprintf("ListRuns of %v", statuses), err, store.ErrCorruptRecord)
				if len(page) != 0 {
					t.Errorf("ListRuns of %v gave %+v with its error", statuses, page)
				}
			}
		})
	}
}

// A listing refuses a run it cannot read, as LoadPlan does, rather than
// show it as something it is not.
func TestAListingRefusesARunItCannotRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sql string
		want      error
	}{
		{"a status never written", `UPDATE plans SET status = 'archived'`, store.ErrCorruptRecord},
		{"a row without a version", `UPDATE plans SET version = 0`, store.ErrCorruptRecord},
		{"a row of a newer version", `UPDATE plans SET version = 99`, store.ErrNewerRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, schema := newStore(t)
			ctx := context.Background()
			if err := s.SavePlan(ctx, record("acme", "run-1", plan("p1", "s1"), time.Now())); err != nil {
				t.Fatal(err)
			}
			sqlExec(t, schema, tc.sql)
			_, err := s.ListRuns(ctx, "acme", store.RunQuery{Limit: 10})
			wantStoreError(t, "ListRuns", err, tc.want)
		})
	}
}

// A run's delegation comes back byte for byte, whatever it holds, and a
// run saved without one has none: NULL, not an empty document.
func TestADelegationIsKeptByteForByte(t *testing.T) {
	t.Parallel()
	s, schema := newStore(t)
	ctx := context.Background()
	rec := record("acme", "run-1", plan("p1", "s1"), time.Now())
	rec.Delegation = json.RawMessage("{ \"user\" : \"ana \\u0000 \\ud83d\\ude00 😀\",\n\t\"scope\": [ 412.50 ] }")
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || string(got.Delegation) != string(rec.Delegation) {
		t.Fatalf("LoadPlan: delegation %q, %v; want %q", got.Delegation, err, rec.Delegation)
	}
	rec.Delegation = nil
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || got.Delegation != nil || got.Waiting != nil {
		t.Fatalf("LoadPlan of a run saved with no delegation: %q, waiting %+v, %v", got.Delegation, got.Waiting, err)
	}
	var nulls bool
	if err := sharedPool(t).QueryRow(ctx, "SELECT waiting IS NULL AND delegation IS NULL FROM "+pgx.Identifier{schema, "plans"}.Sanitize()).Scan(&nulls); err != nil || !nulls {
		t.Errorf("a run waiting for nothing, under no delegation, is stored with columns NULL: %v, %v", nulls, err)
	}
}
