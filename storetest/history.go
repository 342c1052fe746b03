package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/planexec/planexec/store"
)

// history returns the stores' EventStore, if Plans keeps histories.
func (k kit) history() (store.EventStore, bool) {
	h, ok := k.Plans.(store.EventStore)
	return h, ok
}

// events reads a run's whole history.
func (k kit) events(t *testing.T, tenant, run string) []store.EventRecord {
	t.Helper()
	h, _ := k.history()
	got, err := h.Events(k.ctx, tenant, run, 0, 1<<20)
	if err != nil {
		t.Fatalf("Events of %s/%s: %v", tenant, run, err)
	}
	return got
}

// expectNoHistory fails if the run has any event stored. Stores that keep
// no histories have nothing to check.
func (k kit) expectNoHistory(t *testing.T, tenant, run string) {
	t.Helper()
	if _, ok := k.history(); !ok {
		return
	}
	if got := k.events(t, tenant, run); len(got) != 0 {
		t.Errorf("%s/%s has %d events stored, want none: %s", tenant, run, len(got), got[0].Event)
	}
}

// expectHistory fails unless the run's history is want, numbered from 1,
// each event byte for byte.
func (k kit) expectHistory(t *testing.T, tenant, run string, want []json.RawMessage) {
	t.Helper()
	got := k.events(t, tenant, run)
	if len(got) != len(want) {
		t.Fatalf("%s/%s has %d events, want %d", tenant, run, len(got), len(want))
	}
	for i, e := range got {
		if e.Seq != int64(i+1) || string(e.Event) != string(want[i]) {
			t.Errorf("event %d of %s/%s = %d %s, want %d %s", i, tenant, run, e.Seq, e.Event, i+1, want[i])
		}
	}
}

// eventDocs are n event documents as an executor writes them: compact JSON
// whose strings hold what a planner may write, escaped as encoding/json
// escapes it, and whose spacing a store must keep.
func eventDocs(prefix string, n int) []json.RawMessage {
	text, _ := json.Marshal(plannerText)
	docs := make([]json.RawMessage, n)
	for i := range docs {
		docs[i] = json.RawMessage(fmt.Sprintf(`{"kind":"STEP_STARTED","n":%q,"detail":%s,"fare": 412.50}`, fmt.Sprintf("%s-%d", prefix, i+1), text))
	}
	return docs
}

// zombieEvents are the events of a write that must not land.
var zombieEvents = eventDocs("zombie", 2)

func runHistory(t *testing.T, open Open) {
	if _, ok := setup(t, open).history(); !ok {
		t.Skip("Plans keeps no histories (store.EventStore)")
	}

	t.Run("Appended events come back in order, numbered from 1, byte for byte", func(t *testing.T) {
		k := setup(t, open)
		h, _ := k.history()
		first, second := eventDocs("a", 3), eventDocs("b", 2)
		for _, batch := range [][]json.RawMessage{first, second} {
			if err := h.AppendEvents(k.ctx, "acme", "run-1", batch); err != nil {
				t.Fatalf("AppendEvents: %v", err)
			}
		}
		k.expectHistory(t, "acme", "run-1", append(append([]json.RawMessage{}, first...), second...))
	})

	t.Run("Events pages after a number, at most limit at a time", func(t *testing.T) {
		k := setup(t, open)
		h, _ := k.history()
		all := eventDocs("e", 7)
		if err := h.AppendEvents(k.ctx, "acme", "run-1", all); err != nil {
			t.Fatalf("AppendEvents: %v", err)
		}
		var read []json.RawMessage
		for after := int64(0); ; {
			page, err := h.Events(k.ctx, "acme", "run-1", after, 3)
			if err != nil {
				t.Fatalf("Events after %d: %v", after, err)
			}
			if len(page) > 3 {
				t.Fatalf("Events after %d with limit 3 gave %d", after, len(page))
			}
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				if e.Seq != after+1 {
					t.Fatalf("after %d came event %d", after, e.Seq)
				}
				after = e.Seq
				read = append(read, e.Event)
			}
		}
		if len(read) != len(all) {
			t.Fatalf("paging read %d events, want %d", len(read), len(all))
		}
		for i := range all {
			if string(read[i]) != string(all[i]) {
				t.Errorf("event %d paged as %s, want %s", i+1, read[i], all[i])
			}
		}
		if page, err := h.Events(k.ctx, "acme", "run-1", 7, 10); err != nil || len(page) != 0 {
			t.Errorf("Events after the last = %d events, %v; want none", len(page), err)
		}
	})

	t.Run("A run with no history has none, and one tenant never reads another's", func(t *testing.T) {
		k := setup(t, open)
		h, _ := k.history()
		if page, err := h.Events(k.ctx, "acme", "run-never", 0, 10); err != nil || len(page) != 0 {
			t.Errorf("Events of a run never written = %d, %v; want none, no error", len(page), err)
		}
		acme, globex := eventDocs("acme", 2), eventDocs("globex", 3)
		if err := h.AppendEvents(k.ctx, "acme", "run-1", acme); err != nil {
			t.Fatal(err)
		}
		if err := h.AppendEvents(k.ctx, "globex", "run-1", globex); err != nil {
			t.Fatal(err)
		}
		k.expectHistory(t, "acme", "run-1", acme)
		k.expectHistory(t, "globex", "run-1", globex)
		k.expectNoHistory(t, "initech", "run-1")
	})

	t.Run("A run without a plan record has a history, and Forget removes it with the run", func(t *testing.T) {
		k := setup(t, open)
		h, _ := k.history()
		refused := eventDocs("refused", 2)
		if err := h.AppendEvents(k.ctx, "acme", "run-1", refused); err != nil {
			t.Fatalf("AppendEvents with no plan record: %v", err)
		}
		k.expectHistory(t, "acme", "run-1", refused)
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())); err != nil {
			t.Fatal(err)
		}
		if err := h.AppendEvents(k.ctx, "acme", "run-2", eventDocs("other", 1)); err != nil {
			t.Fatal(err)
		}
		if err := k.Plans.Forget(k.ctx, "acme", "run-1"); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		k.expectNoHistory(t, "acme", "run-1")
		if got := k.events(t, "acme", "run-2"); len(got) != 1 {
			t.Errorf("forgetting run-1 left run-2 with %d events, want 1", len(got))
		}
		again := eventDocs("again", 1)
		if err := h.AppendEvents(k.ctx, "acme", "run-1", again); err != nil {
			t.Fatal(err)
		}
		k.expectHistory(t, "acme", "run-1", again)
	})

	t.Run("Writers appending at once lose nothing and number every event once", func(t *testing.T) {
		k := setup(t, open)
		h, _ := k.history()
		const writers, batches, size = 4, 5, 3
		var wg sync.WaitGroup
		errs := make(chan error, writers*batches)
		for w := range writers {
			wg.Go(func() {
				for b := range batches {
					if err := h.AppendEvents(k.ctx, "acme", "run-1", eventDocs(fmt.Sprintf("w%d-b%d", w, b), size)); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("AppendEvents: %v", err)
		}
		got := k.events(t, "acme", "run-1")
		if len(got) != writers*batches*size {
			t.Fatalf("%d events stored, want %d", len(got), writers*batches*size)
		}
		// Numbered 1..n, and each batch whole and in order: a batch is
		// appended at once.
		name := func(e store.EventRecord) (batch, index string) {
			var doc struct{ N string }
			if err := json.Unmarshal(e.Event, &doc); err != nil {
				t.Fatalf("event %d: %v", e.Seq, err)
			}
			cut := strings.LastIndex(doc.N, "-")
			return doc.N[:cut], doc.N[cut+1:]
		}
		for i, e := range got {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d numbered %d", i+1, e.Seq)
			}
			batch, index := name(e)
			first, _ := name(got[i-i%size])
			if batch != first || index != fmt.Sprint(i%size+1) {
				t.Errorf("event %d is %s-%s, want %s-%d: a batch was split or reordered", e.Seq, batch, index, first, i%size+1)
			}
		}
	})

	t.Run("What Events returns is a copy", func(t *testing.T) {
		k := setup(t, open)
		h, _ := k.history()
		docs := eventDocs("c", 2)
		if err := h.AppendEvents(k.ctx, "acme", "run-1", docs); err != nil {
			t.Fatal(err)
		}
		want := eventDocs("c", 2)
		copy(docs[0], `{"XXXXX":`)
		got := k.events(t, "acme", "run-1")
		copy(got[1].Event, `{"XXXXX":`)
		k.expectHistory(t, "acme", "run-1", want)
	})

	t.Run("SavePlan appends the record's events with it", func(t *testing.T) {
		k := setup(t, open)
		h, _ := k.history()
		first, second := eventDocs("start", 2), eventDocs("end", 1)
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())
		rec.Events = first
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := h.AppendEvents(k.ctx, "acme", "run-1", eventDocs("between", 1)); err != nil {
			t.Fatal(err)
		}
		rec.Status, rec.Events = store.RunCompleted, second
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatal(err)
		}
		k.expectHistory(t, "acme", "run-1", append(append(append([]json.RawMessage{}, first...), eventDocs("between", 1)...), second...))
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil || got.Events != nil {
			t.Errorf("LoadPlan = events %q, %v; want none: a plan record does not carry its history", got.Events, err)
		}
	})

	t.Run("A finished step's write appends its events with it", func(t *testing.T) {
		k := setup(t, open)
		ss, ok := stepStoreOf(k.Stores)
		if !ok {
			t.Skip("Plans is not a StepStore")
		}
		h, _ := k.history()
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())); err != nil {
			t.Fatal(err)
		}
		before, done, failed := eventDocs("planned", 2), eventDocs("s1", 2), eventDocs("s2", 1)
		if err := h.AppendEvents(k.ctx, "acme", "run-1", before); err != nil {
			t.Fatal(err)
		}
		c := k.acquire(t, theKey, "worker-a", false)
		if err := ss.CompleteStep(k.ctx, &store.StepWrite{Key: theKey, Epoch: c.Epoch, RunID: "run-1", Outcome: json.RawMessage(`"PNR"`),
			Record: doneStep("s1", "plan-1", k.clk.Now()), Events: done}); err != nil {
			t.Fatalf("CompleteStep: %v", err)
		}
		other := k.acquire(t, otherKey, "worker-a", false)
		if err := ss.ReleaseStep(k.ctx, &store.StepWrite{Key: otherKey, Epoch: other.Epoch, RunID: "run-1", InDoubt: true,
			Record: doubtStep("s2", "plan-1", k.clk.Now()), Events: failed}); err != nil {
			t.Fatalf("ReleaseStep: %v", err)
		}
		k.expectHistory(t, "acme", "run-1", append(append(append([]json.RawMessage{}, before...), done...), failed...))
	})
}
