package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/storetest"
)

// Two replicas on one schema keep conversations as one: turns and appends
// racing on both are exclusive, and every entry is numbered once.
func TestTurnsAndAppendsOnTwoReplicasAreExclusive(t *testing.T) {
	clk := storetest.NewClock()
	s1, schema := newStore(t, postgres.WithClock(clk.Now))
	s2 := replicaStore(t, schema, 8, postgres.WithClock(clk.Now))
	storetest.TranscriptsAcrossHandles(t, s1, s2, clk)
}

// The store keeps a session's times and its entries' to the microsecond,
// finer than the millisecond the conformance suite asks.
func TestASessionAndItsTranscriptKeepTimesToTheMicrosecond(t *testing.T) {
	clk := storetest.NewClock()
	clk.Advance(-789 * time.Nanosecond) // to a whole microsecond, which the database keeps exactly
	s, _ := newStore(t, postgres.WithClock(clk.Now))
	storetest.TranscriptTimesExact(t, s, clk)
}

// A turn's write or a transcript's read that fails (here on a cancelled
// context) is a postgres *store.Error naming the operation and wrapping
// the cause.
func TestAFailedTurnWriteOrTranscriptReadIsAStoreErrorNamingIt(t *testing.T) {
	s, _ := newStore(t)
	if err := s.CreateSession(t.Context(), store.SessionRecord{Tenant: "acme", ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.WriteTurn(cancelled, &store.TurnWrite{Tenant: "acme", Session: "c1", Now: time.Now()})
	wantOpError(t, err, "write turn", context.Canceled)
	_, err = s.Transcript(cancelled, "acme", "c1", 0, 5)
	wantOpError(t, err, "transcript", context.Canceled)
}

// wantOpError fails unless err is a postgres *store.Error for op that wraps
// target.
func wantOpError(t *testing.T, err error, op string, target error) {
	t.Helper()
	var se *store.Error
	if !errors.As(err, &se) || se.Store != "postgres" || se.Op != op || !errors.Is(err, target) {
		t.Fatalf("err = %v (%T), want a postgres *store.Error for %q wrapping %v", err, err, op, target)
	}
}
