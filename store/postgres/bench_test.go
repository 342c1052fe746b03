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

// What the store costs per executed step: the claim, then the outcome and
// the step's record in one statement. Compare with BenchmarkPostgresBareInsert,
// the floor of one durable write to this database.
func BenchmarkPostgresStep(b *testing.B) {
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
		rec := store.StepRecord{StepID: id, PlanID: "p1", Tool: "book_flight", Status: planexec.StepDone, Outcome: outcome, Key: key.Digest, Finished: time.Now()}
		if err := s.CompleteStep(ctx, key, c.Epoch, outcome, "bench", rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
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
