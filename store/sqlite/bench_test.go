package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/sqlite"
	"github.com/planexec/planexec/storetest"
)

func reportMicros(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "µs/op")
}

// BenchmarkSQLiteStep is the store's cost of one executed step when the
// executor's plans and claims are one Store: a claim, then the claim's
// completion and the step's record in one transaction.
func BenchmarkSQLiteStep(b *testing.B) {
	ctx := context.Background()
	s, _ := openNew(b)
	saveSample(b, s, "acme", "run-1", "p1")
	outcome := json.RawMessage(`{"pnr":"X1"}`)
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
		if err := s.CompleteStep(ctx, key, c.Epoch, outcome, "run-1", rec); err != nil {
			b.Fatal(err)
		}
	}
	reportMicros(b)
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
	reportMicros(b)
}

// BenchmarkSQLiteConcurrentRuns runs 1,000 five-step runs at once on one
// executor over a fresh file (synchronous=FULL, the default, and NORMAL).
func BenchmarkSQLiteConcurrentRuns(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []sqlite.Option
	}{{"full sync", nil}, {"relaxed sync", []sqlite.Option{sqlite.WithRelaxedSync()}}} {
		b.Run(c.name, func(b *testing.B) {
			storetest.ConcurrentRuns(b, 1000, func(b *testing.B) planexec.PlanStore {
				s, _ := openNew(b, c.opts...)
				return s
			})
		})
	}
}
