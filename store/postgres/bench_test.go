package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/storetest"
)

// What the store costs per executed step: the claim, then the outcome, the
// step's record and its events in one statement. The executor's step write
// carries the events since its last write (the step's start and its
// execution); "no history" is the same write with none. Compare with
// BenchmarkPostgresBareInsert, the floor of one durable write to this
// database.
func BenchmarkPostgresStep(b *testing.B) {
	for _, bc := range []struct {
		name   string
		events int
	}{{"history", 2}, {"no history", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := newStore(b)
			ctx := context.Background()
			if err := s.SavePlan(ctx, record("acme", "bench", plan("p1", "s1"), time.Now())); err != nil {
				b.Fatal(err)
			}
			outcome := json.RawMessage(`{"pnr":"PNR-BA117","seats":2}`)
			for i := 0; b.Loop(); i++ {
				id := "s" + strconv.Itoa(i)
				key := planexec.Key{Tenant: "acme", Digest: "key-" + id}
				c, err := s.Claim(ctx, store.ClaimRequest{Key: key, RunID: "bench", StepID: id, Tool: "book_flight", Holder: "bench", Lease: time.Minute})
				if err != nil || c.State != store.ClaimAcquired {
					b.Fatalf("Claim: %+v, %v", c, err)
				}
				var events []json.RawMessage
				for j := range bc.events {
					events = append(events, json.RawMessage(`{"kind":"STEP_EXECUTED","step_id":"`+id+`","tool":"book_flight","n":`+strconv.Itoa(j)+`,"at":"2030-03-04T09:00:00.123456789Z"}`))
				}
				rec := store.StepRecord{StepID: id, PlanID: "p1", Tool: "book_flight", Status: planexec.StepDone, Outcome: outcome, Key: key.Digest, Finished: time.Now()}
				if err := s.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: "bench", Outcome: outcome, Record: rec, Events: events}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
		})
	}
}

// One INSERT … ON CONFLICT DO NOTHING per op, on the same pool: what one
// committed round trip costs here.
func BenchmarkPostgresBareInsert(b *testing.B) {
	pool := sharedPool(b)
	schema := freshSchema(b, pool)
	table := pgx.Identifier{schema, "bare"}.Sanitize()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (tenant text, key text, PRIMARY KEY (tenant, key))"); err != nil {
		b.Fatal(err)
	}
	insert := "INSERT INTO " + table + " (tenant, key) VALUES ($1, $2) ON CONFLICT DO NOTHING"
	for i := 0; b.Loop(); i++ {
		if _, err := pool.Exec(ctx, insert, "acme", "key-s"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
}

// BenchmarkPostgresConcurrentRuns runs 1,000 five-step runs at once on one
// executor over a fresh schema.
func BenchmarkPostgresConcurrentRuns(b *testing.B) {
	storetest.ConcurrentRuns(b, 1000, func(b *testing.B) store.Store {
		s, _ := newStore(b)
		return s
	})
}

// BenchmarkListRuns lists pages of 50 of a tenant's 100,000 runs in the
// statuses of a service's (beside another tenant's 20,000): of every
// status, the first page; of one status, a page 50,000 runs in; of two
// statuses, the first page. A page costs the same however many runs there
// are and however deep it is: TestAListingPageIsAnIndexRangeScan checks
// the plans.
func BenchmarkListRuns(b *testing.B) {
	s, schema := newStore(b)
	ctx := context.Background()
	from := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	fillRuns(b, schema, "acme", 100_000, from)
	fillRuns(b, schema, "globex", 20_000, from)
	b.Logf("120,000 runs written and analyzed in %v", time.Since(start).Round(time.Millisecond))
	deep := cursorAt(b, s, "acme", oneStatus, 50_000)
	deep.Limit = 50
	for _, bc := range []struct {
		name string
		q    store.RunQuery
	}{
		{"every status, first page", store.RunQuery{Limit: 50}},
		{"one status, 50000 in", deep},
		{"two statuses, first page", store.RunQuery{Statuses: twoDeep, Limit: 50}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				page, err := s.ListRuns(ctx, "acme", bc.q)
				if err != nil || len(page) != 50 {
					b.Fatalf("ListRuns: %d runs, %v", len(page), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

// What a spend under a windowed grant costs: the grant's lock, the sum of
// its window and the record, one round trip. The window holds the given
// number of earlier spends (each spend is a millisecond after the one
// before, the window that many milliseconds long): summing it is a range
// of spends_by_grant. "at once" spends from 8 goroutines, under one grant
// (they queue on its lock) or each under a grant of its own.
func BenchmarkPostgresSpend(b *testing.B) {
	d := decimal.RequireFromString
	from := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, inWindow := range []int{0, 100, 1000} {
		b.Run(fmt.Sprintf("one grant, %d in the window", inWindow), func(b *testing.B) {
			s, _ := newStore(b)
			ctx := context.Background()
			window := time.Duration(inWindow)*time.Millisecond + time.Microsecond
			spend := func(i int) {
				sp := store.Spend{Tenant: "acme", Grant: "g", Key: "k-" + strconv.Itoa(i), Amount: d("12.50"), At: from.Add(time.Duration(i) * time.Millisecond)}
				if err := s.Spend(ctx, sp, window, d("1000000000")); err != nil {
					b.Fatal(err)
				}
			}
			for i := range inWindow {
				spend(i)
			}
			for i := inWindow; b.Loop(); i++ {
				spend(i)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/spend")
		})
	}
	for _, grants := range []string{"one grant", "a grant each"} {
		b.Run("8 at once, "+grants, func(b *testing.B) {
			s, _ := newStore(b)
			ctx := context.Background()
			var n, g atomic.Int64
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				grant := "g"
				if grants != "one grant" {
					grant = "g-" + strconv.FormatInt(g.Add(1), 10)
				}
				for pb.Next() {
					i := n.Add(1)
					sp := store.Spend{Tenant: "acme", Grant: grant, Key: "k-" + strconv.FormatInt(i, 10), Amount: d("12.50"), At: from.Add(time.Duration(i) * time.Millisecond)}
					if err := s.Spend(ctx, sp, 100*time.Millisecond, d("1000000000")); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/spend")
		})
	}
}

// fillFinishedSQL writes $2 runs of tenant $1, named $3 followed by a
// number, completed at $4, each as a run of three steps leaves them: its
// plan, its step rows, its claims (completed) and its history of eight
// events. Pruning reads neither records nor events, so they are short.
const fillFinishedSQL = `WITH runs AS (
	SELECT $3 || i AS id FROM generate_series(1, $2::integer) AS i
), plans AS (
	INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated)
	SELECT $1, id, 'p', 1, 'completed', '\x7b7d', $4, $4 FROM runs
), steps AS (
	INSERT INTO steps (tenant, run_id, step_id, plan_id, version, record)
	SELECT $1, id, 's' || j, 'p', 1, '\x7b7d' FROM runs, generate_series(1, 3) AS j
), claims AS (
	INSERT INTO claims (tenant, key, state, epoch, holder, lease_expires, outcome, run_id, step_id, tool, version, updated)
	SELECT $1, 'k-' || id || '-' || j, 'completed', 1, 'h', $4, '\x2222', id, 's' || j, 't', 1, $4 FROM runs, generate_series(1, 3) AS j
), histories AS (
	INSERT INTO histories (tenant, run_id, last_seq, updated) SELECT $1, id, 8, $4 FROM runs
)
INSERT INTO events (tenant, run_id, seq, event) SELECT $1, id, j, '\x7b7d' FROM runs, generate_series(1, 8) AS j`

func fillFinished(b *testing.B, schema, tenant string, n int, prefix string, at time.Time) {
	b.Helper()
	ctx := context.Background()
	tx, err := sharedPool(b).Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(ctx, fillFinishedSQL, tenant, n, prefix, at); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
}

// What pruning a tenant's 3,000 runs finished before the cut costs (each
// with three steps, three claims and a history of eight events: 45,000
// rows in all), beside 10,000 runs of its own finished since, whose rows
// it keeps, and another tenant's 10,000.
func BenchmarkPostgresPrune(b *testing.B) {
	const n = 3000
	s, schema := newStore(b)
	ctx := context.Background()
	cut := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fillFinished(b, schema, "acme", 10_000, "kept-", cut.Add(time.Hour))
	fillFinished(b, schema, "globex", 10_000, "other-", cut.Add(-time.Hour))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		fillFinished(b, schema, "acme", n, fmt.Sprintf("old-%d-", i), cut.Add(-time.Hour))
		if _, err := sharedPool(b).Exec(ctx, "ANALYZE"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		p, err := s.Prune(ctx, "acme", cut)
		if err != nil || p.Runs != n || p.Claims != 3*n {
			b.Fatalf("Prune = %+v, %v; want %d runs and %d claims", p, err, n, 3*n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/prune")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/n, "µs/run")
}

// BenchmarkTranscriptLoad10000 loads a conversation of 10,000 entries
// whole, in pages of 1,000 (storetest.TranscriptLoad): ten statements, each
// a range of the entries' primary key. It reports ms/load and entries/s.
func BenchmarkTranscriptLoad10000(b *testing.B) {
	s, _ := newStore(b)
	storetest.TranscriptLoad(b, s)
}

// BenchmarkTurnWrite is one WriteTurn of a running turn appending one
// entry and renewing its lease (storetest.TurnWrite): one statement, one
// round trip and one commit. Compare with BenchmarkPostgresBareInsert. It
// reports µs/op.
func BenchmarkTurnWrite(b *testing.B) {
	s, _ := newStore(b)
	storetest.TurnWrite(b, s)
}

// Chore is what a plan-shape benchmark's tool takes.
type Chore struct {
	N int `json:"n"`
}

// BenchmarkPostgresPlanShapes runs, in one benchmark, 20-step plans of two
// shapes through the executor on Postgres: a chain (each step after the one
// before) and a 20-wide plan (every step at once). Steps of a wide plan
// commit at once, so one of its steps should cost well under one of a
// chain's: wide/chain reports the ratio of their costs per step.
func BenchmarkPostgresPlanShapes(b *testing.B) {
	s, _ := newStore(b)
	chore := planexec.MustTool("chore", "Do a chore.", func(_ context.Context, c Chore) (int, error) { return c.N, nil })
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{chore}, Store: s})
	if err != nil {
		b.Fatal(err)
	}
	const n = 20
	shape := func(chain bool) planexec.Plan {
		var p planexec.Plan
		for i := range n {
			st := planexec.Step{ID: fmt.Sprintf("s%02d", i), Tool: "chore", Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
			if chain && i > 0 {
				st.DependsOn = []string{fmt.Sprintf("s%02d", i-1)}
			}
			p.Steps = append(p.Steps, st)
		}
		return p
	}
	chain, wide := shape(true), shape(false)
	var took [2]time.Duration
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		for k, p := range []planexec.Plan{chain, wide} {
			run, err := ex.Run(planexec.Delegation{RunID: fmt.Sprintf("shape-%d-%d", i, k), Tenant: "acme"})
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if res, err := run.Execute(ctx, p); err != nil || !res.Complete {
				b.Fatalf("Execute: %+v, %v", res, err)
			}
			took[k] += time.Since(start)
		}
	}
	perStep := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*n) }
	b.ReportMetric(perStep(took[0]), "chain-µs/step")
	b.ReportMetric(perStep(took[1]), "wide-µs/step")
	b.ReportMetric(perStep(took[1])/perStep(took[0]), "wide/chain")
}
