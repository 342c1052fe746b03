package planexec_test

// What a service runs on a timer: recovery of runs that stopped without
// finishing, and pruning of what finished long ago; and ceilings that hold
// across executors because the store counts them.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

func TestExecutorsWithLaddersOfTheirOwnShareAWindowedCeilingThroughTheStore(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	var executors []*planexec.Executor
	for range 3 {
		// Each replica has its own ladder, with the same grant: only the
		// store sees what they all spent.
		ladder := grantsLadder(t, grantsRefunds(planexec.LevelActWithinLimits, "100.00", time.Hour))
		ex, gate := hExecutor(t, r, st, func(c *planexec.Config) { c.Ladder = ladder })
		gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Deny("ops", "over the ceiling") }
		executors = append(executors, ex)
	}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			run := hRun(t, executors[i%3], "acme", fmt.Sprint("refund-", i))
			_, _ = run.Execute(ctx, iOne(grantsRefund("r1", fmt.Sprint("O-", i), "10.00")))
		})
	}
	wg.Wait()
	if n := callsOf(r, "refund"); n != 10 {
		t.Errorf("%d refunds of 10.00 ran under a ceiling of 100.00 shared by three executors, want 10", n)
	}
	spent, err := st.Spent(ctx, "g-refunds", time.Now(), time.Hour, nil)
	if err != nil || !spent.Equal(decimal.RequireFromString("100")) {
		t.Errorf("the store counted %s, %v; want 100", spent, err)
	}
}

func TestRecoverResumesRunsThatStoppedAndLeavesOthersBe(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	clk := planexec.NewFakeClock()
	ex, _ := hExecutor(t, r, st, func(c *planexec.Config) { c.Now = clk.Now; c.Lease = time.Minute })

	// Interrupted: its context was cancelled before its step ran.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := hRun(t, ex, "acme", "stopped").Execute(cancelled, iOne(iSearch("s1", "LHR"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped: %v", err)
	}
	// Left running by an executor that died: a record saying running, under
	// a lease that runs out.
	deadPlan := iOne(iSearch("s1", "JFK"))
	deadPlan.ID, deadPlan.Revision = "p-dead", 1
	dead := storedPlan(t, "globex", "dead", deadPlan, store.RunRunning)
	dead.Delegation = []byte(`{"run_id":"dead","tenant":"globex","user":"dana","scope":null}`)
	dead.Holder, dead.LeaseExpires = "a-dead-replica", clk.Now().Add(time.Minute)
	if err := st.SavePlan(ctx, dead); err != nil {
		t.Fatal(err)
	}
	// Finished, and waiting for a person: nothing to recover.
	if _, err := hRun(t, ex, "acme", "done").Execute(ctx, iOne(iSearch("s1", "CDG"))); err != nil {
		t.Fatal(err)
	}

	got, err := ex.Recover(ctx, 0)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if len(got) != 1 || got[0].RunID != "stopped" || got[0].Err != nil || !got[0].Result.Complete {
		t.Fatalf("Recover before the dead replica's lease ran out = %+v, want the interrupted run, complete", got)
	}
	clk.Advance(time.Minute)
	got, err = ex.Recover(ctx, 0)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if len(got) != 1 || got[0].Tenant != "globex" || got[0].RunID != "dead" || got[0].Err != nil || !got[0].Result.Complete {
		t.Fatalf("Recover after the lease ran out = %+v, want globex's dead run, complete", got)
	}
	if n := callsOf(r, "search_flights"); n != 3 {
		t.Errorf("searches run: %d, want 3 (done, stopped, dead once each)", n)
	}
	if again, err := ex.Recover(ctx, 0); err != nil || len(again) != 0 {
		t.Errorf("a second Recover found %+v, %v; want nothing left", again, err)
	}
}

func TestReplicasRecoveringAtOnceResumeEachRunOnce(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	ex, _ := hExecutor(t, r, st, nil)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for i := range 10 {
		_, _ = hRun(t, ex, "acme", fmt.Sprint("run-", i)).Execute(cancelled, iOne(iSearch("s1", fmt.Sprintf("A%02d", i))))
	}
	var mu sync.Mutex
	resumed := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		replica, _ := hExecutor(t, r, st, nil)
		wg.Go(func() {
			got, err := replica.Recover(ctx, 0)
			if err != nil {
				t.Errorf("Recover: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, g := range got {
				resumed[g.RunID]++
			}
		})
	}
	wg.Wait()
	if len(resumed) != 10 {
		t.Errorf("%d runs recovered, want 10", len(resumed))
	}
	for id, n := range resumed {
		if n != 1 {
			t.Errorf("run %s was resumed %d times", id, n)
		}
	}
	if n := callsOf(r, "search_flights"); n != 10 {
		t.Errorf("%d searches ran, want 10", n)
	}
}

func TestPruneDropsWhatFinishedLongAgoAndRefusesToForgetALiveWindow(t *testing.T) {
	ctx := context.Background()
	clk := planexec.NewFakeClock()
	st := memory.New(memory.WithClock(clk.Now))
	r := &recorder{}
	ex, gate := hExecutor(t, r, st, func(c *planexec.Config) { c.Now = clk.Now })
	if _, err := hRun(t, ex, "acme", "old").Execute(ctx, iOne(iSearch("s1", "LHR"))); err != nil {
		t.Fatal(err)
	}
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }
	if _, err := hRun(t, ex, "acme", "waiting").Execute(ctx, tripPlan()); !errors.As(err, new(*planexec.ApprovalPendingError)) {
		t.Fatalf("waiting: %v", err)
	}
	clk.Advance(planexec.DefaultRetention + time.Hour)
	gate.answer = nil
	if _, err := hRun(t, ex, "acme", "new").Execute(ctx, iOne(iSearch("s1", "JFK"))); err != nil {
		t.Fatal(err)
	}

	pruned, err := ex.Prune(ctx, "acme", 0)
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if pruned.Runs != 1 {
		t.Errorf("Prune = %+v, want the old run dropped", pruned)
	}
	page, err := ex.Runs(ctx, "acme", planexec.RunQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if ids := lIDs(page.Runs); len(ids) != 2 || ids[0] != "new" || ids[1] != "waiting" {
		t.Errorf("after Prune the runs are %v, want [new waiting]", ids)
	}
	if h, err := hRun(t, ex, "acme", "old").History(ctx, 0, 10); err != nil || len(h) != 0 {
		t.Errorf("the pruned run's history: %d events, %v", len(h), err)
	}

	// A ladder whose grant counts a week: a retention of a day would forget
	// what it spent within it.
	ladder := grantsLadder(t, grantsRefunds(planexec.LevelActWithinLimits, "100.00", 7*24*time.Hour))
	withLadder, _ := hExecutor(t, r, st, func(c *planexec.Config) { c.Ladder = ladder })
	if _, err := withLadder.Prune(ctx, "acme", 24*time.Hour); !errors.As(err, new(*planexec.ConfigurationError)) {
		t.Errorf("Prune with a retention shorter than a ceiling's window: err = %v, want a *ConfigurationError", err)
	}
}

func TestALiveExecutionKeepsItsRunFromRecoveryWhileAStepOutlastsTheLease(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	held := newHoldFirst()
	r := &recorder{fail: func(string, any) error { held.hold(); return nil }}
	const lease = 300 * time.Millisecond
	ex, _ := hExecutor(t, r, st, func(c *planexec.Config) { c.Lease = lease })
	done := make(chan error, 1)
	go func() {
		_, err := hRun(t, ex, "acme", "run-1").Execute(ctx, iOne(iSearch("s1", "LHR")))
		done <- err
	}()
	<-held.entered
	// Several leases go by while the step runs: the run's lease is moved on.
	time.Sleep(3 * lease)
	other, _ := hExecutor(t, r, st, func(c *planexec.Config) { c.Lease = lease })
	got, err := other.Recover(ctx, 0)
	held.open()
	if err != nil || len(got) != 0 {
		t.Errorf("Recover while the run is live = %+v, %v; want nothing", got, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Execute: %v", err)
	}
	rec, err := st.LoadPlan(ctx, "acme", "run-1")
	if err != nil || rec.Status != planexec.RunCompleted || rec.Holder != "" || !rec.LeaseExpires.IsZero() {
		t.Errorf("the finished run = status %s holder %q lease %v (%v); want completed, held by nobody", rec.Status, rec.Holder, rec.LeaseExpires, err)
	}
}
