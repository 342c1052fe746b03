package postgres_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	storetest.ConcurrentRuns(b, 1000, func(b *testing.B) planexec.PlanStore {
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
