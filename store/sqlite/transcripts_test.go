package sqlite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/sqlite"
	"github.com/planexec/planexec/storetest"
)

// Two Stores on one file keep conversations as one: turns and appends
// racing on both are exclusive, and every entry is numbered once.
func TestTurnsAndAppendsOnTwoStoresOverOneFileAreExclusive(t *testing.T) {
	clk := storetest.NewClock()
	s1, path := openNew(t, sqlite.WithClock(clk.Now))
	s2 := openAt(t, path, sqlite.WithClock(clk.Now))
	storetest.TranscriptsAcrossHandles(t, s1, s2, clk)
}

// The store keeps a session's times and its entries' to the nanosecond,
// finer than the millisecond the conformance suite asks.
func TestASessionAndItsTranscriptKeepTimesToTheNanosecond(t *testing.T) {
	clk := storetest.NewClock()
	s, _ := openNew(t, sqlite.WithClock(clk.Now))
	storetest.TranscriptTimesExact(t, s, clk)
}

// A turn's write or a transcript's read that fails (here on a cancelled
// context) is a sqlite *store.Error naming the operation and wrapping the
// cause.
func TestAFailedTurnWriteOrTranscriptReadIsAStoreErrorNamingIt(t *testing.T) {
	s, _ := openNew(t)
	if err := s.CreateSession(t.Context(), store.SessionRecord{Tenant: "acme", ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.WriteTurn(cancelled, &store.TurnWrite{Tenant: "acme", Session: "c1", Now: time.Now()})
	wantStoreError(t, err, "write turn", context.Canceled)
	_, err = s.Transcript(cancelled, "acme", "c1", 0, 5)
	wantStoreError(t, err, "transcript", context.Canceled)
}

// The statements that read a transcript and a session are searches of the
// tables' primary keys.
func TestTranscriptQueriesSearchThePrimaryKey(t *testing.T) {
	_, path := openNew(t)
	db := rawDB(t, path)
	for _, q := range sqlite.TranscriptQueries {
		plan := queryPlan(t, db, q.Query, q.Args...)
		joined := strings.Join(plan, "; ")
		if !strings.Contains(joined, "USING PRIMARY KEY") || strings.Contains(joined, "TEMP B-TREE") || strings.Contains(joined, "SCAN ") {
			t.Errorf("%s: the plan %q is not a search of the primary key", q.Name, plan)
		}
	}
}
