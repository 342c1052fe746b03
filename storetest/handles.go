package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planexec/planexec/store"
)

// TranscriptsAcrossHandles checks that two handles on one backing (two
// stores on one file, two replicas on one database) keep conversations as
// one store would, when writers race on both: of turns taken at once on one
// epoch one wins; turns taken over and over never overlap and take each
// epoch once; appends after one number are exclusive; and every entry is
// numbered once, 1 to n. Both handles must run on clock. Each subtest
// writes a session of its own, of tenant "acme", so a and b may be shared
// with other tests.
func TranscriptsAcrossHandles(t *testing.T, a, b store.TranscriptStore, clock *Clock) {
	handles := []store.TranscriptStore{a, b}
	t.Run("Of turns taken at once on one epoch from both handles one takes it, and writers on both at once, in the turn and out of it, number every entry once", func(t *testing.T) {
		writersAtOnce(t, handles, newSession(t, a, "at-once"), clock)
	})
	t.Run("Workers on both handles taking turn after turn never hold the lease two at once, take each epoch once and number every entry once", func(t *testing.T) {
		raceTurns(t, handles, newSession(t, a, "turns"), clock)
	})
	t.Run("Writers on both handles appending after the entry they read never append twice after one number, and are refused with store.ErrMoved itself", func(t *testing.T) {
		raceAppendsAfter(t, handles, newSession(t, a, "appends"))
	})
}

// newSession creates session id of tenant "acme" on ts, with no document,
// and returns id.
func newSession(t *testing.T, ts store.TranscriptStore, id string) string {
	t.Helper()
	if err := ts.CreateSession(t.Context(), store.SessionRecord{Tenant: "acme", ID: id}); err != nil {
		t.Fatalf("CreateSession %s: %v", id, err)
	}
	return id
}

// writersAtOnce races takers of session's first turn on both handles,
// then writers on both: the turn's writes on one, AppendEntries on the
// other.
func writersAtOnce(t *testing.T, stores []store.TranscriptStore, session string, clock *Clock) {
	ctx := t.Context()
	now := clock.Now()
	const takers = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  []string
		errs []error
	)
	for i := range takers {
		wg.Go(func() {
			holder := fmt.Sprint("h", i)
			_, err := stores[i%2].TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: session, Holder: holder, Until: now.Add(time.Minute), Now: now,
				Entries: entryDocs(holder, 1)})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won = append(won, holder)
			} else if !errors.Is(err, store.ErrTurnHeld) {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(won) != 1 || len(errs) != 0 {
		t.Fatalf("%d took the turn (%v), other errors %v; want one", len(won), won, errs)
	}

	const writers, each = 8, 20
	for i := range writers {
		wg.Go(func() {
			for j := range each {
				var err error
				if i%2 == 0 {
					_, err = stores[i%2].WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: session, Epoch: 1, Until: now.Add(time.Minute), Now: now,
						Entries: entryDocs(fmt.Sprint("w", i, "-", j), 1)})
				} else {
					_, err = stores[i%2].AppendEntries(ctx, "acme", session, entryDocs(fmt.Sprint("a", i, "-", j), 2))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := stores[1].Transcript(ctx, "acme", session, 0, 1<<20)
	want := 1 + writers/2*each + writers/2*each*2
	if err != nil || len(got) != want {
		t.Fatalf("Transcript = %d entries, %v; want %d", len(got), err, want)
	}
	seen := map[string]bool{}
	for i, e := range got {
		if e.Seq != int64(i+1) || seen[string(e.Entry)] {
			t.Fatalf("entry %d is numbered %d (or repeated): %s", i, e.Seq, e.Entry)
		}
		seen[string(e.Entry)] = true
	}
	if rec, err := stores[0].Session(ctx, "acme", session); err != nil || rec.Seq != int64(want) {
		t.Fatalf("Session = %+v, %v; want seq %d", rec, err, want)
	}
}

// raceTurns has workers on both handles take turns on session over and
// over, each turn writing and then ending.
func raceTurns(t *testing.T, stores []store.TranscriptStore, session string, clock *Clock) {
	ctx := t.Context()
	const workers, turnsEach = 6, 4
	var (
		wg      sync.WaitGroup
		holding atomic.Int32
		taken   sync.Map // epoch → holder
		turns   atomic.Int64
	)
	for i := range workers {
		wg.Go(func() {
			ts, holder := stores[i%len(stores)], fmt.Sprint("w", i)
			for done := 0; done < turnsEach; {
				rec, err := ts.Session(ctx, "acme", session)
				if err != nil {
					t.Error(err)
					return
				}
				at := clock.Now()
				if rec.Turn.Held(at) {
					time.Sleep(time.Millisecond)
					continue
				}
				res, err := ts.TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: session, Epoch: rec.Turn.Epoch, Holder: holder,
					Until: at.Add(time.Hour), Now: at, Entries: entryDocs(holder+"-take", 1)})
				if errors.Is(err, store.ErrTurnHeld) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if n := holding.Add(1); n != 1 {
					t.Errorf("%d turns held at once", n)
				}
				if other, dup := taken.LoadOrStore(res.Epoch, holder); dup {
					t.Errorf("epoch %d taken by %s and %s", res.Epoch, other, holder)
				}
				turns.Add(1)
				if _, err := ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: session, Epoch: res.Epoch, Holder: holder,
					Until: at.Add(time.Hour), Now: at, Entries: entryDocs(holder+"-write", 1)}); err != nil {
					t.Error(err)
				}
				holding.Add(-1)
				if _, err := ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: session, Epoch: res.Epoch, Holder: holder, Now: at, End: true}); err != nil {
					t.Error(err)
				}
				done++
			}
		})
	}
	wg.Wait()
	rec, err := stores[1].Session(ctx, "acme", session)
	if err != nil || rec.Turn.Epoch != turns.Load() || rec.Turn.Epoch != workers*turnsEach || rec.Seq != 2*rec.Turn.Epoch || rec.Turn.Holder != "" {
		t.Fatalf("Session = %+v, %v; want epoch %d after %d turns, and two entries each", rec, err, workers*turnsEach, turns.Load())
	}
	got, err := stores[0].Transcript(ctx, "acme", session, 0, 1<<20)
	if err != nil || int64(len(got)) != rec.Seq {
		t.Fatalf("Transcript = %d entries, %v; want %d", len(got), err, rec.Seq)
	}
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d is numbered %d", i, e.Seq)
		}
	}
}

// raceAppendsAfter has writers on both handles append after the last entry
// they read, over and over, reading again when another came between.
func raceAppendsAfter(t *testing.T, stores []store.TranscriptStore, session string) {
	ctx := t.Context()
	const workers, each = 6, 10
	var (
		wg    sync.WaitGroup
		after sync.Map // the number appended after → the writer
	)
	for i := range workers {
		wg.Go(func() {
			ts, writer := stores[i%len(stores)], fmt.Sprint("w", i)
			for done := 0; done < each; {
				rec, err := ts.Session(ctx, "acme", session)
				if err != nil {
					t.Error(err)
					return
				}
				last, err := ts.AppendEntriesAfter(ctx, "acme", session, rec.Seq, entryDocs(fmt.Sprint(writer, ".", done), 1))
				if err == store.ErrMoved { // the sentinel as it is, not wrapped
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if last != rec.Seq+1 {
					t.Errorf("%s appended after %d and got %d", writer, rec.Seq, last)
				}
				if other, dup := after.LoadOrStore(rec.Seq, writer); dup {
					t.Errorf("%s and %s both appended after %d", other, writer, rec.Seq)
				}
				done++
			}
		})
	}
	wg.Wait()
	got, err := stores[1].Transcript(ctx, "acme", session, 0, 1<<20)
	if err != nil || len(got) != workers*each {
		t.Fatalf("Transcript = %d entries, %v; want %d", len(got), err, workers*each)
	}
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d is numbered %d", i, e.Seq)
		}
	}
}
