package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/sqlite"
	"github.com/planexec/planexec/storetest"
)

// entryDocs are n transcript entries as package chat might write them,
// with spacing, escapes and characters a store must keep byte for byte.
func entryDocs(prefix string, n int) []json.RawMessage {
	out := make([]json.RawMessage, n)
	for i := range out {
		out[i] = json.RawMessage(fmt.Sprintf(`{"role": "assistant", "id":"%s-%d","text":"nul \u0000 \u2028 😀 <b>&</b>","n":%d.50}`, prefix, i, i))
	}
	return out
}

// wantEntries fails unless the session's whole transcript is want, numbered
// from 1, each entry byte for byte, stored at at.
func wantEntries(t *testing.T, s store.TranscriptStore, tenant, session string, want []json.RawMessage, at time.Time) {
	t.Helper()
	got, err := s.Transcript(context.Background(), tenant, session, 0, 1<<20)
	if err != nil {
		t.Fatalf("Transcript of %s/%s: %v", tenant, session, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s/%s has %d entries, want %d", tenant, session, len(got), len(want))
	}
	for i, e := range got {
		if e.Seq != int64(i+1) || string(e.Entry) != string(want[i]) || !e.At.Equal(at) {
			t.Errorf("entry %d = %d %s at %v, want %d %s at %v", i, e.Seq, e.Entry, e.At, i+1, want[i], at)
		}
	}
}

func TestTranscripts(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock()
	s, _ := openNew(t, sqlite.WithClock(clk.Now))
	var ts store.TranscriptStore = s
	const doc = `{"model": "m1",  "summary":"nul \u0000 😀","meter":{"in":12}}`

	if _, err := ts.Session(ctx, "acme", "c1"); !errors.Is(err, store.ErrNoRecord) {
		t.Fatalf("Session of none: %v, want ErrNoRecord", err)
	}
	if err := ts.CreateSession(ctx, store.SessionRecord{Tenant: "acme", ID: "c1", Doc: json.RawMessage(doc)}); err != nil {
		t.Fatal(err)
	}
	if err := ts.CreateSession(ctx, store.SessionRecord{Tenant: "acme", ID: "c1", Doc: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateSession again: %v, want ErrExists", err)
	}
	start := clk.Now()
	rec, err := ts.Session(ctx, "acme", "c1")
	if err != nil || string(rec.Doc) != doc || rec.Seq != 0 || rec.Turn != (store.TurnState{}) || !rec.Created.Equal(start) || !rec.Updated.Equal(start) {
		t.Fatalf("Session = %+v, %v", rec, err)
	}
	for _, tenant := range []string{"other", ""} {
		if _, err := ts.Session(ctx, tenant, "c1"); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("Session of tenant %q: %v, want ErrNoRecord", tenant, err)
		}
	}

	// The first turn: epoch 1, its entries numbered from 1.
	clk.Advance(time.Second)
	at1 := clk.Now()
	lease := time.Minute
	e1 := entryDocs("t1", 3)
	res, err := ts.TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 0, Holder: "h1", Until: at1.Add(lease), Now: at1, Entries: e1})
	if err != nil || res != (store.TurnResult{Epoch: 1, Seq: 3}) {
		t.Fatalf("TakeTurn = %+v, %v", res, err)
	}
	rec, err = ts.Session(ctx, "acme", "c1")
	if err != nil || rec.Turn.Epoch != 1 || rec.Turn.Holder != "h1" || !rec.Turn.Until.Equal(at1.Add(lease)) || rec.Turn.Cancel || rec.Seq != 3 ||
		string(rec.Doc) != doc || !rec.Updated.Equal(at1) || !rec.Created.Equal(start) {
		t.Fatalf("Session after TakeTurn = %+v, %v", rec, err)
	}
	wantEntries(t, ts, "acme", "c1", e1, at1)

	// Held: neither a stale epoch nor the current one takes it, and
	// nothing is written.
	for _, epoch := range []int64{0, 1} {
		_, err := ts.TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: epoch, Holder: "h2", Until: at1.Add(2 * lease),
			Now: at1.Add(lease - time.Microsecond), Entries: entryDocs("x", 1), Doc: json.RawMessage(`{"x":1}`)})
		if !errors.Is(err, store.ErrTurnHeld) {
			t.Errorf("TakeTurn of a held lease from epoch %d: %v, want ErrTurnHeld", epoch, err)
		}
	}
	if _, err := ts.TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "none", Holder: "h2", Now: at1}); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("TakeTurn of no session: %v, want ErrNoRecord", err)
	}
	wantEntries(t, ts, "acme", "c1", e1, at1)

	// The turn writes: entries on from 3, the document replaced, the lease
	// renewed; a nil document is kept.
	clk.Advance(time.Second)
	at2 := clk.Now()
	e2 := entryDocs("t1b", 2)
	res, err = ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 1, Holder: "h1", Until: at2.Add(lease), Now: at2,
		Entries: e2, Doc: json.RawMessage(`{"v": 2}`)})
	if err != nil || res != (store.TurnResult{Epoch: 1, Seq: 5}) {
		t.Fatalf("WriteTurn = %+v, %v", res, err)
	}
	if res, err = ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 1, Holder: "h1", Until: at2.Add(lease), Now: at2}); err != nil ||
		res != (store.TurnResult{Epoch: 1, Seq: 5}) {
		t.Fatalf("WriteTurn of nothing = %+v, %v", res, err)
	}
	rec, _ = ts.Session(ctx, "acme", "c1")
	if string(rec.Doc) != `{"v": 2}` || rec.Seq != 5 || !rec.Turn.Until.Equal(at2.Add(lease)) {
		t.Fatalf("Session after WriteTurn = %+v", rec)
	}

	// Cancel: the running turn learns of it with its next write.
	if held, err := ts.CancelTurn(ctx, "acme", "c1", at2); err != nil || !held {
		t.Fatalf("CancelTurn = %v, %v", held, err)
	}
	if _, err := ts.CancelTurn(ctx, "acme", "none", at2); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("CancelTurn of no session: %v, want ErrNoRecord", err)
	}
	res, err = ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 1, Holder: "h1", Until: at2.Add(lease), Now: at2, Entries: entryDocs("t1c", 1)})
	if err != nil || res != (store.TurnResult{Epoch: 1, Seq: 6, Cancel: true}) {
		t.Fatalf("WriteTurn after a cancel = %+v, %v", res, err)
	}

	// The lease runs out: another takes the turn over, with the cancel
	// flag clear, and the old turn is fenced.
	clk.Advance(lease)
	at3 := clk.Now()
	res, err = ts.TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 1, Holder: "h2", Until: at3.Add(lease), Now: at3})
	if err != nil || res != (store.TurnResult{Epoch: 2, Seq: 6}) {
		t.Fatalf("TakeTurn of a lease that ran out = %+v, %v", res, err)
	}
	if _, err := ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 1, Holder: "h1", Until: at3.Add(lease), Now: at3,
		Entries: entryDocs("late", 1), Doc: json.RawMessage(`{"late":1}`)}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("WriteTurn of the old turn: %v, want ErrFenced", err)
	}
	if _, err := ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "none", Epoch: 1, Holder: "h1", Now: at3}); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("WriteTurn of no session: %v, want ErrNoRecord", err)
	}
	rec, _ = ts.Session(ctx, "acme", "c1")
	if string(rec.Doc) != `{"v": 2}` || rec.Seq != 6 || rec.Turn.Epoch != 2 || rec.Turn.Holder != "h2" || rec.Turn.Cancel {
		t.Fatalf("Session after the take-over = %+v", rec)
	}

	// Outside any turn: appended on, the lease untouched.
	clk.Advance(time.Second)
	at4 := clk.Now()
	if last, err := ts.AppendEntries(ctx, "acme", "c1", entryDocs("person", 2)); err != nil || last != 8 {
		t.Fatalf("AppendEntries = %d, %v", last, err)
	}
	if last, err := ts.AppendEntries(ctx, "acme", "c1", nil); err != nil || last != 8 {
		t.Fatalf("AppendEntries of none = %d, %v", last, err)
	}
	if _, err := ts.AppendEntries(ctx, "acme", "none", entryDocs("x", 1)); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("AppendEntries to no session: %v, want ErrNoRecord", err)
	}
	rec, _ = ts.Session(ctx, "acme", "c1")
	if rec.Seq != 8 || rec.Turn.Epoch != 2 || rec.Turn.Holder != "h2" || !rec.Turn.Until.Equal(at3.Add(lease)) || !rec.Updated.Equal(at4) {
		t.Fatalf("Session after AppendEntries = %+v", rec)
	}

	// The turn ends: the lease is free at once, and the turn fenced.
	res, err = ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 2, Holder: "h2", Now: at4, Entries: entryDocs("end", 1), End: true})
	if err != nil || res != (store.TurnResult{Epoch: 2, Seq: 9}) {
		t.Fatalf("WriteTurn with End = %+v, %v", res, err)
	}
	rec, _ = ts.Session(ctx, "acme", "c1")
	if rec.Turn != (store.TurnState{Epoch: 2}) || rec.Seq != 9 {
		t.Fatalf("Session after the end = %+v", rec)
	}
	if _, err := ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 2, Holder: "h2", Now: at4}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("WriteTurn after the end: %v, want ErrFenced", err)
	}
	if held, err := ts.CancelTurn(ctx, "acme", "c1", at4); err != nil || held {
		t.Fatalf("CancelTurn with no turn = %v, %v", held, err)
	}

	// A repair: taken and released in one write.
	res, err = ts.TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 2, Holder: "repair", Until: at4.Add(lease), Now: at4,
		Entries: entryDocs("repair", 1), End: true})
	if err != nil || res != (store.TurnResult{Epoch: 3, Seq: 10}) {
		t.Fatalf("TakeTurn with End = %+v, %v", res, err)
	}
	if rec, _ = ts.Session(ctx, "acme", "c1"); rec.Turn != (store.TurnState{Epoch: 3}) {
		t.Fatalf("Session after the repair = %+v", rec)
	}

	// Pages by number.
	all, err := ts.Transcript(ctx, "acme", "c1", 0, 100)
	if err != nil || len(all) != 10 {
		t.Fatalf("Transcript = %d entries, %v", len(all), err)
	}
	for after := int64(0); after <= 10; after += 3 {
		page, err := ts.Transcript(ctx, "acme", "c1", after, 3)
		want := all[after:min(after+3, 10)]
		if err != nil || len(page) != len(want) {
			t.Fatalf("Transcript after %d = %d entries, %v; want %d", after, len(page), err, len(want))
		}
		for i := range page {
			if page[i].Seq != want[i].Seq || string(page[i].Entry) != string(want[i].Entry) || !page[i].At.Equal(want[i].At) {
				t.Errorf("entry %d after %d = %+v, want %+v", i, after, page[i], want[i])
			}
		}
	}
	if page, err := ts.Transcript(ctx, "acme", "c1", 10, 5); err != nil || len(page) != 0 {
		t.Errorf("Transcript after the last = %v, %v; want none", page, err)
	}
	if page, err := ts.Transcript(ctx, "acme", "c1", 0, 0); err != nil || len(page) != 0 {
		t.Errorf("Transcript of no entries = %v, %v; want none", page, err)
	}
	for _, limit := range []int{0, 5} {
		if _, err := ts.Transcript(ctx, "other", "c1", 0, limit); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("Transcript of another tenant's session (limit %d): %v, want ErrNoRecord", limit, err)
		}
	}
	if !all[5].At.Equal(at2) || !all[7].At.Equal(at4) {
		t.Errorf("entries stored at %v and %v, want %v and %v", all[5].At, all[7].At, at2, at4)
	}

	// A write that fails is a store error naming the operation.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = ts.WriteTurn(cancelled, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 3, Now: at4})
	wantStoreError(t, err, "write turn", context.Canceled)
	_, err = ts.Transcript(cancelled, "acme", "c1", 0, 5)
	wantStoreError(t, err, "transcript", context.Canceled)
}

// Turns taken at once on one epoch, from several Stores on one file: one
// takes it. Writers appending at once, inside and outside the turn,
// number every entry once, with no gap.
func TestTranscriptWritersAtOnce(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock()
	s1, path := openNew(t, sqlite.WithClock(clk.Now))
	s2 := openAt(t, path, sqlite.WithClock(clk.Now))
	stores := []*sqlite.Store{s1, s2}
	if err := s1.CreateSession(ctx, store.SessionRecord{Tenant: "acme", ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
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
			_, err := stores[i%2].TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Holder: holder, Until: now.Add(time.Minute), Now: now,
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
					_, err = stores[i%2].WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: 1, Until: now.Add(time.Minute), Now: now,
						Entries: entryDocs(fmt.Sprint("w", i, "-", j), 1)})
				} else {
					_, err = stores[i%2].AppendEntries(ctx, "acme", "c1", entryDocs(fmt.Sprint("a", i, "-", j), 2))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := s2.Transcript(ctx, "acme", "c1", 0, 1<<20)
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
	if rec, err := s1.Session(ctx, "acme", "c1"); err != nil || rec.Seq != int64(want) {
		t.Fatalf("Session = %+v, %v; want seq %d", rec, err, want)
	}
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

// Workers on two Stores take turns on one session over and over, each
// turn writing and then ending: never do two hold it at once, each epoch
// is taken once, and every entry is numbered once, with no gap.
func TestTurnsTakenInRaceAreExclusive(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock()
	s1, path := openNew(t, sqlite.WithClock(clk.Now))
	s2 := openAt(t, path, sqlite.WithClock(clk.Now))
	raceTurns(t, ctx, []store.TranscriptStore{s1, s2}, clk.Now)
}

func raceTurns(t *testing.T, ctx context.Context, stores []store.TranscriptStore, now func() time.Time) {
	if err := stores[0].CreateSession(ctx, store.SessionRecord{Tenant: "acme", ID: "c1"}); err != nil {
		t.Fatal(err)
	}
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
				rec, err := ts.Session(ctx, "acme", "c1")
				if err != nil {
					t.Error(err)
					return
				}
				at := now()
				if rec.Turn.Held(at) {
					time.Sleep(time.Millisecond)
					continue
				}
				res, err := ts.TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: rec.Turn.Epoch, Holder: holder,
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
				if _, err := ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: res.Epoch, Holder: holder,
					Until: at.Add(time.Hour), Now: at, Entries: entryDocs(holder+"-write", 1)}); err != nil {
					t.Error(err)
				}
				holding.Add(-1)
				if _, err := ts.WriteTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: res.Epoch, Holder: holder, Now: at, End: true}); err != nil {
					t.Error(err)
				}
				done++
			}
		})
	}
	wg.Wait()
	rec, err := stores[1].Session(ctx, "acme", "c1")
	if err != nil || rec.Turn.Epoch != turns.Load() || rec.Turn.Epoch != workers*turnsEach || rec.Seq != 2*rec.Turn.Epoch || rec.Turn.Holder != "" {
		t.Fatalf("Session = %+v, %v; want epoch %d after %d turns, and two entries each", rec, err, workers*turnsEach, turns.Load())
	}
	got, err := stores[0].Transcript(ctx, "acme", "c1", 0, 1<<20)
	if err != nil || int64(len(got)) != rec.Seq {
		t.Fatalf("Transcript = %d entries, %v; want %d", len(got), err, rec.Seq)
	}
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d is numbered %d", i, e.Seq)
		}
	}
}

// Writers on two Stores append after the last entry they read, over and
// over, reading again when another came between: no two appends are made
// after one number, each writer's append lands right after the entry it
// read, and the store's refusal is store.ErrMoved itself.
func TestTranscriptAppendsAfterOneNumberAreExclusive(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock()
	s1, path := openNew(t, sqlite.WithClock(clk.Now))
	s2 := openAt(t, path, sqlite.WithClock(clk.Now))
	raceAppendsAfter(t, ctx, []store.TranscriptStore{s1, s2})
}

func raceAppendsAfter(t *testing.T, ctx context.Context, stores []store.TranscriptStore) {
	if err := stores[0].CreateSession(ctx, store.SessionRecord{Tenant: "acme", ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 6, 10
	var (
		wg    sync.WaitGroup
		after sync.Map // the number appended after → the writer
	)
	for i := range workers {
		wg.Go(func() {
			ts, writer := stores[i%len(stores)], fmt.Sprint("w", i)
			for done := 0; done < each; {
				rec, err := ts.Session(ctx, "acme", "c1")
				if err != nil {
					t.Error(err)
					return
				}
				last, err := ts.AppendEntriesAfter(ctx, "acme", "c1", rec.Seq, entryDocs(fmt.Sprint(writer, ".", done), 1))
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
	got, err := stores[1].Transcript(ctx, "acme", "c1", 0, 1<<20)
	if err != nil || len(got) != workers*each {
		t.Fatalf("Transcript = %d entries, %v; want %d", len(got), err, workers*each)
	}
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d is numbered %d", i, e.Seq)
		}
	}
}
