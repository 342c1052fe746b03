package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/planexec/planexec/store"
)

// TranscriptTimesExact checks that ts keeps a session's times exactly as
// clock gives them, finer than the millisecond [Run] asks of every store:
// its creation and its last write (a turn's, an AppendEntries), the end of
// its turn's lease, and its entries'; and that a lease is held until its
// very end, a microsecond before it another turn being ErrTurnHeld. ts must
// run on clock, which must stand at an instant the store keeps exactly (a
// store keeping microseconds is given [NewClock] moved back to a whole
// microsecond). It writes session "times" of tenant "acme".
func TranscriptTimesExact(t *testing.T, ts store.TranscriptStore, clock *Clock) {
	t.Helper()
	ctx := t.Context()
	const tenant, id = "acme", "times"
	created := clock.Now()
	if err := ts.CreateSession(ctx, store.SessionRecord{Tenant: tenant, ID: id, Doc: sessionDoc("times")}); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if rec, err := ts.Session(ctx, tenant, id); err != nil || !rec.Created.Equal(created) || !rec.Updated.Equal(created) {
		t.Errorf("Session = %s, %v; want created and updated %v, exactly", showSession(rec), err, created)
	}
	var seq int64 // the last entry checked
	// expect fails unless the write just made, what, updated the session at
	// at and left its lease until until, and stored its entries at at.
	expect := func(what string, at, until time.Time) {
		t.Helper()
		rec, err := ts.Session(ctx, tenant, id)
		if err != nil || !rec.Created.Equal(created) || !rec.Updated.Equal(at) || !rec.Turn.Until.Equal(until) {
			t.Errorf("after %s the session is %s, %v; want created %v, updated %v, its lease until %v, exactly", what, showSession(rec), err, created, at, until)
		}
		entries, err := ts.Transcript(ctx, tenant, id, seq, 100)
		if err != nil || len(entries) == 0 {
			t.Fatalf("Transcript after %d, after %s = %d entries, %v; want its entries", seq, what, len(entries), err)
		}
		for _, e := range entries {
			if !e.At.Equal(at) {
				t.Errorf("entry %d, of %s, stored at %v, want %v exactly", e.Seq, what, e.At, at)
			}
		}
		seq = entries[len(entries)-1].Seq
	}

	clock.Advance(time.Second)
	at := clock.Now()
	until := at.Add(lease)
	if _, err := ts.TakeTurn(ctx, &store.TurnWrite{Tenant: tenant, Session: id, Holder: "turn-a", Now: at, Until: until, Entries: entryDocs("take", 2)}); err != nil {
		t.Fatalf("TakeTurn: %v", err)
	}
	expect("TakeTurn", at, until)
	early := &store.TurnWrite{Tenant: tenant, Session: id, Epoch: 1, Holder: "turn-b", Now: until.Add(-time.Microsecond), Until: until.Add(lease)}
	if _, err := ts.TakeTurn(ctx, early); !errors.Is(err, store.ErrTurnHeld) {
		t.Errorf("TakeTurn a microsecond before the lease ends: %v, want ErrTurnHeld", err)
	}

	clock.Advance(time.Second)
	at = clock.Now()
	until = at.Add(lease)
	if _, err := ts.WriteTurn(ctx, &store.TurnWrite{Tenant: tenant, Session: id, Epoch: 1, Holder: "turn-a", Now: at, Until: until, Entries: entryDocs("write", 1)}); err != nil {
		t.Fatalf("WriteTurn: %v", err)
	}
	expect("WriteTurn", at, until)

	clock.Advance(time.Second)
	at = clock.Now()
	if _, err := ts.AppendEntries(ctx, tenant, id, entryDocs("append", 2)); err != nil {
		t.Fatalf("AppendEntries: %v", err)
	}
	expect("AppendEntries", at, until)
}
