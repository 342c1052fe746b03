package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
	"github.com/planexec/planexec/store/sqlite"
)

// queryPlan is what EXPLAIN QUERY PLAN says of q, one line per step.
func queryPlan(t testing.TB, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// Each listing query reads a range of an index in the listing's order, and
// each history query a range of the events' primary key: never a scan of
// the table, never a sort. So it is on a fresh file, which has no
// statistics, and after ANALYZE has given the planner some.
func TestListingAndHistoryQueriesReadAnIndexRangeWithoutSorting(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	var recs []*store.PlanRecord
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2000 {
		tenant := []string{"acme", "globex"}[i%2]
		rec := listedRecord(t, tenant, fmt.Sprintf("run-%04d", i), store.RunStatuses[i%len(store.RunStatuses)], at.Add(time.Duration(i)*time.Second))
		recs = append(recs, rec)
	}
	if err := s.SavePlans(ctx, recs); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			mustExec(t, db, "ANALYZE")
		}
		for _, q := range sqlite.Queries {
			plan := queryPlan(t, db, q.Query, q.Args...)
			t.Logf("analyzed %v, %s: %s", analyzed, q.Name, strings.Join(plan, "; "))
			want := "SEARCH plans USING INDEX plans_listed (tenant=?"
			if strings.Contains(q.Query, "events") {
				want = "SEARCH events USING PRIMARY KEY (tenant=? AND run_id=?"
			} else if strings.Contains(q.Query, "status = ?") {
				want = "SEARCH plans USING INDEX plans_listed_by_status (tenant=? AND status=?"
			}
			searches := 0
			for _, step := range plan {
				switch {
				case step == "SCAN CONSTANT ROW": // the row an INSERT … SELECT inserts
				case strings.Contains(step, "TEMP B-TREE"), strings.HasPrefix(step, "SCAN"):
					t.Errorf("analyzed %v, %s: the plan %q sorts or scans", analyzed, q.Name, plan)
				case strings.HasPrefix(step, "SEARCH") && !strings.HasPrefix(step, want):
					t.Errorf("analyzed %v, %s: the plan %q searches otherwise than %s", analyzed, q.Name, plan, want)
				case strings.HasPrefix(step, "SEARCH"):
					searches++
				}
			}
			if searches != 1 {
				t.Errorf("analyzed %v, %s: the plan %q has %d searches, want one: %s", analyzed, q.Name, plan, searches, want)
			}
		}
	}
}

// listedRecord is a run of the sample plan in status, created and updated
// at.
func listedRecord(t testing.TB, tenant, run string, status store.RunStatus, at time.Time) *store.PlanRecord {
	rec := &store.PlanRecord{Version: store.RecordVersion, Tenant: tenant, RunID: run, PlanID: "p-" + run, Plan: planDoc(t, samplePlan("p-"+run)),
		Status: status, Created: at, Updated: at}
	switch status {
	case store.RunAwaitingApproval:
		rec.Waiting = []store.Wait{{StepID: "s2", Tool: "book_flight", Request: "req-" + run}}
	case store.RunInDoubt:
		rec.Waiting = []store.Wait{{StepID: "s2", Tool: "book_flight", Key: "key-" + run}}
	}
	return rec
}

// Over random runs (statuses, times with ties, zero times, steps that move
// a run's update time on, saves that change its status) and random queries
// (sets of statuses, repeated or unknown ones among them, page sizes),
// paging through the SQLite store's listing gives what the memory store's,
// the reference, gives.
func TestListingPagesAsTheMemoryStoreDoes(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			ref := memory.New()
			got, _ := openNew(t)
			stores := []store.PlanStore{ref, got}
			base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			instant := func() time.Time {
				if rng.IntN(8) == 0 {
					return time.Time{} // never updated: listed last
				}
				return base.Add(time.Duration(rng.IntN(40)) * time.Millisecond) // ties
			}
			for i := range 150 {
				tenant := []string{"acme", "acme", "acme", "globex"}[rng.IntN(4)]
				run := fmt.Sprintf("run-%03d", rng.IntN(120)) // some saved again
				rec := listedRecord(t, tenant, run, store.RunStatuses[rng.IntN(len(store.RunStatuses))], instant())
				for _, s := range stores {
					if err := s.SavePlan(ctx, rec); err != nil {
						t.Fatalf("save %d: %v", i, err)
					}
				}
				if rng.IntN(4) == 0 {
					st := stepRec("s1", rec.PlanID)
					st.Finished = instant()
					for _, s := range stores {
						if err := s.SaveStep(ctx, tenant, run, st); err != nil {
							t.Fatalf("step %d: %v", i, err)
						}
					}
				}
			}
			all := append(slices.Clone(store.RunStatuses), "archived", "")
			for i := range 60 {
				var statuses []store.RunStatus
				for range rng.IntN(4) {
					statuses = append(statuses, all[rng.IntN(len(all))])
				}
				limit := 1 + rng.IntN(9)
				tenant := []string{"acme", "globex", "initech"}[rng.IntN(3)]
				want := listEverything(t, ref, tenant, statuses, limit)
				have := listEverything(t, got, tenant, statuses, limit)
				if !slices.EqualFunc(want, have, sameSummary) {
					t.Fatalf("query %d: %s %v by %d:\nmemory %v\nsqlite %v", i, tenant, statuses, limit, showRuns(want), showRuns(have))
				}
			}
		})
	}
}

// listEverything pages through a listing, limit runs at a time.
func listEverything(t *testing.T, l store.RunLister, tenant string, statuses []store.RunStatus, limit int) []store.RunSummary {
	t.Helper()
	var all []store.RunSummary
	q := store.RunQuery{Statuses: statuses, Limit: limit}
	for range 10000 {
		page, err := l.ListRuns(context.Background(), tenant, q)
		if err != nil {
			t.Fatalf("ListRuns(%s, %+v): %v", tenant, q, err)
		}
		if len(page) > limit {
			t.Fatalf("ListRuns with limit %d gave %d", limit, len(page))
		}
		all = append(all, page...)
		if len(page) < limit {
			return all
		}
		last := page[len(page)-1]
		q.AfterUpdated, q.AfterRunID = last.Updated, last.RunID
	}
	t.Fatal("the listing never ended")
	return nil
}

func sameSummary(a, b store.RunSummary) bool {
	return a.RunID == b.RunID && a.PlanID == b.PlanID && a.Status == b.Status && reflect.DeepEqual(a.Waiting, b.Waiting) &&
		a.Created.Equal(b.Created) && a.Updated.Equal(b.Updated)
}

func showRuns(runs []store.RunSummary) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "\n  %s %s %s", r.RunID, r.Status, r.Updated.Format(time.RFC3339Nano))
	}
	return b.String()
}

func TestAListingWithALimitBelowOneListsNothing(t *testing.T) {
	s, _ := openNew(t)
	saveSample(t, s, "acme", "run-1", "p1")
	for _, limit := range []int{0, -1} {
		if got, err := s.ListRuns(context.Background(), "acme", store.RunQuery{Limit: limit}); err != nil || len(got) != 0 {
			t.Errorf("ListRuns with limit %d = %+v, %v; want nothing", limit, got, err)
		}
	}
}

// A run's row that cannot be read is refused by the listing that would
// show it, as LoadPlan refuses it, never listed as something else; a
// listing that does not reach it is not refused.
func TestAListingRefusesARowItCannotRead(t *testing.T) {
	tests := []struct {
		name, sql string
		target    error
	}{
		{"waits not JSON", `UPDATE plans SET waiting = 'not json' WHERE run_id = 'run-1'`, store.ErrCorruptRecord},
		{"waits of another shape", `UPDATE plans SET waiting = '{"step_id":"s2","tool":"t","request":"r"}' WHERE run_id = 'run-1'`, store.ErrCorruptRecord},
		{"an empty list of waits", `UPDATE plans SET waiting = '[]' WHERE run_id = 'run-1'`, store.ErrCorruptRecord},
		{"a wait for nothing", `UPDATE plans SET waiting = '[{"step_id":"s2","tool":"t"}]' WHERE run_id = 'run-1'`, store.ErrCorruptRecord},
		{"a wait for both a request and a key", `UPDATE plans SET waiting = '[{"step_id":"s2","tool":"t","request":"r","key":"k"}]' WHERE run_id = 'run-1'`, store.ErrCorruptRecord},
		{"a wait with a member never written", `UPDATE plans SET waiting = '[{"step_id":"s2","tool":"t","request":"r","until":1}]' WHERE run_id = 'run-1'`, store.ErrCorruptRecord},
		{"a status never written", `UPDATE plans SET status = 'archived' WHERE run_id = 'run-1'`, store.ErrCorruptRecord},
		{"a row without a version", `UPDATE plans SET version = 0 WHERE run_id = 'run-1'`, store.ErrCorruptRecord},
		{"a row of a newer version", `UPDATE plans SET version = 99 WHERE run_id = 'run-1'`, store.ErrNewerRecord},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, path := openNew(t)
			at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			// run-1 is listed first; run-2, of another status, after it.
			if err := s.SavePlans(ctx, []*store.PlanRecord{
				listedRecord(t, "acme", "run-1", store.RunAwaitingApproval, at.Add(time.Second)),
				listedRecord(t, "acme", "run-2", store.RunCompleted, at),
			}); err != nil {
				t.Fatal(err)
			}
			mustExec(t, rawDB(t, path), tc.sql)
			for _, q := range []store.RunQuery{
				{Limit: 10},
				{Limit: 1},
				{Statuses: []store.RunStatus{store.RunAwaitingApproval, "archived"}, Limit: 10},
			} {
				got, err := s.ListRuns(ctx, "acme", q)
				if err == nil {
					t.Errorf("ListRuns(%+v) = %+v, want it refused", q, got)
					continue
				}
				wantStoreError(t, err, "list runs", tc.target)
				if tc.target == store.ErrNewerRecord && errors.Is(err, store.ErrCorruptRecord) {
					t.Errorf("ListRuns: %v; a newer record is not corrupt", err)
				}
			}
			// The runs after it, and those of other statuses, are listed.
			after := store.RunQuery{AfterUpdated: at.Add(time.Second), AfterRunID: "run-1", Limit: 10}
			for _, q := range []store.RunQuery{after, {Statuses: []store.RunStatus{store.RunCompleted}, Limit: 10}} {
				if got, err := s.ListRuns(ctx, "acme", q); err != nil || len(got) != 1 || got[0].RunID != "run-2" {
					t.Errorf("ListRuns(%+v) = %+v, %v; want run-2", q, got, err)
				}
			}
		})
	}
}

// LoadPlan refuses a run whose waits cannot be read, as it refuses any
// other damage.
func TestADamagedWaitingColumnIsReportedCorrupt(t *testing.T) {
	for _, damage := range []string{`'not json'`, `'[]'`, `''`, `'[{"step_id":"s2","tool":"t"}]'`, `'[{"step_id":"s2","tool":"t","request":"r"}] []'`, `'null'`} {
		t.Run(damage, func(t *testing.T) {
			s, path := openNew(t)
			saveSample(t, s, "acme", "run-1", "p1")
			mustExec(t, rawDB(t, path), `UPDATE plans SET waiting = `+damage)
			got, err := s.LoadPlan(context.Background(), "acme", "run-1")
			if err == nil {
				t.Fatalf("LoadPlan = %+v, want it refused", got)
			}
			wantStoreError(t, err, "load plan", store.ErrCorruptRecord)
		})
	}
}

// A run with nothing to wait for and no delegation has NULL in both
// columns; what it has is kept byte for byte, and replaced by NULL when a
// later save has none.
func TestWaitsAndDelegationAreColumnsNULLWhenNone(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	db := rawDB(t, path)
	columns := func() (waiting, delegation sql.NullString) {
		t.Helper()
		if err := db.QueryRow(`SELECT waiting, delegation FROM plans WHERE tenant = 'acme' AND run_id = 'run-1'`).Scan(&waiting, &delegation); err != nil {
			t.Fatal(err)
		}
		return waiting, delegation
	}
	rec := saveSample(t, s, "acme", "run-1", "p1")
	if w, d := columns(); w.Valid || d.Valid {
		t.Errorf("a run saved with neither has waiting %+v, delegation %+v; want NULL", w, d)
	}
	const delegation = "{\n  \"run_id\": \"run-1\",\t\"user\": \"ana \\u0000 \\u2028 😀\", \"n\": 1.50e2\n}"
	rec.Status, rec.Delegation = store.RunInDoubt, []byte(delegation)
	rec.Waiting = []store.Wait{{StepID: "s2", Tool: "book_flight", Key: "sha256:k"}}
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if w, d := columns(); w.String != `[{"step_id":"s2","tool":"book_flight","key":"sha256:k"}]` || d.String != delegation {
		t.Errorf("columns waiting %+v, delegation %+v", w, d)
	}
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil || string(got.Delegation) != delegation || !reflect.DeepEqual(got.Waiting, rec.Waiting) {
		t.Fatalf("LoadPlan = %+v, %v", got, err)
	}
	rec.Status, rec.Waiting, rec.Delegation = store.RunCompleted, nil, nil
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if w, d := columns(); w.Valid || d.Valid {
		t.Errorf("saved again with neither: waiting %+v, delegation %+v; want NULL", w, d)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || got.Waiting != nil || got.Delegation != nil {
		t.Errorf("LoadPlan = %+v, %v; want no waits, no delegation", got, err)
	}
}

// SavePlan does not write waits LoadPlan would refuse: the run could not
// be read again.
func TestWaitsThatCouldNotBeReadBackAreNotSaved(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	rec := saveSample(t, s, "acme", "run-1", "p1")
	for _, w := range []store.Wait{{StepID: "s2", Tool: "t"}, {StepID: "s2", Tool: "t", Request: "r", Key: "k"}, {Tool: "t", Key: "k"}} {
		bad := *rec
		bad.Status, bad.Waiting = store.RunAwaitingApproval, []store.Wait{w}
		wantStoreError(t, s.SavePlan(ctx, &bad), "save plan", nil)
		if got, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || got.Status != store.RunRunning || got.Waiting != nil {
			t.Errorf("after the refused save of %+v: %+v, %v; want the run as it was", w, got, err)
		}
	}
}
