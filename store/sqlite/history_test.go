package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/sqlite"
)

// When the events of a step's write cannot be stored, nothing of the write
// is: the claim stays the holder's, no step record is written, and no
// event of the batch is kept, not even those before the one refused.
func TestAStepWriteWhoseEventsFailWritesNothing(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	saveSample(t, s, "acme", "run-1", "p1")
	db := rawDB(t, path)
	mustExec(t, db, `CREATE TRIGGER refuse_poison BEFORE INSERT ON events WHEN NEW.event LIKE '%poison%'
		BEGIN SELECT RAISE(ABORT, 'poisoned event'); END`)
	key := planexec.Key{Tenant: "acme", Digest: "k-s1"}
	c, err := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	events := []json.RawMessage{json.RawMessage(`{"kind":"STEP_STARTED"}`), json.RawMessage(`{"kind":"poison"}`)}
	writes := map[string]func() error{
		"complete step": func() error {
			return s.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: "run-1", Outcome: json.RawMessage(`"x"`), Record: stepRec("s1", "p1"), Events: events})
		},
		"release step": func() error {
			return s.ReleaseStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: "run-1", InDoubt: true, Record: stepRec("s1", "p1"), Events: events})
		},
	}
	for op, write := range writes {
		wantStoreError(t, write(), op, nil)
		if rec, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || len(rec.Steps) != 0 {
			t.Errorf("after the failed %s: steps %+v, %v; want none", op, rec.Steps, err)
		}
		if got, err := s.Events(ctx, "acme", "run-1", 0, 10); err != nil || len(got) != 0 {
			t.Errorf("after the failed %s: events %+v, %v; want none", op, got, err)
		}
		// The holder still holds the key: its Extend is not fenced.
		if err := s.Extend(ctx, key, c.Epoch, time.Minute); err != nil {
			t.Errorf("after the failed %s the holder's Extend: %v", op, err)
		}
	}
	mustExec(t, db, `DROP TRIGGER refuse_poison`)
	if err := writes["complete step"](); err != nil {
		t.Fatalf("CompleteStep once the events can be stored: %v", err)
	}
	if got, err := s.Events(ctx, "acme", "run-1", 0, 10); err != nil || len(got) != 2 || got[1].Seq != 2 {
		t.Errorf("events %+v, %v; want the two of the write", got, err)
	}
}

// Writers in two Stores on one file, as in two processes, appending to one
// run at once, number every event once, without a gap, each batch whole;
// and a reader following the history as it grows reads every event, in
// order, never finding later an event numbered at or below one it read.
func TestWritersOfTwoStoresNumberEventsOnceAndAReaderMissesNone(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	stores := []*sqlite.Store{
		openAt(t, path, sqlite.WithBusyTimeout(time.Minute), sqlite.WithRelaxedSync()),
		openAt(t, path, sqlite.WithBusyTimeout(time.Minute), sqlite.WithRelaxedSync()),
	}
	const writers, batches, size = 8, 25, 3
	const total = writers * batches * size
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				docs := make([]json.RawMessage, size)
				for i := range docs {
					docs[i] = json.RawMessage(fmt.Sprintf(`{"w":%d,"b":%d,"i":%d}`, w, b, i))
				}
				if err := stores[w%2].AppendEvents(ctx, "acme", "run-1", docs); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	var read []store.EventRecord
	done, reader := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(reader)
		after, writersDone := int64(0), false
		for after < total {
			page, err := stores[1].Events(ctx, "acme", "run-1", after, 7)
			if err != nil {
				reader <- err
				return
			}
			if len(page) == 0 {
				if writersDone {
					return // nothing more after the writers were done
				}
				select {
				case <-done: // the writers are done: one more look
					writersDone = true
				default:
				}
			}
			for _, e := range page {
				if e.Seq != after+1 {
					reader <- fmt.Errorf("after event %d the reader found event %d", after, e.Seq)
					return
				}
				after = e.Seq
				read = append(read, e)
			}
		}
	}()
	wg.Wait()
	close(done)
	if err := <-reader; err != nil {
		t.Fatal(err)
	}
	if len(read) != total {
		t.Fatalf("the reader read %d events, want %d", len(read), total)
	}
	stored, err := stores[0].Events(ctx, "acme", "run-1", 0, 10*total)
	if err != nil || len(stored) != total {
		t.Fatalf("%d events stored (%v), want %d", len(stored), err, total)
	}
	type doc struct{ W, B, I int }
	for i, e := range stored {
		if e.Seq != int64(i+1) || string(e.Event) != string(read[i].Event) {
			t.Fatalf("event %d is %d %s; the reader read %d %s", i+1, e.Seq, e.Event, read[i].Seq, read[i].Event)
		}
		var got, first doc
		if err := json.Unmarshal(e.Event, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(stored[i-i%size].Event, &first); err != nil {
			t.Fatal(err)
		}
		if got.W != first.W || got.B != first.B || got.I != i%size {
			t.Fatalf("event %d is %+v, want writer %d batch %d index %d: a batch was split or reordered", e.Seq, got, first.W, first.B, i%size)
		}
	}
}

// Forget removes a run's history, with its plan record or without one,
// and no other run's.
func TestForgetRemovesAHistoryWithOrWithoutAPlanRecord(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	saveSample(t, s, "acme", "run-planned", "p1")
	for _, run := range []string{"run-planned", "run-refused", "run-other"} {
		if err := s.AppendEvents(ctx, "acme", run, []json.RawMessage{json.RawMessage(`{"kind":"PLANNED"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendEvents(ctx, "globex", "run-refused", []json.RawMessage{json.RawMessage(`{"kind":"PLAN_REFUSED"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"run-planned", "run-refused"} {
		if err := s.Forget(ctx, "acme", run); err != nil {
			t.Fatalf("Forget %s: %v", run, err)
		}
	}
	var left []string
	rows, err := rawDB(t, path).Query(`SELECT tenant || '/' || run_id FROM events ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		left = append(left, r)
	}
	if len(left) != 2 || left[0] != "acme/run-other" || left[1] != "globex/run-refused" {
		t.Errorf("events left of %v, want of acme/run-other and globex/run-refused only", left)
	}
}

func TestEventsWithALimitBelowOneReadsNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	if err := s.AppendEvents(ctx, "acme", "run-1", []json.RawMessage{json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{0, -1} {
		if got, err := s.Events(ctx, "acme", "run-1", 0, limit); err != nil || len(got) != 0 {
			t.Errorf("Events with limit %d = %+v, %v; want nothing", limit, got, err)
		}
	}
	if got, err := s.Events(ctx, "acme", "run-1", -5, 10); err != nil || len(got) != 1 || got[0].Seq != 1 {
		t.Errorf("Events after -5 = %+v, %v; want the one event", got, err)
	}
}
