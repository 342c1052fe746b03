package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/sqlite"
	"github.com/planexec/planexec/storetest"
)

// reportMicros reports the microseconds each iteration took, as unit.
func reportMicros(b *testing.B, unit string) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), unit)
}

// BenchmarkSQLiteStep is the store's cost of one executed step when the
// executor's plans and claims are one Store: a claim, then the claim's
// completion, the step's record and its two events (started, executed) in
// one transaction. It reports too the bytes of event documents stored per
// step.
func BenchmarkSQLiteStep(b *testing.B) {
	ctx := context.Background()
	s, path := openNew(b)
	saveSample(b, s, "acme", "run-1", "p1")
	outcome := json.RawMessage(`{"pnr":"X1"}`)
	// The events' documents are made beforehand: encoding them is the
	// executor's cost, not the store's.
	events := make([][]json.RawMessage, b.N)
	for i := range events {
		e := planexec.Event{Time: time.Now(), RunID: "run-1", Tenant: "acme", PlanID: "p1", Revision: 1, StepID: fmt.Sprint("s", i), Tool: "book_flight"}
		for _, kind := range []planexec.EventKind{planexec.EventStepStarted, planexec.EventStepExecuted} {
			e.Kind = kind
			doc, err := json.Marshal(e)
			if err != nil {
				b.Fatal(err)
			}
			events[i] = append(events[i], doc)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprint("s", i)
		key := planexec.Key{Tenant: "acme", Digest: id}
		c, err := s.Claim(ctx, store.ClaimRequest{Key: key, RunID: "run-1", StepID: id, Tool: "book_flight", Holder: "bench", Lease: time.Minute})
		if err != nil || c.State != store.ClaimAcquired {
			b.Fatalf("Claim = %+v, %v", c, err)
		}
		rec := store.StepRecord{StepID: id, PlanID: "p1", Tool: "book_flight", Status: planexec.StepDone, Outcome: outcome, Key: id, Finished: time.Now()}
		if err := s.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: "run-1", Outcome: outcome, Record: rec, Events: events[i]}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportMicros(b, "µs/step")
	var stored, n int64
	if err := rawDB(b, path).QueryRow(`SELECT sum(length(CAST(event AS BLOB))), count(*) FROM events`).Scan(&stored, &n); err != nil || n != 2*int64(b.N) {
		b.Fatalf("%d events stored (%v), want %d", n, err, 2*b.N)
	}
	b.ReportMetric(float64(stored)/float64(b.N), "event-B/step")
}

// BenchmarkSQLiteBareInsert is the floor BenchmarkSQLiteStep is measured
// against: one INSERT … ON CONFLICT DO NOTHING on a file set up as the
// store sets up its own by default (WAL, synchronous=FULL, one writing
// connection).
func BenchmarkSQLiteBareInsert(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bare.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (tenant TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (tenant, key)) WITHOUT ROWID`); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := db.Exec(`INSERT INTO t (tenant, key) VALUES (?, ?) ON CONFLICT DO NOTHING`, "acme", fmt.Sprint("s", i)); err != nil {
			b.Fatal(err)
		}
	}
	reportMicros(b, "µs/op")
}

// BenchmarkSQLiteConcurrentRuns runs 1,000 five-step runs at once on one
// executor over a fresh file (synchronous=FULL, the default, and NORMAL).
func BenchmarkSQLiteConcurrentRuns(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []sqlite.Option
	}{{"full sync", nil}, {"relaxed sync", []sqlite.Option{sqlite.WithRelaxedSync()}}} {
		b.Run(c.name, func(b *testing.B) {
			storetest.ConcurrentRuns(b, 1000, func(b *testing.B) store.Store {
				s, _ := openNew(b, c.opts...)
				return s
			})
		})
	}
}

// BenchmarkListRuns lists the runs of a tenant with 100,000 of them (and
// another tenant with 10,000) in varied statuses, 50 at a time: the first
// page of every status, a page of one status far into the listing, and
// pages of two statuses. Each reports ms/page.
func BenchmarkListRuns(b *testing.B) {
	ctx := context.Background()
	s, path := openNew(b, sqlite.WithRelaxedSync())
	const perPage = 50
	// Statuses as a service's runs spread over them.
	weighted := []struct {
		status store.RunStatus
		weight int
	}{{store.RunCompleted, 70}, {store.RunFailed, 10}, {store.RunRunning, 6}, {store.RunAwaitingApproval, 6},
		{store.RunInterrupted, 5}, {store.RunInDoubt, 3}}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() store.RunStatus {
		n := rng.IntN(100)
		for _, w := range weighted {
			if n -= w.weight; n < 0 {
				return w.status
			}
		}
		panic("weights do not add up to 100")
	}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	plan := planDoc(b, samplePlan("p1"))
	var recs []*store.PlanRecord
	for _, tenant := range []struct {
		name string
		runs int
	}{{"acme", 100_000}, {"globex", 10_000}} {
		for i := range tenant.runs {
			// Over 1,000 s by the millisecond: some runs share an instant.
			at := base.Add(time.Duration(rng.IntN(1_000_000)) * time.Millisecond)
			rec := &store.PlanRecord{Version: store.RecordVersion, Tenant: tenant.name, RunID: fmt.Sprintf("run-%06d", i), PlanID: "p1",
				Plan: plan, Status: pick(), Created: at.Add(-time.Minute), Updated: at}
			switch rec.Status {
			case store.RunAwaitingApproval:
				rec.Waiting = []store.Wait{{StepID: "s2", Tool: "book_flight", Request: "sha256:" + rec.RunID}}
			case store.RunInDoubt:
				rec.Waiting = []store.Wait{{StepID: "s2", Tool: "book_flight", Key: "sha256:" + rec.RunID}}
			}
			recs = append(recs, rec)
		}
	}
	start := time.Now()
	if err := s.SavePlans(ctx, recs); err != nil {
		b.Fatal(err)
	}
	b.Logf("saved %d runs in %v", len(recs), time.Since(start).Round(time.Millisecond))

	// sorted is acme's runs of statuses (every status if none) in listing
	// order, to check pages against and to take cursors from.
	sorted := func(statuses ...store.RunStatus) []*store.PlanRecord {
		var out []*store.PlanRecord
		for _, r := range recs {
			if r.Tenant == "acme" && (len(statuses) == 0 || slices.Contains(statuses, r.Status)) {
				out = append(out, r)
			}
		}
		slices.SortFunc(out, func(x, y *store.PlanRecord) int {
			if c := y.Updated.Compare(x.Updated); c != 0 {
				return c
			}
			return strings.Compare(x.RunID, y.RunID)
		})
		return out
	}
	// after is a query for the page after the run at index i of runs.
	after := func(runs []*store.PlanRecord, i int, statuses ...store.RunStatus) store.RunQuery {
		return store.RunQuery{Statuses: statuses, AfterUpdated: runs[i].Updated, AfterRunID: runs[i].RunID, Limit: perPage}
	}
	completed, two := sorted(store.RunCompleted), sorted(store.RunFailed, store.RunInDoubt)
	cases := []struct {
		name string
		q    store.RunQuery
		want []*store.PlanRecord // the page
	}{
		{"all statuses, first page", store.RunQuery{Limit: perPage}, sorted()[:perPage]},
		{"one status, deep page", after(completed, len(completed)*3/4, store.RunCompleted), completed[len(completed)*3/4+1:][:perPage]},
		{"two statuses, first page", store.RunQuery{Statuses: []store.RunStatus{store.RunFailed, store.RunInDoubt}, Limit: perPage}, two[:perPage]},
		{"two statuses, deep page", after(two, len(two)*3/4, store.RunFailed, store.RunInDoubt), two[len(two)*3/4+1:][:perPage]},
	}
	db := rawDB(b, path)
	for _, q := range sqlite.Queries[:4] {
		b.Logf("%s: %s", q.Name, strings.Join(queryPlan(b, db, q.Query, q.Args...), "; "))
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			page, err := s.ListRuns(ctx, "acme", c.q)
			if err != nil || len(page) != len(c.want) {
				b.Fatalf("ListRuns = %d runs, %v; want %d", len(page), err, len(c.want))
			}
			for i, r := range page {
				if r.RunID != c.want[i].RunID || r.Status != c.want[i].Status || !r.Updated.Equal(c.want[i].Updated) {
					b.Fatalf("run %d of the page is %+v, want %s %s", i, r, c.want[i].RunID, c.want[i].Status)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if page, err := s.ListRuns(ctx, "acme", c.q); err != nil || len(page) != perPage {
					b.Fatalf("ListRuns = %d runs, %v", len(page), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N), "ms/page")
		})
	}
}

// BenchmarkSpend is the cost of one spend against a windowed ceiling: the
// check of what the grant spent within its window and the record, in one
// write transaction, with the window holding about 10 and about 1,000
// spends (a spend reads its window), at synchronous=FULL (the default)
// and NORMAL. It reports µs/spend.
func BenchmarkSpend(b *testing.B) {
	ctx := context.Background()
	for _, sync := range []struct {
		name string
		opts []sqlite.Option
	}{{"full sync", nil}, {"relaxed sync", []sqlite.Option{sqlite.WithRelaxedSync()}}} {
		for _, inWindow := range []int{10, 1000} {
			b.Run(fmt.Sprintf("%s, window of %d spends", sync.name, inWindow), func(b *testing.B) {
				s, _ := openNew(b, sync.opts...)
				base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
				amount := decimal.RequireFromString("12.34")
				// One spend a second, under a window of inWindow seconds and a
				// ceiling it never reaches.
				window, ceiling := time.Duration(inWindow)*time.Second, decimal.NewFromInt(1e12)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					sp := store.Spend{Tenant: "acme", Grant: "g-refunds", Key: fmt.Sprint("k", i), Amount: amount, At: base.Add(time.Duration(i) * time.Second)}
					if err := s.Spend(ctx, sp, window, ceiling); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportMicros(b, "µs/spend")
				at := base.Add(time.Duration(b.N-1) * time.Second)
				if got, err := s.Spent(ctx, "g-refunds", at, window, nil); err != nil || !got.Equal(amount.Mul(decimal.NewFromInt(int64(min(b.N, inWindow))))) {
					b.Fatalf("Spent = %s, %v", got, err)
				}
			})
		}
	}
}

// BenchmarkPrune prunes a tenant with 3,000 runs finished before the cut
// (each with three steps, their claims and six events, a decision and a
// spend), and 1,000 runs it keeps (500 still going, whose decisions and
// spends are as old, and 500 finished after the cut), next to another
// tenant with 1,000 runs as old. Each iteration prunes a fresh copy of the
// file. It reports ms/prune.
func BenchmarkPrune(b *testing.B) {
	ctx := context.Background()
	const finished, kept = 3000, 1000
	template := filepath.Join(b.TempDir(), "template.db")
	clk := storetest.NewClock()
	s, err := sqlite.Open(ctx, template, sqlite.WithRelaxedSync(), sqlite.WithClock(clk.Now))
	if err != nil {
		b.Fatal(err)
	}
	plan := planDoc(b, samplePlan("p1"))
	events := []json.RawMessage{json.RawMessage(`{"kind":"STEP_STARTED","step_id":"s"}`), json.RawMessage(`{"kind":"STEP_EXECUTED","step_id":"s"}`)}
	populate := func(tenant string, i int, status store.RunStatus) {
		run := fmt.Sprintf("run-%05d", i)
		now := clk.Now()
		rec := &store.PlanRecord{Version: store.RecordVersion, Tenant: tenant, RunID: run, PlanID: "p1", Plan: plan, Status: store.RunRunning,
			Holder: "h", LeaseExpires: now.Add(time.Minute), Created: now, Updated: now}
		if err := s.SavePlan(ctx, rec); err != nil {
			b.Fatal(err)
		}
		for _, step := range []string{"s1", "s2", "s3"} {
			key := planexec.Key{Tenant: tenant, Digest: run + "/" + step}
			c, err := s.Claim(ctx, store.ClaimRequest{Key: key, RunID: run, StepID: step, Tool: "notify", Holder: "h", Lease: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			st := store.StepRecord{StepID: step, PlanID: "p1", Tool: "notify", Status: planexec.StepDone, Outcome: json.RawMessage(`{"ok":true}`), Key: key.Digest, Finished: now}
			if err := s.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: run, Record: st, Outcome: st.Outcome, Events: events}); err != nil {
				b.Fatal(err)
			}
		}
		rec.Status, rec.Holder, rec.LeaseExpires = status, "", time.Time{}
		if err := s.SavePlan(ctx, rec); err != nil {
			b.Fatal(err)
		}
		if err := s.SaveDecision(ctx, tenant, planexec.Decision{RequestID: run, Status: planexec.Approved, Approver: "ana", DecidedAt: now}); err != nil {
			b.Fatal(err)
		}
		if err := s.Spend(ctx, store.Spend{Tenant: tenant, Grant: "g", Key: tenant + run, Amount: decimal.NewFromInt(1), At: now}, time.Minute, decimal.NewFromInt(1e9)); err != nil {
			b.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	start := time.Now()
	for i := range finished {
		populate("acme", i, []store.RunStatus{store.RunCompleted, store.RunFailed}[i%2])
	}
	for i := range kept / 2 {
		populate("acme", finished+i, []store.RunStatus{store.RunRunning, store.RunAwaitingApproval, store.RunInterrupted}[i%3])
	}
	for i := range 1000 {
		populate("globex", i, store.RunCompleted)
	}
	clk.Advance(time.Hour)
	cut := clk.Now()
	clk.Advance(time.Hour)
	for i := range kept / 2 {
		populate("acme", finished+kept/2+i, store.RunCompleted)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	info, err := os.Stat(template)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("built a file of %d runs (%.1f MB) in %v", finished+kept+1000, float64(info.Size())/1e6, time.Since(start).Round(time.Millisecond))
	want := store.Pruned{Runs: finished, Claims: 3 * finished, Decisions: finished + kept/2, Spends: finished + kept/2}
	var elapsed time.Duration
	i := 0
	for b.Loop() {
		i++
		b.StopTimer()
		path := filepath.Join(b.TempDir(), fmt.Sprint("copy-", i, ".db"))
		data, err := os.ReadFile(template)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			b.Fatal(err)
		}
		s, err := sqlite.Open(ctx, path, sqlite.WithClock(clk.Now))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		got, err := s.Prune(ctx, "acme", cut)
		elapsed += time.Since(t0)
		b.StopTimer()
		if err != nil || got != want {
			b.Fatalf("Prune = %+v, %v; want %+v", got, err, want)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		os.Remove(path)
		b.StartTimer()
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/1e6/float64(i), "ms/prune")
}

// BenchmarkTranscriptLoad10000 loads a conversation of 10,000 entries
// whole, in pages of 1,000 (storetest.TranscriptLoad). It reports ms/load
// and entries/s.
func BenchmarkTranscriptLoad10000(b *testing.B) {
	s, _ := openNew(b)
	storetest.TranscriptLoad(b, s)
}

// BenchmarkTurnWrite is one WriteTurn of a running turn appending one
// entry and renewing its lease (storetest.TurnWrite): one write
// transaction, at synchronous=FULL (the default) and NORMAL. It reports
// µs/op.
func BenchmarkTurnWrite(b *testing.B) {
	for _, sync := range []struct {
		name string
		opts []sqlite.Option
	}{{"full sync", nil}, {"relaxed sync", []sqlite.Option{sqlite.WithRelaxedSync()}}} {
		b.Run(sync.name, func(b *testing.B) {
			s, _ := openNew(b, sync.opts...)
			storetest.TurnWrite(b, s)
		})
	}
}
