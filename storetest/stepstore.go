package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

func runStepStore(t *testing.T, open Open) {
	// setupSteps opens stores and saves a plan for run-1 of acme.
	setupSteps := func(t *testing.T) (kit, store.Store) {
		t.Helper()
		k := setup(t, open)
		ss, ok := stepStoreOf(k.Stores)
		if !ok {
			t.Fatalf("Open returned a StepStore once and not again")
		}
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		return k, ss
	}
	// stepOf returns run-1's record of step id, if any.
	stepOf := func(t *testing.T, k kit, id string) (store.StepRecord, bool) {
		t.Helper()
		rec, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		st, ok := rec.Steps[id]
		return st, ok
	}

	t.Run("CompleteStep writes the completion and the step record together", func(t *testing.T) {
		k, ss := setupSteps(t)
		c := k.acquire(t, theKey, "worker-a", false)
		want := doneStep("s2", "plan-1", k.clk.Now())
		want.Key = theKey.Digest
		if err := ss.CompleteStep(k.ctx, &store.StepWrite{Key: theKey, Epoch: c.Epoch, RunID: "run-1", Outcome: want.Outcome, Record: want}); err != nil {
			t.Fatalf("CompleteStep: %v", err)
		}
		k.expectCompleted(t, theKey, string(want.Outcome))
		got, ok := stepOf(t, k, "s2")
		if !ok {
			t.Fatalf("CompleteStep completed the key but wrote no step record")
		}
		for _, d := range diffStep(got, want) {
			t.Errorf("step s2: %s", d)
		}
	})

	t.Run("ReleaseStep in doubt writes the release and the step record together", func(t *testing.T) {
		k, ss := setupSteps(t)
		c := k.acquire(t, theKey, "worker-a", false)
		want := doubtStep("s2", "plan-1", k.clk.Now())
		want.Key = theKey.Digest
		if err := ss.ReleaseStep(k.ctx, &store.StepWrite{Key: theKey, Epoch: c.Epoch, RunID: "run-1", InDoubt: true, Record: want}); err != nil {
			t.Fatalf("ReleaseStep: %v", err)
		}
		k.expectInDoubt(t, theKey)
		got, ok := stepOf(t, k, "s2")
		if !ok {
			t.Fatalf("ReleaseStep released the key but wrote no step record")
		}
		for _, d := range diffStep(got, want) {
			t.Errorf("step s2: %s", d)
		}
	})

	t.Run("ReleaseStep as not applied frees the key and writes the step record together", func(t *testing.T) {
		k, ss := setupSteps(t)
		c := k.acquire(t, theKey, "worker-a", false)
		want := doubtStep("s2", "plan-1", k.clk.Now())
		want.Status, want.Key = planexec.StepFailed, theKey.Digest
		if err := ss.ReleaseStep(k.ctx, &store.StepWrite{Key: theKey, Epoch: c.Epoch, RunID: "run-1", Record: want}); err != nil {
			t.Fatalf("ReleaseStep: %v", err)
		}
		if again := k.acquire(t, theKey, "worker-b", false); again.Epoch <= c.Epoch {
			t.Errorf("claim after the release at epoch %d, want above %d", again.Epoch, c.Epoch)
		}
		got, ok := stepOf(t, k, "s2")
		if !ok {
			t.Fatalf("ReleaseStep freed the key but wrote no step record")
		}
		for _, d := range diffStep(got, want) {
			t.Errorf("step s2: %s", d)
		}
	})

	t.Run("CompleteStep and ReleaseStep under a stale epoch are ErrFenced and write neither", func(t *testing.T) {
		k, ss := setupSteps(t)
		old := k.acquire(t, theKey, "worker-a", true)
		k.clk.Advance(lease + time.Second)
		cur := k.acquire(t, theKey, "worker-b", true)
		rec := doneStep("s2", "plan-1", k.clk.Now())
		if err := ss.CompleteStep(k.ctx, &store.StepWrite{Key: theKey, Epoch: old.Epoch, RunID: "run-1", Outcome: json.RawMessage(`"from a zombie"`), Record: rec, Events: zombieEvents}); !errors.Is(err, store.ErrFenced) {
			t.Errorf("CompleteStep under the old epoch: want ErrFenced, got %v", err)
		}
		for _, inDoubt := range []bool{false, true} {
			if err := ss.ReleaseStep(k.ctx, &store.StepWrite{Key: theKey, Epoch: old.Epoch, RunID: "run-1", InDoubt: inDoubt, Record: doubtStep("s2", "plan-1", k.clk.Now()), Events: zombieEvents}); !errors.Is(err, store.ErrFenced) {
				t.Errorf("ReleaseStep (in doubt %v) under the old epoch: want ErrFenced, got %v", inDoubt, err)
			}
		}
		if st, ok := stepOf(t, k, "s2"); ok {
			t.Errorf("a fenced write left a step record: %+v", st)
		}
		k.expectNoHistory(t, "acme", "run-1")
		k.expectHeld(t, theKey, "worker-b", cur.LeaseExpires)
	})

	t.Run("CompleteStep into a run with no plan record is ErrNoRecord and writes neither", func(t *testing.T) {
		k, ss := setupSteps(t)
		c := k.acquire(t, theKey, "worker-a", false)
		err := ss.CompleteStep(k.ctx, &store.StepWrite{Key: theKey, Epoch: c.Epoch, RunID: "run-gone", Outcome: json.RawMessage(`"PNR"`), Record: doneStep("s2", "plan-1", k.clk.Now()), Events: zombieEvents})
		if !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("CompleteStep into a run never saved: want ErrNoRecord, got %v", err)
		}
		// Both or neither: the key is still the holder's, not completed.
		k.expectHeld(t, theKey, "worker-a", c.LeaseExpires)
		k.expectNoHistory(t, "acme", "run-gone")
		if err := k.Idempotency.Complete(k.ctx, theKey, c.Epoch, json.RawMessage(`"PNR"`)); err != nil {
			t.Errorf("the holder's Complete after the refused CompleteStep: %v", err)
		}
	})
}
