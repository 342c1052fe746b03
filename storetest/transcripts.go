package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec/store"
)

// transcripts returns the stores' TranscriptStore, if Plans keeps
// conversations.
func (k kit) transcripts() (store.TranscriptStore, bool) {
	ts, ok := k.Plans.(store.TranscriptStore)
	return ts, ok
}

// talk is what one Transcripts subtest works with: a kit and its
// TranscriptStore.
type talk struct {
	kit
	ts store.TranscriptStore
}

// setupTalk opens fresh stores for t, which keep conversations: runTranscripts
// skipped stores that do not.
func setupTalk(t *testing.T, open Open) talk {
	t.Helper()
	k := setup(t, open)
	ts, ok := k.transcripts()
	if !ok {
		t.Fatal("Plans is no longer a store.TranscriptStore")
	}
	return talk{kit: k, ts: ts}
}

// sessionDoc is a conversation's document as package chat may write it:
// spacing, escapes, text as encoding/json escapes it and as it is (markup
// and U+2028 unescaped), and a number a float64 would change, which a store
// keeps as written.
func sessionDoc(title string) json.RawMessage {
	text, _ := json.Marshal(title + " " + plannerText)
	return json.RawMessage(fmt.Sprintf("{\"title\":%s,\n  \"summary\" : \"\\u0000 \\/ %s\", \"meter\": {\"tokens\": 1200, \"cost\": 0.10000000000000000001}}", text, printableText))
}

// entryDocs are n transcript entries as package chat may write them:
// compact JSON whose strings hold what a planner may write, as
// encoding/json escapes it and as it is (markup and U+2028 unescaped), and
// whose spacing a store must keep. Each is named prefix-i, from 1.
func entryDocs(prefix string, n int) []json.RawMessage {
	text, _ := json.Marshal(plannerText)
	docs := make([]json.RawMessage, n)
	for i := range docs {
		docs[i] = json.RawMessage(fmt.Sprintf(`{"role":"assistant","n":%q,"text":%s,"shown":"%s","cost": 412.50}`, fmt.Sprintf("%s-%d", prefix, i+1), text, printableText))
	}
	return docs
}

// entryName is the name entryDocs gave an entry, cut at its last dash: the
// write it came from and its place in that write.
func entryName(t *testing.T, e store.TranscriptEntry) (write, index string) {
	t.Helper()
	var doc struct{ N string }
	if err := json.Unmarshal(e.Entry, &doc); err != nil {
		t.Fatalf("entry %d: %v", e.Seq, err)
	}
	cut := strings.LastIndex(doc.N, "-")
	if cut < 0 {
		t.Fatalf("entry %d is named %q, which no write of the test gave", e.Seq, doc.N)
	}
	return doc.N[:cut], doc.N[cut+1:]
}

// concat is the entries of each batch, one batch after another.
func concat(batches ...[]json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}

// create stores a new session and fails the test if it cannot.
func (c talk) create(t *testing.T, tenant, id string, doc json.RawMessage) {
	t.Helper()
	if err := c.ts.CreateSession(c.ctx, store.SessionRecord{Tenant: tenant, ID: id, Doc: doc}); err != nil {
		t.Fatalf("CreateSession %s/%s: %v", tenant, id, err)
	}
}

// session reads a session and fails the test if it cannot.
func (c talk) session(t *testing.T, tenant, id string) store.SessionRecord {
	t.Helper()
	rec, err := c.ts.Session(c.ctx, tenant, id)
	if err != nil {
		t.Fatalf("Session %s/%s: %v", tenant, id, err)
	}
	return rec
}

// transcript reads a session's whole transcript.
func (c talk) transcript(t *testing.T, tenant, id string) []store.TranscriptEntry {
	t.Helper()
	got, err := c.ts.Transcript(c.ctx, tenant, id, 0, 1<<20)
	if err != nil {
		t.Fatalf("Transcript of %s/%s: %v", tenant, id, err)
	}
	return got
}

// expectTranscript fails unless the session's transcript is want, numbered
// from 1, each entry byte for byte, and its last number is the session's.
func (c talk) expectTranscript(t *testing.T, tenant, id string, want []json.RawMessage) []store.TranscriptEntry {
	t.Helper()
	got := c.transcript(t, tenant, id)
	if len(got) != len(want) {
		t.Fatalf("%s/%s has %d entries, want %d", tenant, id, len(got), len(want))
	}
	for i, e := range got {
		if e.Seq != int64(i+1) || !bytes.Equal(e.Entry, want[i]) {
			t.Errorf("entry %d of %s/%s = %d %s, want %d %s", i, tenant, id, e.Seq, e.Entry, i+1, want[i])
		}
	}
	if rec := c.session(t, tenant, id); rec.Seq != int64(len(want)) {
		t.Errorf("%s/%s has Seq %d, want %d, its last entry's number", tenant, id, rec.Seq, len(want))
	}
	return got
}

// expectUnchanged fails unless the session reads as before and its
// transcript still ends at before's last entry: what was just refused wrote
// nothing.
func (c talk) expectUnchanged(t *testing.T, before store.SessionRecord, what string) {
	t.Helper()
	after := c.session(t, before.Tenant, before.ID)
	if !sameSession(after, before) {
		t.Errorf("after %s the session is %s, want it unchanged: %s", what, showSession(after), showSession(before))
	}
	if n := len(c.transcript(t, before.Tenant, before.ID)); n != int(before.Seq) {
		t.Errorf("after %s the transcript has %d entries, want %d", what, n, before.Seq)
	}
}

// expectTurn fails unless the session's lease is want.
func (c talk) expectTurn(t *testing.T, tenant, id string, want store.TurnState) {
	t.Helper()
	if got := c.session(t, tenant, id).Turn; !sameTurn(got, want) {
		t.Errorf("%s/%s has turn %+v, want %+v", tenant, id, got, want)
	}
}

// write is a turn's write to acme/s-1 at the store's clock, leased until a
// lease from now.
func (c talk) write(epoch int64, holder string, entries []json.RawMessage) *store.TurnWrite {
	now := c.clk.Now()
	return &store.TurnWrite{Tenant: "acme", Session: "s-1", Epoch: epoch, Holder: holder, Now: now, Until: now.Add(lease), Entries: entries}
}

// take takes the turn with w and fails the test unless it is taken at the
// epoch after w's.
func (c talk) take(t *testing.T, w *store.TurnWrite) store.TurnResult {
	t.Helper()
	res, err := c.ts.TakeTurn(c.ctx, w)
	if err != nil {
		t.Fatalf("TakeTurn by %s at epoch %d: %v", w.Holder, w.Epoch, err)
	}
	if res.Epoch != w.Epoch+1 || res.Cancel {
		t.Fatalf("TakeTurn by %s at epoch %d = %+v, want epoch %d, no cancel", w.Holder, w.Epoch, res, w.Epoch+1)
	}
	return res
}

// writeTurn makes w as a turn and fails the test if it cannot.
func (c talk) writeTurn(t *testing.T, w *store.TurnWrite) store.TurnResult {
	t.Helper()
	res, err := c.ts.WriteTurn(c.ctx, w)
	if err != nil {
		t.Fatalf("WriteTurn by %s at epoch %d: %v", w.Holder, w.Epoch, err)
	}
	if res.Epoch != w.Epoch {
		t.Errorf("WriteTurn by %s at epoch %d = %+v, want the turn's epoch", w.Holder, w.Epoch, res)
	}
	return res
}

// sameSession reports whether two reads of a session are alike: the same
// document byte for byte, lease and last number, and times to the
// millisecond.
func sameSession(a, b store.SessionRecord) bool {
	return a.Tenant == b.Tenant && a.ID == b.ID && bytes.Equal(a.Doc, b.Doc) &&
		sameTurn(a.Turn, b.Turn) && a.Seq == b.Seq && sameInstant(a.Created, b.Created) && sameInstant(a.Updated, b.Updated)
}

// sameTurn reports whether two leases are alike, Until to the millisecond.
func sameTurn(a, b store.TurnState) bool {
	return a.Epoch == b.Epoch && a.Holder == b.Holder && sameInstant(a.Until, b.Until) && a.Cancel == b.Cancel
}

func showSession(r store.SessionRecord) string {
	return fmt.Sprintf("{%s/%s seq %d turn %+v created %v updated %v doc %s}", r.Tenant, r.ID, r.Seq, r.Turn, r.Created, r.Updated, r.Doc)
}

// runTranscripts checks a store.TranscriptStore, when Plans is one
// (skipped otherwise), on the suite's clock:
//
//   - CreateSession stores the document byte for byte, with no entries and
//     no turn (whatever the record says), Created and Updated from the
//     store's clock; creating it again is ErrExists and leaves the first.
//   - A session never created, or another tenant's (the empty tenant's
//     too), is ErrNoRecord to Session, Transcript (even with limit 0),
//     TakeTurn, WriteTurn, CancelTurn, AppendEntries and
//     AppendEntriesAfter, and the same id in two tenants is two sessions.
//   - TakeTurn at the session's epoch with the lease free takes the next
//     epoch, holds the lease for its holder until its Until, and appends
//     its entries numbered on from the last, stamped with the store's
//     clock; a write's document replaces the session's, and a write
//     without one keeps it. A write (a turn's, an AppendEntries) sets the
//     session's Updated to the store's clock and keeps its Created.
//   - TakeTurn while the lease is held, or at an epoch not the session's
//     (even with the lease free), is ErrTurnHeld and writes nothing; a
//     lease ending at or before the writer's Now is free.
//   - After a take-over the old turn's WriteTurn is ErrFenced and writes
//     nothing; WriteTurn appends, renews the lease and reports the last
//     number; with End it releases the lease and clears the cancel flag,
//     and the turn's later writes are ErrFenced. TakeTurn with End writes
//     and leaves the lease free.
//   - CancelTurn flags a turn holding the lease, which WriteTurn reports
//     and Session shows, and a new turn starts with the flag clear; with no
//     turn holding the lease it reports false and changes nothing.
//   - AppendEntries appends with or without a turn, touching no lease, and
//     numbers on with the turns' writes without gap or repeat; of no
//     entries it reports the last number and writes nothing.
//   - AppendEntriesAfter appends as AppendEntries does while the session's
//     last entry is still the one given; once another write (a turn's, an
//     AppendEntries) appended since, or given a number the session never
//     reached, it is ErrMoved and writes nothing. With no entries it
//     reports the last number, or ErrMoved, and writes nothing.
//   - Transcript pages after a number, at most limit at a time, none past
//     the end and none with limit 0; what goes in and comes out are
//     copies.
//   - Of goroutines racing to take one epoch exactly one wins, the rest
//     ErrTurnHeld; of goroutines racing AppendEntriesAfter after one entry
//     exactly one appends, the rest ErrMoved; goroutines appending at once, in a turn and out of one,
//     number every entry once, 1 to n, each write's entries together.
//
// A cancelled context is not checked here: the suite asks that of no store
// capability.
func runTranscripts(t *testing.T, open Open) {
	if _, ok := setup(t, open).transcripts(); !ok {
		t.Skip("Plans keeps no conversations (store.TranscriptStore)")
	}

	t.Run("A created session comes back as written, with no entries and no turn, stamped by the store's clock", func(t *testing.T) {
		c := setupTalk(t, open)
		doc := sessionDoc("tea")
		c.create(t, "acme", "s-1", doc)
		c.clk.Advance(time.Second) // so that a time taken at the read is caught
		rec := c.session(t, "acme", "s-1")
		created := c.clk.Now().Add(-time.Second)
		if rec.Tenant != "acme" || rec.ID != "s-1" || !bytes.Equal(rec.Doc, doc) {
			t.Errorf("Session = %s, want acme/s-1 with the document byte for byte: %s", showSession(rec), doc)
		}
		if rec.Seq != 0 || !sameTurn(rec.Turn, store.TurnState{}) {
			t.Errorf("Session = %s, want Seq 0 and no turn", showSession(rec))
		}
		if !sameInstant(rec.Created, created) || !sameInstant(rec.Updated, created) {
			t.Errorf("Session created %v, updated %v; want both %v, the store's clock at CreateSession", rec.Created, rec.Updated, created)
		}
		if page, err := c.ts.Transcript(c.ctx, "acme", "s-1", 0, 10); err != nil || len(page) != 0 {
			t.Errorf("Transcript of a new session = %d entries, %v; want none, no error", len(page), err)
		}
	})

	t.Run("CreateSession stores no entries and no turn whatever the record it is given says", func(t *testing.T) {
		c := setupTalk(t, open)
		rec := store.SessionRecord{Tenant: "acme", ID: "s-1", Doc: sessionDoc("tea"), Seq: 7,
			Turn: store.TurnState{Epoch: 3, Holder: "ghost", Until: c.clk.Now().Add(time.Hour), Cancel: true}}
		if err := c.ts.CreateSession(c.ctx, rec); err != nil {
			t.Fatalf("CreateSession: %v", err)
		}
		if got := c.session(t, "acme", "s-1"); got.Seq != 0 || !sameTurn(got.Turn, store.TurnState{}) {
			t.Errorf("Session = %s, want Seq 0 and no turn", showSession(got))
		}
		c.take(t, c.write(0, "turn-a", entryDocs("a", 1)))
		c.expectTranscript(t, "acme", "s-1", entryDocs("a", 1))
	})

	t.Run("Creating a session again is ErrExists and leaves the first as it was", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("first"))
		c.take(t, c.write(0, "turn-a", entryDocs("a", 2)))
		before := c.session(t, "acme", "s-1")
		c.clk.Advance(time.Second)
		err := c.ts.CreateSession(c.ctx, store.SessionRecord{Tenant: "acme", ID: "s-1", Doc: sessionDoc("second")})
		if !errors.Is(err, store.ErrExists) {
			t.Fatalf("CreateSession of a stored id: %v, want ErrExists", err)
		}
		c.expectUnchanged(t, before, "creating it again")
		c.expectTranscript(t, "acme", "s-1", entryDocs("a", 2))
	})

	t.Run("A session never created is ErrNoRecord to Session, Transcript, TakeTurn, WriteTurn, CancelTurn, AppendEntries and AppendEntriesAfter", func(t *testing.T) {
		c := setupTalk(t, open)
		c.expectNoSession(t, "acme", "s-never")
	})

	t.Run("Tenants are apart: another tenant's session, the empty tenant's too, is ErrNoRecord, and one id in two tenants is two sessions", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("acme"))
		c.take(t, c.write(0, "turn-a", entryDocs("acme", 2)))
		before := c.session(t, "acme", "s-1")
		for _, tenant := range []string{"globex", ""} {
			c.expectNoSession(t, tenant, "s-1")
		}
		c.expectUnchanged(t, before, "other tenants' attempts")

		c.create(t, "globex", "s-1", sessionDoc("globex"))
		if _, err := c.ts.AppendEntries(c.ctx, "globex", "s-1", entryDocs("globex", 3)); err != nil {
			t.Fatalf("AppendEntries to globex/s-1: %v", err)
		}
		if got := c.session(t, "globex", "s-1"); !bytes.Equal(got.Doc, sessionDoc("globex")) || !sameTurn(got.Turn, store.TurnState{}) {
			t.Errorf("globex/s-1 = %s, want its own document and no turn", showSession(got))
		}
		c.expectUnchanged(t, before, "globex's writes to its own s-1")
		c.expectTranscript(t, "acme", "s-1", entryDocs("acme", 2))
		c.expectTranscript(t, "globex", "s-1", entryDocs("globex", 3))
	})

	t.Run("TakeTurn on a new session takes epoch 1, holds the lease and appends its entries numbered from 1 at the store's time, which the session shows as updated", func(t *testing.T) {
		c := setupTalk(t, open)
		doc := sessionDoc("tea")
		created := c.clk.Now()
		c.create(t, "acme", "s-1", doc)
		c.clk.Advance(1500 * time.Millisecond)
		w := c.write(0, "turn-a", entryDocs("a", 3))
		at := c.clk.Now()
		res := c.take(t, w)
		if res.Seq != 3 {
			t.Errorf("TakeTurn = %+v, want Seq 3", res)
		}
		c.clk.Advance(time.Second) // so that a time taken at the read is caught
		rec := c.session(t, "acme", "s-1")
		if !sameTurn(rec.Turn, store.TurnState{Epoch: 1, Holder: "turn-a", Until: w.Until}) {
			t.Errorf("turn = %+v, want epoch 1 held by turn-a until %v", rec.Turn, w.Until)
		}
		if !bytes.Equal(rec.Doc, doc) {
			t.Errorf("a TakeTurn without a document left %s, want it kept: %s", rec.Doc, doc)
		}
		if !sameInstant(rec.Created, created) || !sameInstant(rec.Updated, at) {
			t.Errorf("after TakeTurn the session was created %v, updated %v; want %v, as before, and %v, the store's clock at TakeTurn", rec.Created, rec.Updated, created, at)
		}
		for _, e := range c.expectTranscript(t, "acme", "s-1", entryDocs("a", 3)) {
			if !sameInstant(e.At, at) {
				t.Errorf("entry %d stored at %v, want %v, the store's clock at TakeTurn", e.Seq, e.At, at)
			}
		}
	})

	t.Run("A turn's write replaces the document when it carries one and keeps it when not", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("created"))
		w := c.write(0, "turn-a", entryDocs("a", 1))
		w.Doc = sessionDoc("taken")
		c.take(t, w)
		if got := c.session(t, "acme", "s-1").Doc; !bytes.Equal(got, sessionDoc("taken")) {
			t.Errorf("after TakeTurn with a document the session has %s, want %s", got, sessionDoc("taken"))
		}
		c.writeTurn(t, c.write(1, "turn-a", entryDocs("b", 1)))
		if got := c.session(t, "acme", "s-1").Doc; !bytes.Equal(got, sessionDoc("taken")) {
			t.Errorf("after WriteTurn without a document the session has %s, want it kept: %s", got, sessionDoc("taken"))
		}
		w = c.write(1, "turn-a", nil)
		w.Doc = sessionDoc("written")
		c.writeTurn(t, w)
		if got := c.session(t, "acme", "s-1").Doc; !bytes.Equal(got, sessionDoc("written")) {
			t.Errorf("after WriteTurn with a document the session has %s, want %s", got, sessionDoc("written"))
		}
		c.expectTranscript(t, "acme", "s-1", concat(entryDocs("a", 1), entryDocs("b", 1)))
	})

	t.Run("TakeTurn while a turn holds the lease is ErrTurnHeld and writes nothing", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		c.take(t, c.write(0, "turn-a", entryDocs("a", 2)))
		before := c.session(t, "acme", "s-1")
		c.clk.Advance(lease / 2)
		for _, epoch := range []int64{0, 1} {
			w := c.write(epoch, "turn-b", entryDocs("b", 1))
			w.Doc = sessionDoc("intruder")
			if _, err := c.ts.TakeTurn(c.ctx, w); !errors.Is(err, store.ErrTurnHeld) {
				t.Errorf("TakeTurn at epoch %d while turn-a holds the lease: %v, want ErrTurnHeld", epoch, err)
			}
		}
		c.expectUnchanged(t, before, "the refused TakeTurns")
	})

	t.Run("TakeTurn at an epoch that is not the session's is ErrTurnHeld, even with the lease free", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		w := c.write(0, "turn-a", entryDocs("a", 1))
		w.End = true
		c.take(t, w) // epoch 1, the lease left free
		before := c.session(t, "acme", "s-1")
		for _, epoch := range []int64{0, 2, 5} {
			w := c.write(epoch, "turn-b", entryDocs("b", 1))
			w.Doc = sessionDoc("stale")
			if _, err := c.ts.TakeTurn(c.ctx, w); !errors.Is(err, store.ErrTurnHeld) {
				t.Errorf("TakeTurn at epoch %d of a session at epoch 1: %v, want ErrTurnHeld", epoch, err)
			}
		}
		c.expectUnchanged(t, before, "the refused TakeTurns")
	})

	t.Run("A lease ending at the writer's Now is free, and one ending after it is held", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		// An Until a store keeping milliseconds keeps exactly, however it
		// rounds.
		until := c.clk.Now().Truncate(time.Millisecond).Add(lease)
		w := c.write(0, "turn-a", entryDocs("a", 1))
		w.Until = until
		c.take(t, w)
		before := c.session(t, "acme", "s-1")
		early := c.write(1, "turn-b", entryDocs("b", 1))
		early.Now = until.Add(-time.Millisecond)
		if _, err := c.ts.TakeTurn(c.ctx, early); !errors.Is(err, store.ErrTurnHeld) {
			t.Fatalf("TakeTurn a millisecond before the lease ends: %v, want ErrTurnHeld", err)
		}
		c.expectUnchanged(t, before, "the refused TakeTurn")
		on := c.write(1, "turn-b", entryDocs("b", 1))
		on.Now = until
		c.take(t, on)
		c.expectTurn(t, "acme", "s-1", store.TurnState{Epoch: 2, Holder: "turn-b", Until: on.Until})
	})

	t.Run("A lease that ran out is taken at the session's epoch, and the old turn's writes are then ErrFenced and write nothing", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		c.take(t, c.write(0, "turn-a", entryDocs("a", 2)))
		c.clk.Advance(lease + time.Second)
		w := c.write(1, "turn-b", entryDocs("b", 1))
		if res := c.take(t, w); res.Seq != 3 {
			t.Errorf("TakeTurn over the run-out lease = %+v, want Seq 3", res)
		}
		c.expectTurn(t, "acme", "s-1", store.TurnState{Epoch: 2, Holder: "turn-b", Until: w.Until})
		before := c.session(t, "acme", "s-1")
		for _, end := range []bool{false, true} {
			zombie := c.write(1, "turn-a", entryDocs("zombie", 2))
			zombie.Doc, zombie.End = sessionDoc("zombie"), end
			if _, err := c.ts.WriteTurn(c.ctx, zombie); !errors.Is(err, store.ErrFenced) {
				t.Errorf("WriteTurn (End %v) by the turn taken over: %v, want ErrFenced", end, err)
			}
		}
		c.expectUnchanged(t, before, "the old turn's writes")
		c.expectTranscript(t, "acme", "s-1", concat(entryDocs("a", 2), entryDocs("b", 1)))
	})

	t.Run("WriteTurn appends at the store's time, renews the lease and reports the last entry's number", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		c.take(t, c.write(0, "turn-a", entryDocs("a", 2)))
		c.clk.Advance(lease / 2)
		w := c.write(1, "turn-a", entryDocs("b", 3))
		at := c.clk.Now()
		if res := c.writeTurn(t, w); res.Seq != 5 || res.Cancel {
			t.Errorf("WriteTurn = %+v, want Seq 5, no cancel", res)
		}
		c.expectTurn(t, "acme", "s-1", store.TurnState{Epoch: 1, Holder: "turn-a", Until: w.Until})
		got := c.expectTranscript(t, "acme", "s-1", concat(entryDocs("a", 2), entryDocs("b", 3)))
		for _, e := range got[2:] {
			if !sameInstant(e.At, at) {
				t.Errorf("entry %d stored at %v, want %v, the store's clock at WriteTurn", e.Seq, e.At, at)
			}
		}
		if rec := c.session(t, "acme", "s-1"); !sameInstant(rec.Updated, at) {
			t.Errorf("after WriteTurn the session was updated %v, want %v, the store's clock at WriteTurn", rec.Updated, at)
		}
		// Renewed: past the first Until, the lease is still held.
		c.clk.Advance(lease/2 + time.Second)
		if _, err := c.ts.TakeTurn(c.ctx, c.write(1, "turn-b", nil)); !errors.Is(err, store.ErrTurnHeld) {
			t.Errorf("TakeTurn after the first lease ended, within the renewed one: %v, want ErrTurnHeld", err)
		}
		if res := c.writeTurn(t, c.write(1, "turn-a", nil)); res.Seq != 5 {
			t.Errorf("WriteTurn of no entries = %+v, want Seq 5", res)
		}
	})

	t.Run("WriteTurn with End releases the lease and clears the cancel flag, and the turn's later writes are ErrFenced", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		c.take(t, c.write(0, "turn-a", entryDocs("a", 1)))
		if held, err := c.ts.CancelTurn(c.ctx, "acme", "s-1", c.clk.Now()); err != nil || !held {
			t.Fatalf("CancelTurn = %v, %v; want true", held, err)
		}
		w := c.write(1, "turn-a", entryDocs("b", 2))
		w.End = true
		if res := c.writeTurn(t, w); res.Seq != 3 {
			t.Errorf("WriteTurn with End = %+v, want Seq 3", res)
		}
		c.expectTurn(t, "acme", "s-1", store.TurnState{Epoch: 1})
		before := c.session(t, "acme", "s-1")
		if _, err := c.ts.WriteTurn(c.ctx, c.write(1, "turn-a", entryDocs("late", 1))); !errors.Is(err, store.ErrFenced) {
			t.Errorf("WriteTurn after the turn ended: %v, want ErrFenced", err)
		}
		c.expectUnchanged(t, before, "the ended turn's write")
		c.expectTranscript(t, "acme", "s-1", concat(entryDocs("a", 1), entryDocs("b", 2)))
		c.take(t, c.write(1, "turn-b", nil)) // free at once, at the epoch the turn had
	})

	t.Run("TakeTurn with End makes the write and leaves the lease free for the next turn", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		c.take(t, c.write(0, "turn-a", entryDocs("a", 1)))
		c.clk.Advance(lease + time.Second) // turn-a died
		repair := c.write(1, "repair", entryDocs("repair", 1))
		repair.Doc, repair.End = sessionDoc("repaired"), true
		if res := c.take(t, repair); res.Seq != 2 {
			t.Errorf("TakeTurn with End = %+v, want Seq 2", res)
		}
		rec := c.session(t, "acme", "s-1")
		if !sameTurn(rec.Turn, store.TurnState{Epoch: 2}) || !bytes.Equal(rec.Doc, sessionDoc("repaired")) {
			t.Errorf("after the repair the session is %s, want epoch 2, no holder, and the repair's document", showSession(rec))
		}
		c.expectTranscript(t, "acme", "s-1", concat(entryDocs("a", 1), entryDocs("repair", 1)))
		c.take(t, c.write(2, "turn-b", nil))
		c.expectTurn(t, "acme", "s-1", store.TurnState{Epoch: 3, Holder: "turn-b", Until: c.clk.Now().Add(lease)})
	})

	t.Run("CancelTurn flags the turn holding the lease, which learns of it with its next write, and a new turn starts with the flag clear", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		first := c.write(0, "turn-a", nil)
		c.take(t, first)
		if res := c.writeTurn(t, c.write(1, "turn-a", nil)); res.Cancel {
			t.Fatalf("WriteTurn before any cancel = %+v, want no cancel", res)
		}
		held, err := c.ts.CancelTurn(c.ctx, "acme", "s-1", c.clk.Now())
		if err != nil || !held {
			t.Fatalf("CancelTurn with turn-a holding the lease = %v, %v; want true", held, err)
		}
		c.expectTurn(t, "acme", "s-1", store.TurnState{Epoch: 1, Holder: "turn-a", Until: first.Until, Cancel: true})
		w := c.write(1, "turn-a", entryDocs("a", 1))
		if res := c.writeTurn(t, w); !res.Cancel || res.Seq != 1 {
			t.Errorf("WriteTurn after the cancel = %+v, want Cancel, and the write made (Seq 1)", res)
		}
		c.expectTurn(t, "acme", "s-1", store.TurnState{Epoch: 1, Holder: "turn-a", Until: w.Until, Cancel: true})

		// turn-a never stops; its lease runs out and turn-b takes over.
		c.clk.Advance(lease + time.Second)
		next := c.write(1, "turn-b", nil)
		c.take(t, next) // fails unless the result's Cancel is clear
		c.expectTurn(t, "acme", "s-1", store.TurnState{Epoch: 2, Holder: "turn-b", Until: next.Until})
		if res := c.writeTurn(t, c.write(2, "turn-b", nil)); res.Cancel {
			t.Errorf("WriteTurn by the new turn = %+v, want no cancel", res)
		}
	})

	t.Run("CancelTurn with no turn holding the lease reports false and changes nothing", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		cancel := func(when string) {
			t.Helper()
			before := c.session(t, "acme", "s-1")
			c.clk.Advance(time.Second)
			held, err := c.ts.CancelTurn(c.ctx, "acme", "s-1", c.clk.Now())
			if err != nil || held {
				t.Errorf("CancelTurn %s = %v, %v; want false", when, held, err)
			}
			c.expectUnchanged(t, before, "CancelTurn "+when)
		}
		cancel("before any turn")
		c.take(t, c.write(0, "turn-a", nil))
		c.clk.Advance(lease)
		cancel("after the lease ran out")
		c.take(t, c.write(1, "turn-b", nil))
		end := c.write(2, "turn-b", nil)
		end.End = true
		c.writeTurn(t, end)
		cancel("after the turn ended")
	})

	t.Run("AppendEntries appends with or without a turn, touching no lease, numbered on with the turns' writes, and of no entries reports the last number and writes nothing", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		appendEntries := func(entries []json.RawMessage, want int64) {
			t.Helper()
			before := c.session(t, "acme", "s-1")
			c.clk.Advance(time.Second)
			at := c.clk.Now()
			last, err := c.ts.AppendEntries(c.ctx, "acme", "s-1", entries)
			if err != nil || last != want {
				t.Fatalf("AppendEntries of %d entries = %d, %v; want %d", len(entries), last, err, want)
			}
			if len(entries) == 0 {
				c.expectUnchanged(t, before, "AppendEntries of no entries")
				return
			}
			c.expectTurn(t, "acme", "s-1", before.Turn)
			for _, e := range c.transcript(t, "acme", "s-1")[want-int64(len(entries)):] {
				if !sameInstant(e.At, at) {
					t.Errorf("entry %d stored at %v, want %v, the store's clock at AppendEntries", e.Seq, e.At, at)
				}
			}
			if rec := c.session(t, "acme", "s-1"); !sameInstant(rec.Updated, at) {
				t.Errorf("after AppendEntries the session was updated %v, want %v, the store's clock at AppendEntries", rec.Updated, at)
			}
		}
		appendEntries(nil, 0)
		appendEntries(entryDocs("before", 2), 2)
		appendEntries(nil, 2)
		c.take(t, c.write(0, "turn-a", entryDocs("take", 2)))
		appendEntries(entryDocs("during", 1), 5)
		if res := c.writeTurn(t, c.write(1, "turn-a", entryDocs("write", 2))); res.Seq != 7 {
			t.Errorf("WriteTurn after AppendEntries = %+v, want Seq 7", res)
		}
		end := c.write(1, "turn-a", entryDocs("end", 1))
		end.End = true
		if res := c.writeTurn(t, end); res.Seq != 8 {
			t.Errorf("WriteTurn with End = %+v, want Seq 8", res)
		}
		appendEntries(entryDocs("after", 1), 9)
		c.expectTranscript(t, "acme", "s-1", concat(entryDocs("before", 2), entryDocs("take", 2), entryDocs("during", 1),
			entryDocs("write", 2), entryDocs("end", 1), entryDocs("after", 1)))
	})

	t.Run("AppendEntriesAfter appends while the last entry is the one read, and is ErrMoved, writing nothing, once another write came between", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		appendAfter := func(last int64, entries []json.RawMessage, want int64) {
			t.Helper()
			before := c.session(t, "acme", "s-1")
			c.clk.Advance(time.Second)
			at := c.clk.Now()
			got, err := c.ts.AppendEntriesAfter(c.ctx, "acme", "s-1", last, entries)
			if err != nil || got != want {
				t.Fatalf("AppendEntriesAfter %d of %d entries = %d, %v; want %d", last, len(entries), got, err, want)
			}
			c.expectTurn(t, "acme", "s-1", before.Turn)
			if len(entries) == 0 {
				c.expectUnchanged(t, before, fmt.Sprintf("AppendEntriesAfter %d of no entries", last))
				return
			}
			for _, e := range c.transcript(t, "acme", "s-1")[last:] {
				if !sameInstant(e.At, at) {
					t.Errorf("entry %d stored at %v, want %v, the store's clock at AppendEntriesAfter", e.Seq, e.At, at)
				}
			}
		}
		moved := func(last int64, why string) {
			t.Helper()
			before := c.session(t, "acme", "s-1")
			c.clk.Advance(time.Second)
			for _, entries := range [][]json.RawMessage{entryDocs("stale", 2), nil} {
				if got, err := c.ts.AppendEntriesAfter(c.ctx, "acme", "s-1", last, entries); !errors.Is(err, store.ErrMoved) {
					t.Errorf("AppendEntriesAfter %d of %d entries %s = %d, %v; want ErrMoved", last, len(entries), why, got, err)
				}
			}
			c.expectUnchanged(t, before, fmt.Sprintf("AppendEntriesAfter %d %s", last, why))
		}

		appendAfter(0, entryDocs("first", 2), 2)
		moved(0, "after its own write")
		moved(3, "past the last entry")
		appendAfter(2, nil, 2)

		c.take(t, c.write(0, "turn-a", entryDocs("take", 2)))
		moved(2, "after a turn's write")
		appendAfter(4, entryDocs("during", 1), 5) // within the turn, its lease untouched
		// A write that appends nothing leaves the last entry where it was.
		w := c.write(1, "turn-a", nil)
		w.Doc = sessionDoc("written")
		c.writeTurn(t, w)
		appendAfter(5, entryDocs("unmoved", 1), 6)
		c.writeTurn(t, c.write(1, "turn-a", entryDocs("write", 1)))
		moved(6, "after a turn's write")

		if _, err := c.ts.AppendEntries(c.ctx, "acme", "s-1", entryDocs("other", 2)); err != nil {
			t.Fatalf("AppendEntries: %v", err)
		}
		moved(7, "after an AppendEntries")
		appendAfter(9, entryDocs("last", 1), 10)
		c.expectTranscript(t, "acme", "s-1", concat(entryDocs("first", 2), entryDocs("take", 2), entryDocs("during", 1),
			entryDocs("unmoved", 1), entryDocs("write", 1), entryDocs("other", 2), entryDocs("last", 1)))
	})

	t.Run("Transcript pages after a number, at most limit at a time, and none past the end or with limit 0", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		c.take(t, c.write(0, "turn-a", entryDocs("e", 3)))
		rest := entryDocs("f", 4)
		if _, err := c.ts.AppendEntries(c.ctx, "acme", "s-1", rest); err != nil {
			t.Fatal(err)
		}
		all := concat(entryDocs("e", 3), rest)
		var read []json.RawMessage
		for after := int64(0); ; {
			page, err := c.ts.Transcript(c.ctx, "acme", "s-1", after, 3)
			if err != nil {
				t.Fatalf("Transcript after %d: %v", after, err)
			}
			if len(page) > 3 {
				t.Fatalf("Transcript after %d with limit 3 gave %d", after, len(page))
			}
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				if e.Seq != after+1 {
					t.Fatalf("after %d came entry %d", after, e.Seq)
				}
				after = e.Seq
				read = append(read, e.Entry)
			}
		}
		if len(read) != len(all) {
			t.Fatalf("paging read %d entries, want %d", len(read), len(all))
		}
		for i := range all {
			if !bytes.Equal(read[i], all[i]) {
				t.Errorf("entry %d paged as %s, want %s", i+1, read[i], all[i])
			}
		}
		if page, err := c.ts.Transcript(c.ctx, "acme", "s-1", 5, 1); err != nil || len(page) != 1 || page[0].Seq != 6 {
			t.Errorf("Transcript after 5, limit 1 = %+v, %v; want entry 6 alone", page, err)
		}
		for _, after := range []int64{7, 100} {
			if page, err := c.ts.Transcript(c.ctx, "acme", "s-1", after, 10); err != nil || len(page) != 0 {
				t.Errorf("Transcript after %d of 7 entries = %d entries, %v; want none, no error", after, len(page), err)
			}
		}
		for _, after := range []int64{0, 3} {
			if page, err := c.ts.Transcript(c.ctx, "acme", "s-1", after, 0); err != nil || len(page) != 0 {
				t.Errorf("Transcript after %d, limit 0 = %d entries, %v; want none, no error", after, len(page), err)
			}
		}
	})

	t.Run("What goes into a session and what comes out of it are copies", func(t *testing.T) {
		c := setupTalk(t, open)
		doc := sessionDoc("tea")
		c.create(t, "acme", "s-1", doc)
		copy(doc, `{"XXXXX":`)
		got := c.session(t, "acme", "s-1")
		copy(got.Doc, `{"YYYYY":`)
		if again := c.session(t, "acme", "s-1"); !bytes.Equal(again.Doc, sessionDoc("tea")) {
			t.Errorf("the stored document is %s after callers changed their bytes, want %s", again.Doc, sessionDoc("tea"))
		}

		w := c.write(0, "turn-a", entryDocs("a", 2))
		w.Doc = sessionDoc("taken")
		c.take(t, w)
		copy(w.Entries[0], `{"XXXXX":`)
		copy(w.Doc, `{"XXXXX":`)
		appended := entryDocs("b", 1)
		if _, err := c.ts.AppendEntries(c.ctx, "acme", "s-1", appended); err != nil {
			t.Fatal(err)
		}
		copy(appended[0], `{"XXXXX":`)
		out := c.transcript(t, "acme", "s-1")
		copy(out[1].Entry, `{"YYYYY":`)
		c.expectTranscript(t, "acme", "s-1", concat(entryDocs("a", 2), entryDocs("b", 1)))
		if again := c.session(t, "acme", "s-1"); !bytes.Equal(again.Doc, sessionDoc("taken")) {
			t.Errorf("the stored document is %s after the writer changed its bytes, want %s", again.Doc, sessionDoc("taken"))
		}
	})

	t.Run("Of turns racing to take one epoch, exactly one wins and the rest are ErrTurnHeld", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		const racers = 16
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
		)
		start := make(chan struct{})
		for i := range racers {
			holder := fmt.Sprintf("turn-%02d", i)
			wg.Go(func() {
				w := c.write(0, holder, entryDocs(holder, 2))
				<-start
				_, err := c.ts.TakeTurn(c.ctx, w)
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, holder)
					mu.Unlock()
				case !errors.Is(err, store.ErrTurnHeld):
					t.Errorf("TakeTurn by %s: %v, want ErrTurnHeld or success", holder, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("%d turns took epoch 1 (%v), want exactly one", len(winners), winners)
		}
		rec := c.session(t, "acme", "s-1")
		if rec.Turn.Epoch != 1 || rec.Turn.Holder != winners[0] {
			t.Errorf("turn = %+v, want epoch 1 held by the winner, %s", rec.Turn, winners[0])
		}
		c.expectTranscript(t, "acme", "s-1", entryDocs(winners[0], 2))
	})

	t.Run("Of writers racing to append after one entry, exactly one appends and the rest are ErrMoved", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		if _, err := c.ts.AppendEntries(c.ctx, "acme", "s-1", entryDocs("first", 1)); err != nil {
			t.Fatalf("AppendEntries: %v", err)
		}
		const racers = 16
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
		)
		start := make(chan struct{})
		for i := range racers {
			name := fmt.Sprintf("writer-%02d", i)
			wg.Go(func() {
				<-start
				last, err := c.ts.AppendEntriesAfter(c.ctx, "acme", "s-1", 1, entryDocs(name, 2))
				switch {
				case err == nil:
					if last != 3 {
						t.Errorf("AppendEntriesAfter by %s = %d, want 3", name, last)
					}
					mu.Lock()
					winners = append(winners, name)
					mu.Unlock()
				case !errors.Is(err, store.ErrMoved):
					t.Errorf("AppendEntriesAfter by %s: %v, want ErrMoved or success", name, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("%d writers appended after entry 1 (%v), want exactly one", len(winners), winners)
		}
		c.expectTranscript(t, "acme", "s-1", concat(entryDocs("first", 1), entryDocs(winners[0], 2)))
	})

	t.Run("Writers appending at once, in a turn and out of one, number every entry once, 1 to n, each write's entries together", func(t *testing.T) {
		c := setupTalk(t, open)
		c.create(t, "acme", "s-1", sessionDoc("tea"))
		c.take(t, c.write(0, "turn-a", nil))
		const appenders, turnWriters, batches, size = 4, 2, 5, 3
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			last = map[string]int64{} // the number each write reported, by write
		)
		report := func(name string, seq int64) {
			mu.Lock()
			defer mu.Unlock()
			last[name] = seq
		}
		for a := range appenders {
			wg.Go(func() {
				for b := range batches {
					name := fmt.Sprintf("append%d.%d", a, b)
					seq, err := c.ts.AppendEntries(c.ctx, "acme", "s-1", entryDocs(name, size))
					if err != nil {
						t.Errorf("AppendEntries %s: %v", name, err)
						return
					}
					report(name, seq)
				}
			})
		}
		for w := range turnWriters {
			wg.Go(func() {
				for b := range batches {
					name := fmt.Sprintf("turn%d.%d", w, b)
					res, err := c.ts.WriteTurn(c.ctx, c.write(1, "turn-a", entryDocs(name, size)))
					if err != nil {
						t.Errorf("WriteTurn %s: %v", name, err)
						return
					}
					report(name, res.Seq)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		const total = (appenders + turnWriters) * batches * size
		got := c.transcript(t, "acme", "s-1")
		if len(got) != total {
			t.Fatalf("%d entries stored, want %d", len(got), total)
		}
		for i, e := range got {
			if e.Seq != int64(i+1) {
				t.Fatalf("entry %d numbered %d", i+1, e.Seq)
			}
			write, index := entryName(t, e)
			first, _ := entryName(t, got[i-i%size])
			if write != first || index != fmt.Sprint(i%size+1) {
				t.Errorf("entry %d is %s-%s, want %s-%d: a write was split or reordered", e.Seq, write, index, first, i%size+1)
			}
			if i%size == size-1 && last[write] != e.Seq {
				t.Errorf("write %s reported %d as its last entry, which is %d", write, last[write], e.Seq)
			}
		}
		if rec := c.session(t, "acme", "s-1"); rec.Seq != total {
			t.Errorf("Seq = %d, want %d", rec.Seq, total)
		}
	})
}

// expectNoSession fails unless every call about tenant's session id is
// ErrNoRecord.
func (c talk) expectNoSession(t *testing.T, tenant, id string) {
	t.Helper()
	if _, err := c.ts.Session(c.ctx, tenant, id); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("Session %s/%s: %v, want ErrNoRecord", tenant, id, err)
	}
	// A limit of 0 reads no entry, but must still find the session.
	for _, limit := range []int{0, 10} {
		if _, err := c.ts.Transcript(c.ctx, tenant, id, 0, limit); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("Transcript of %s/%s, limit %d: %v, want ErrNoRecord", tenant, id, limit, err)
		}
	}
	w := c.write(0, "turn-x", entryDocs("x", 1))
	w.Tenant, w.Session = tenant, id
	if _, err := c.ts.TakeTurn(c.ctx, w); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("TakeTurn of %s/%s: %v, want ErrNoRecord", tenant, id, err)
	}
	// At epoch 1, the epoch of the same id in the tenants test's other
	// tenant: a store that looked past the tenant would find a turn there.
	w.Epoch = 1
	if _, err := c.ts.WriteTurn(c.ctx, w); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("WriteTurn of %s/%s: %v, want ErrNoRecord", tenant, id, err)
	}
	if _, err := c.ts.CancelTurn(c.ctx, tenant, id, c.clk.Now()); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("CancelTurn of %s/%s: %v, want ErrNoRecord", tenant, id, err)
	}
	if _, err := c.ts.AppendEntries(c.ctx, tenant, id, entryDocs("x", 1)); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("AppendEntries to %s/%s: %v, want ErrNoRecord", tenant, id, err)
	}
	for _, entries := range [][]json.RawMessage{entryDocs("x", 1), nil} {
		if _, err := c.ts.AppendEntriesAfter(c.ctx, tenant, id, 0, entries); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("AppendEntriesAfter 0 of %d entries to %s/%s: %v, want ErrNoRecord", len(entries), tenant, id, err)
		}
	}
}
