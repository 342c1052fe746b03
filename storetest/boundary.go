package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// expectNoRecord fails unless err is store.ErrNoRecord as a store's answer,
// not wrapped in a *store.Error: a caller takes a *store.Error for a store
// that could not do what was asked, and tries again later, which for a run
// or key that is not there would never end.
func expectNoRecord(t *testing.T, what string, err error) {
	t.Helper()
	var se *store.Error
	switch {
	case !errors.Is(err, store.ErrNoRecord):
		t.Errorf("%s: %v, want ErrNoRecord", what, err)
	case errors.As(err, &se):
		t.Errorf("%s: %v, want ErrNoRecord itself, not a *store.Error: nothing failed", what, err)
	}
}

// microsecond is the clock's time cut to the microsecond, the finest the
// executor writes a time at.
func (k kit) microsecond() time.Time { return k.clk.Now().Truncate(time.Microsecond) }

// runBoundaries checks the SPI's rules at their edges: SavePlan with Update
// writing nothing for a run that is gone, Resolve by none but the run that
// took the key last, Spent's except, one decision of many made at once,
// waits' details, limits a caller passes (never trusted: the largest reads
// the rest, a negative one nothing), and times, which the executor writes
// to the microsecond and every store gives back and compares exactly; a
// claim that only peeks, a spend of a step acting again, saves of a run
// fenced by the execution that holds it, and by the revision they are
// based on.
func runBoundaries(t *testing.T, open Open) {
	runUpdateBoundaries(t, open)
	runResolveBoundaries(t, open)
	runCeilingBoundaries(t, open)
	runDecisionBoundaries(t, open)
	runWaitBoundaries(t, open)
	runLimitBoundaries(t, open)
	runTimeBoundaries(t, open)
	runPeekBoundaries(t, open)
	runSpendMoveBoundaries(t, open)
	runHolderBoundaries(t, open)
	runHolderRaceBoundaries(t, open)
	runRevisionBoundaries(t, open)
}

func runUpdateBoundaries(t *testing.T, open Open) {
	t.Run("SavePlan with Update of a run never saved is ErrNoRecord and writes no plan, step or event", func(t *testing.T) {
		k := setup(t, open)
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())
		rec.Update, rec.Events = true, eventDocs("refused", 2)
		expectNoRecord(t, "SavePlan with Update of a run never saved", k.Plans.SavePlan(k.ctx, rec))
		if got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("LoadPlan after the refused SavePlan = %s, %v; want ErrNoRecord", showRun(got), err)
		}
		// A run made by the refused save would take a step.
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", k.clk.Now())); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("SaveStep after the refused SavePlan: %v, want ErrNoRecord", err)
		}
		k.expectNoHistory(t, "acme", "run-1")
		if _, ok := k.lister(); ok {
			if got := k.listAll(t, "acme", nil, 10); len(got) != 0 {
				t.Errorf("the refused SavePlan listed %+v", got)
			}
		}
	})

	t.Run("SavePlan without Update creates the run, and with Update replaces it", func(t *testing.T) {
		k := setup(t, open)
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan without Update: %v", err)
		}
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", k.clk.Now())); err != nil {
			t.Fatalf("SaveStep: %v", err)
		}
		k.clk.Advance(time.Second)
		rec.Update, rec.Rev, rec.Status, rec.Updated = true, k.revision(t, "acme", "run-1"), store.RunCompleted, k.clk.Now()
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan with Update of the run: %v", err)
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil || got.Status != store.RunCompleted || len(got.Steps) != 1 {
			t.Errorf("after SavePlan with Update the run is %s, %v; want it completed with its step", showRun(got), err)
		}
	})

	// A run read, then dropped by another (Forget, Prune), then saved by
	// the execution that read it: the save must not bring it back.
	dropped := []struct {
		name string
		drop func(t *testing.T, k kit)
	}{
		{"forgotten", func(t *testing.T, k kit) {
			if err := k.Plans.Forget(k.ctx, "acme", "run-1"); err != nil {
				t.Fatalf("Forget: %v", err)
			}
		}},
		{"pruned", func(t *testing.T, k kit) {
			p, ok := k.Plans.(store.Pruner)
			if !ok {
				t.Skip("Plans prunes nothing (store.Pruner)")
			}
			k.clk.Advance(time.Hour)
			if n, err := p.Prune(k.ctx, "acme", k.clk.Now()); err != nil || n.Runs != 1 {
				t.Fatalf("Prune = %+v, %v; want the run dropped", n, err)
			}
		}},
	}
	for _, d := range dropped {
		t.Run("A run "+d.name+" after it was read is not written back by SavePlan with Update", func(t *testing.T) {
			k := setup(t, open)
			if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunCompleted, k.clk.Now())); err != nil {
				t.Fatalf("SavePlan: %v", err)
			}
			if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", k.clk.Now())); err != nil {
				t.Fatalf("SaveStep: %v", err)
			}
			read, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
			if err != nil {
				t.Fatalf("LoadPlan: %v", err)
			}
			d.drop(t, k)
			k.clk.Advance(time.Second)
			read.Update, read.Status, read.Updated, read.Events = true, store.RunFailed, k.clk.Now(), eventDocs("late", 2)
			expectNoRecord(t, "SavePlan with Update of a run "+d.name, k.Plans.SavePlan(k.ctx, read))
			if got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); !errors.Is(err, store.ErrNoRecord) {
				t.Errorf("LoadPlan of the run %s then saved with Update = %s, %v; want ErrNoRecord", d.name, showRun(got), err)
			}
			k.expectNoHistory(t, "acme", "run-1")
		})
	}
}

// showRun renders a loaded run without its documents.
func showRun(rec *store.PlanRecord) string {
	if rec == nil {
		return "no run"
	}
	return fmt.Sprintf("{run %s/%s plan %s %s, %d steps}", rec.Tenant, rec.RunID, rec.PlanID, rec.Status, len(rec.Steps))
}

func runResolveBoundaries(t *testing.T, open Open) {
	// claimFor asks for theKey for a step of run.
	claimFor := func(t *testing.T, k kit, run, holder string, takeOver bool) store.Claim {
		t.Helper()
		c, err := k.Idempotency.Claim(k.ctx, store.ClaimRequest{Key: theKey, RunID: run, StepID: "s1", Tool: "pay", Holder: holder, Lease: lease, TakeOver: takeOver})
		if err != nil {
			t.Fatalf("Claim for %s by %s: %v", run, holder, err)
		}
		return c
	}
	acquireFor := func(t *testing.T, k kit, run, holder string, takeOver bool) store.Claim {
		t.Helper()
		c := claimFor(t, k, run, holder, takeOver)
		if c.State != store.ClaimAcquired {
			t.Fatalf("Claim for %s by %s = %s, want acquired", run, holder, showClaim(c))
		}
		return c
	}
	// look is how theKey answers a run that may not take it over: only
	// called on a key that is not free, so it takes nothing.
	look := func(t *testing.T, k kit) store.Claim {
		t.Helper()
		c := claimFor(t, k, "run-onlooker", "onlooker", false)
		if c.State == store.ClaimAcquired {
			t.Fatalf("an onlooker took the key: %s", showClaim(c))
		}
		return c
	}
	resolutions := []store.Resolution{{Applied: true, Outcome: json.RawMessage(`"from another run"`)}, {Applied: false}}
	// refuse fails unless each of others resolving theKey, either way, is
	// ErrNoRecord, and the key answers as before.
	refuse := func(t *testing.T, k kit, others ...string) {
		t.Helper()
		before := look(t, k)
		for _, run := range others {
			for _, r := range resolutions {
				expectNoRecord(t, fmt.Sprintf("Resolve (applied %v) by run %q, which did not take the key last", r.Applied, run),
					k.Idempotency.Resolve(k.ctx, theKey, run, r))
			}
		}
		if after := look(t, k); !SameClaim(after, before) {
			t.Errorf("the refused resolutions changed the key: %s, was %s", showClaim(after), showClaim(before))
		}
	}

	cases := []struct {
		name  string
		leave func(t *testing.T, k kit, c store.Claim)
		// then checks that run-1, which holds the key, resolves it as
		// before, or that its holder still holds it.
		then func(t *testing.T, k kit, c store.Claim)
	}{
		{"held by a live holder",
			func(t *testing.T, k kit, c store.Claim) { k.clk.Advance(lease / 2) },
			func(t *testing.T, k kit, c store.Claim) {
				if err := k.Idempotency.Resolve(k.ctx, theKey, "run-1", store.Resolution{}); !errors.Is(err, store.ErrInFlight) {
					t.Errorf("Resolve by the holder's run while its lease is live: %v, want ErrInFlight", err)
				}
				// Its epoch still holds the key: nothing moved it on.
				if err := k.Idempotency.Complete(k.ctx, theKey, c.Epoch, json.RawMessage(`"PNR-A"`)); err != nil {
					t.Errorf("the holder's Complete after the refused resolutions: %v", err)
				}
				k.expectCompleted(t, theKey, `"PNR-A"`)
			}},
		{"released in doubt",
			func(t *testing.T, k kit, c store.Claim) {
				if err := k.Idempotency.Release(k.ctx, theKey, c.Epoch, true); err != nil {
					t.Fatalf("Release in doubt: %v", err)
				}
			},
			func(t *testing.T, k kit, c store.Claim) {
				if err := k.Idempotency.Resolve(k.ctx, theKey, "run-1", store.Resolution{Applied: true, Outcome: json.RawMessage(`"PNR-FOUND"`)}); err != nil {
					t.Fatalf("Resolve by the run that took the key: %v", err)
				}
				k.expectCompleted(t, theKey, `"PNR-FOUND"`)
			}},
		{"whose holder's lease ran out",
			func(t *testing.T, k kit, c store.Claim) { k.clk.Advance(lease + time.Second) },
			func(t *testing.T, k kit, c store.Claim) {
				if err := k.Idempotency.Resolve(k.ctx, theKey, "run-1", store.Resolution{}); err != nil {
					t.Fatalf("Resolve by the run that took the key: %v", err)
				}
				k.expectFenced(t, theKey, c.Epoch, "the holder whose lease ran out")
				if again := acquireFor(t, k, "run-1", "worker-b", false); again.Epoch <= c.Epoch {
					t.Errorf("claim after the resolution at epoch %d, want above %d", again.Epoch, c.Epoch)
				}
			}},
		{"completed",
			func(t *testing.T, k kit, c store.Claim) {
				if err := k.Idempotency.Complete(k.ctx, theKey, c.Epoch, json.RawMessage(`"PNR-A"`)); err != nil {
					t.Fatalf("Complete: %v", err)
				}
			},
			func(t *testing.T, k kit, c store.Claim) {
				if err := k.Idempotency.Resolve(k.ctx, theKey, "run-1", store.Resolution{}); !errors.Is(err, store.ErrCompleted) {
					t.Errorf("Resolve by the run that took the key: %v, want ErrCompleted", err)
				}
				k.expectCompleted(t, theKey, `"PNR-A"`)
			}},
	}
	for _, c := range cases {
		t.Run("Resolve by a run that did not take the key last is ErrNoRecord and leaves the claim as it was: a key "+c.name, func(t *testing.T) {
			k := setup(t, open)
			held := acquireFor(t, k, "run-1", "worker-a", false)
			c.leave(t, k, held)
			refuse(t, k, "run-2", "")
			c.then(t, k, held)
		})
	}

	t.Run("A key taken by another run, freed or taken over, is that run's to resolve and no longer the first's", func(t *testing.T) {
		for _, how := range []string{"freed", "taken over"} {
			t.Run(how, func(t *testing.T) {
				k := setup(t, open)
				first := acquireFor(t, k, "run-1", "worker-a", true)
				if how == "freed" {
					if err := k.Idempotency.Release(k.ctx, theKey, first.Epoch, false); err != nil {
						t.Fatalf("Release: %v", err)
					}
				} else {
					k.clk.Advance(lease + time.Second)
				}
				second := acquireFor(t, k, "run-2", "worker-b", true)
				if err := k.Idempotency.Release(k.ctx, theKey, second.Epoch, true); err != nil {
					t.Fatalf("Release in doubt: %v", err)
				}
				refuse(t, k, "run-1")
				if err := k.Idempotency.Resolve(k.ctx, theKey, "run-2", store.Resolution{Applied: true, Outcome: json.RawMessage(`"PNR-2"`)}); err != nil {
					t.Fatalf("Resolve by the run that took the key last: %v", err)
				}
				k.expectCompleted(t, theKey, `"PNR-2"`)
			})
		}
	})

	t.Run("A claim that did not take the key does not make its run the one to resolve it", func(t *testing.T) {
		k := setup(t, open)
		held := acquireFor(t, k, "run-1", "worker-a", false)
		for _, takeOver := range []bool{false, true} {
			if c := claimFor(t, k, "run-2", "worker-b", takeOver); c.State != store.ClaimHeld {
				t.Fatalf("Claim for run-2 (TakeOver %v) while run-1 holds the key = %s, want held", takeOver, showClaim(c))
			}
		}
		if err := k.Idempotency.Release(k.ctx, theKey, held.Epoch, true); err != nil {
			t.Fatalf("Release in doubt: %v", err)
		}
		if c := claimFor(t, k, "run-2", "worker-b", true); c.State != store.ClaimInDoubt {
			t.Fatalf("Claim for run-2 of the key in doubt = %s, want in doubt", showClaim(c))
		}
		// Straight after run-2's claims: no other claim comes between.
		for _, r := range resolutions {
			expectNoRecord(t, fmt.Sprintf("Resolve (applied %v) by run-2, whose claims found the key taken", r.Applied),
				k.Idempotency.Resolve(k.ctx, theKey, "run-2", r))
		}
		if err := k.Idempotency.Resolve(k.ctx, theKey, "run-1", store.Resolution{}); err != nil {
			t.Fatalf("Resolve by the run that took the key: %v", err)
		}
	})
}

func runCeilingBoundaries(t *testing.T, open Open) {
	t.Run("Spent leaves out the spends of the keys in except, and none for a nil or empty except", func(t *testing.T) {
		k := setup(t, open)
		c, ok := k.Plans.(store.CeilingStore)
		if !ok {
			t.Skip("Plans counts no ceilings (store.CeilingStore)")
		}
		d := decimal.RequireFromString
		const window = time.Hour
		at := k.microsecond()
		for _, sp := range []store.Spend{
			{Tenant: "acme", Grant: "g", Key: "k0", Amount: d("80"), At: at.Add(-2 * window)}, // outside the window
			{Tenant: "acme", Grant: "g", Key: "k1", Amount: d("1.25"), At: at},
			{Tenant: "acme", Grant: "g", Key: "k2", Amount: d("20"), At: at},
			{Tenant: "acme", Grant: "g", Key: "k3", Amount: d("400"), At: at.Add(time.Second)},
			{Tenant: "acme", Grant: "other", Key: "k2", Amount: d("7000"), At: at},
		} {
			if err := c.Spend(k.ctx, sp, window, d("10000")); err != nil {
				t.Fatalf("Spend %s of %s: %v", sp.Key, sp.Grant, err)
			}
		}
		for _, tc := range []struct {
			except []string
			want   string
		}{
			{nil, "421.25"},
			{[]string{}, "421.25"},
			{[]string{"k2"}, "401.25"},
			{[]string{"k1", "k3"}, "20"},
			{[]string{"k3", "k2", "k1"}, "0"},
			{[]string{"k0", "nobody's"}, "421.25"},
		} {
			got, err := c.Spent(k.ctx, "g", at, window, tc.except)
			if err != nil || !got.Equal(d(tc.want)) {
				t.Errorf("Spent except %q = %s, %v; want %s", tc.except, got, err, tc.want)
			}
		}
	})
}

func runDecisionBoundaries(t *testing.T, open Open) {
	t.Run("Of people approving and denying one request at once, exactly one decides it, and the decision recorded is theirs", func(t *testing.T) {
		k := setup(t, open)
		const people, requests = 8, 4
		for r := range requests {
			id := fmt.Sprint("rec-", r)
			at := k.microsecond()
			decisions := make([]planexec.Decision, people)
			for i := range decisions {
				decisions[i] = planexec.Decision{RequestID: id, Status: planexec.Approved, Approver: fmt.Sprint("person-", i), DecidedAt: at}
				switch i % 3 {
				case 1:
					decisions[i].Expires = at.Add(time.Hour)
				case 2:
					decisions[i].Status, decisions[i].Why = planexec.Denied, fmt.Sprint("no, says person-", i)
				}
			}
			errs := make([]error, people)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, d := range decisions {
				wg.Go(func() {
					<-start
					errs[i] = k.Approvals.SaveDecision(k.ctx, "acme", d)
				})
			}
			close(start)
			wg.Wait()
			won := -1
			for i, err := range errs {
				switch {
				case err == nil && won >= 0:
					t.Errorf("%s: both %s and %s were recorded", id, decisions[won].Approver, decisions[i].Approver)
				case err == nil:
					won = i
				case !errors.Is(err, store.ErrDecided):
					t.Errorf("%s: SaveDecision by %s: %v, want nil or ErrDecided", id, decisions[i].Approver, err)
				}
			}
			if won < 0 {
				t.Errorf("%s: no decision was recorded", id)
				continue
			}
			got, err := k.Approvals.Decision(k.ctx, "acme", id)
			if err != nil {
				t.Fatalf("Decision %s: %v", id, err)
			}
			for _, diff := range diffDecision(got, decisions[won]) {
				t.Errorf("%s, recorded for %s, the one that succeeded: %s", id, decisions[won].Approver, diff)
			}
		}
	})
}

func runWaitBoundaries(t *testing.T, open Open) {
	t.Run("What a run waits for comes back with its detail as the same JSON, from LoadPlan and from ListRuns, and a call with its key", func(t *testing.T) {
		k := setup(t, open)
		// waits are what the run waits for, each time anew: the store
		// must keep its own copy of each detail.
		waits := func() []store.Wait {
			return []store.Wait{
				{StepID: "s2", Tool: "book_flight", Request: "sha256:req", Detail: json.RawMessage("{\"request\" : {\"id\":\"sha256:req\",\n" +
					`"arguments": {"fare":412.50,"big":9007199254740993,"note":"<a & b> \u0000 \ud83d\ude00 \u2028"}}, "tiny": 1e-30}`)},
				{StepID: "s3", Tool: "confirm", Call: "call_1", Key: "sha256:k3", Detail: json.RawMessage(`{"call":{"id":"call_1","args":[1,2.0,"x",null,true,{}]}}`)},
				{StepID: "s4", Tool: "pay", Key: "sha256:k4"},
			}
		}
		scribble := func(ws []store.Wait) {
			for _, w := range ws {
				copy(w.Detail, `{"XXX":`)
			}
		}
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunAwaitingTool, k.clk.Now())
		rec.Waiting = waits()
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		scribble(rec.Waiting) // the caller reuses its buffers
		for i := range 2 {
			got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
			if err != nil {
				t.Fatalf("LoadPlan: %v", err)
			}
			if !sameWaits(got.Waiting, waits()) {
				t.Errorf("LoadPlan %d: waits %s, want %s", i+1, showWaits(got.Waiting), showWaits(waits()))
			}
			scribble(got.Waiting) // the reader scribbles on what it loaded
		}
		if _, ok := k.lister(); !ok {
			return
		}
		for i := range 2 {
			listed := k.listAll(t, "acme", []store.RunStatus{store.RunAwaitingTool}, 10)
			if len(listed) != 1 {
				t.Fatalf("ListRuns %d: %+v, want run-1", i+1, listed)
			}
			if !sameWaits(listed[0].Waiting, waits()) {
				t.Errorf("ListRuns %d: waits %s, want %s", i+1, showWaits(listed[0].Waiting), showWaits(waits()))
			}
			scribble(listed[0].Waiting)
		}
	})
}

// showWaits renders waits with their details as text.
func showWaits(ws []store.Wait) string {
	s := "["
	for i, w := range ws {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("{%s %s request %q key %q call %q detail %s}", w.StepID, w.Tool, w.Request, w.Key, w.Call, w.Detail)
	}
	return s + "]"
}

func runLimitBoundaries(t *testing.T, open Open) {
	negative := []int{-1, math.MinInt}

	t.Run("Events with a limit of math.MaxInt gives the rest of the history, and with a negative limit none", func(t *testing.T) {
		k := setup(t, open)
		h, ok := k.history()
		if !ok {
			t.Skip("Plans keeps no histories (store.EventStore)")
		}
		docs := eventDocs("e", 5)
		if err := h.AppendEvents(k.ctx, "acme", "run-1", docs); err != nil {
			t.Fatalf("AppendEvents: %v", err)
		}
		readToTheEnd(t, "Events", docs, func(after int64, limit int) ([]int64, [][]byte, error) {
			got, err := h.Events(k.ctx, "acme", "run-1", after, limit)
			seqs, read := make([]int64, len(got)), make([][]byte, len(got))
			for i, e := range got {
				seqs[i], read[i] = e.Seq, e.Event
			}
			return seqs, read, err
		})
	})

	t.Run("ListRuns with a limit of math.MaxInt lists every run asked for, and with a negative limit none", func(t *testing.T) {
		k := setup(t, open)
		l, ok := k.lister()
		if !ok {
			t.Skip("Plans does not list runs (store.RunLister)")
		}
		statuses := []store.RunStatus{store.RunCompleted, store.RunFailed, store.RunCompleted, store.RunInterrupted}
		for i, st := range statuses {
			if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", fmt.Sprint("run-", i), samplePlan("plan-1"), st, k.clk.Now())); err != nil {
				t.Fatalf("SavePlan: %v", err)
			}
			k.clk.Advance(time.Second)
		}
		ids := func(rs []store.RunSummary) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r.RunID)
			}
			return out
		}
		for _, tc := range []struct {
			q    store.RunQuery
			want []string
		}{
			{store.RunQuery{}, []string{"run-3", "run-2", "run-1", "run-0"}},
			{store.RunQuery{Statuses: []store.RunStatus{store.RunCompleted}}, []string{"run-2", "run-0"}},
			{store.RunQuery{Statuses: []store.RunStatus{store.RunCompleted, store.RunFailed}}, []string{"run-2", "run-1", "run-0"}},
		} {
			q := tc.q
			q.Limit = math.MaxInt
			got, err := l.ListRuns(k.ctx, "acme", q)
			if err != nil || !slices.Equal(ids(got), tc.want) {
				t.Errorf("ListRuns of %v, limit math.MaxInt = %v, %v; want %v", q.Statuses, ids(got), err, tc.want)
				continue
			}
			// From a cursor too: the rest after the first.
			q.AfterUpdated, q.AfterRunID = got[0].Updated, got[0].RunID
			if got, err := l.ListRuns(k.ctx, "acme", q); err != nil || !slices.Equal(ids(got), tc.want[1:]) {
				t.Errorf("ListRuns of %v after %s, limit math.MaxInt = %v, %v; want %v", q.Statuses, tc.want[0], ids(got), err, tc.want[1:])
			}
			for _, limit := range negative {
				q := tc.q
				q.Limit = limit
				if got, err := l.ListRuns(k.ctx, "acme", q); err != nil || len(got) != 0 {
					t.Errorf("ListRuns of %v, limit %d = %v, %v; want none, no error", q.Statuses, limit, ids(got), err)
				}
			}
		}
	})

	t.Run("Stalled with a limit of math.MaxInt lists every stalled run, and with a negative limit none", func(t *testing.T) {
		k := setup(t, open)
		r, ok := k.Plans.(store.Recoverer)
		if !ok {
			t.Skip("Plans recovers nothing (store.Recoverer)")
		}
		for _, run := range []string{"run-1", "run-2", "run-3"} {
			if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", run, samplePlan("plan-1"), store.RunInterrupted, k.clk.Now())); err != nil {
				t.Fatalf("SavePlan: %v", err)
			}
		}
		if got, err := r.Stalled(k.ctx, k.clk.Now(), math.MaxInt); err != nil || len(got) != 3 {
			t.Errorf("Stalled, limit math.MaxInt = %+v, %v; want the 3 stalled runs", got, err)
		}
		for _, limit := range negative {
			if got, err := r.Stalled(k.ctx, k.clk.Now(), limit); err != nil || len(got) != 0 {
				t.Errorf("Stalled, limit %d = %+v, %v; want none, no error", limit, got, err)
			}
		}
	})

	t.Run("Transcript with a limit of math.MaxInt gives the rest of the transcript, and with a negative limit none", func(t *testing.T) {
		k := setup(t, open)
		ts, ok := k.transcripts()
		if !ok {
			t.Skip("Plans keeps no conversations (store.TranscriptStore)")
		}
		if err := ts.CreateSession(k.ctx, store.SessionRecord{Tenant: "acme", ID: "s-1", Doc: sessionDoc("tea")}); err != nil {
			t.Fatalf("CreateSession: %v", err)
		}
		docs := entryDocs("e", 4)
		if _, err := ts.AppendEntries(k.ctx, "acme", "s-1", docs); err != nil {
			t.Fatalf("AppendEntries: %v", err)
		}
		readToTheEnd(t, "Transcript", docs, func(after int64, limit int) ([]int64, [][]byte, error) {
			got, err := ts.Transcript(k.ctx, "acme", "s-1", after, limit)
			seqs, read := make([]int64, len(got)), make([][]byte, len(got))
			for i, e := range got {
				seqs[i], read[i] = e.Seq, e.Entry
			}
			return seqs, read, err
		})
	})
}

// readToTheEnd checks a numbered read of docs (a history, a transcript):
// with a limit of math.MaxInt it gives everything after `after`, numbered
// on, however large after is; with a negative limit, nothing. read gives
// each document read with its number.
func readToTheEnd(t *testing.T, what string, docs []json.RawMessage, read func(after int64, limit int) ([]int64, [][]byte, error)) {
	t.Helper()
	n := int64(len(docs))
	for _, after := range []int64{0, 1, n - 1} {
		seqs, got, err := read(after, math.MaxInt)
		if err != nil || int64(len(got)) != n-after {
			t.Errorf("%s after %d, limit math.MaxInt = %d documents, %v; want the %d after it", what, after, len(got), err, n-after)
			continue
		}
		for i := range got {
			if want := after + int64(i) + 1; seqs[i] != want || string(got[i]) != string(docs[want-1]) {
				t.Errorf("%s: document %d after %d = %d %s, want %d %s", what, i, after, seqs[i], got[i], want, docs[want-1])
			}
		}
	}
	for _, after := range []int64{n, math.MaxInt64} {
		if _, got, err := read(after, math.MaxInt); err != nil || len(got) != 0 {
			t.Errorf("%s after %d of %d, limit math.MaxInt = %d documents, %v; want none, no error", what, after, n, len(got), err)
		}
	}
	for _, limit := range []int{-1, math.MinInt} {
		if _, got, err := read(1, limit); err != nil || len(got) != 0 {
			t.Errorf("%s with limit %d = %d documents, %v; want none, no error", what, limit, len(got), err)
		}
	}
}

func runTimeBoundaries(t *testing.T, open Open) {
	t.Run("Every time the executor writes at a microsecond comes back exactly", func(t *testing.T) {
		k := setup(t, open)
		at := k.microsecond()
		created, updated := at, at.Add(time.Second+7*time.Microsecond)
		expires := at.Add(time.Minute + 13*time.Microsecond)
		finished := at.Add(500*time.Millisecond + 3*time.Microsecond) // before updated: it does not move it
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, created)
		rec.Updated, rec.Holder, rec.LeaseExpires = updated, "worker-1", expires
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", finished)); err != nil {
			t.Fatalf("SaveStep: %v", err)
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		exact := func(what string, got, want time.Time) {
			t.Helper()
			if !got.Equal(want) {
				t.Errorf("%s = %v, want %v exactly", what, got, want)
			}
		}
		exact("Created", got.Created, created)
		exact("Updated", got.Updated, updated)
		exact("LeaseExpires", got.LeaseExpires, expires)
		exact("a step's Finished", got.Steps["s1"].Finished, finished)
		if _, ok := k.lister(); ok {
			listed := k.listAll(t, "acme", nil, 10)
			if len(listed) != 1 {
				t.Fatalf("listed %+v, want run-1", listed)
			}
			exact("Created as listed", listed[0].Created, created)
			exact("Updated as listed", listed[0].Updated, updated)
			exact("LeaseExpires as listed", listed[0].LeaseExpires, expires)
		}
		d := planexec.Decision{RequestID: "rec-1", Status: planexec.Approved, Approver: "dana", DecidedAt: at.Add(2 * time.Microsecond),
			Expires: at.Add(time.Hour + 9*time.Microsecond)}
		if err := k.Approvals.SaveDecision(k.ctx, "acme", d); err != nil {
			t.Fatalf("SaveDecision: %v", err)
		}
		if gotD, err := k.Approvals.Decision(k.ctx, "acme", "rec-1"); err != nil {
			t.Errorf("Decision: %v", err)
		} else {
			exact("DecidedAt", gotD.DecidedAt, d.DecidedAt)
			exact("Expires", gotD.Expires, d.Expires)
		}
	})

	t.Run("Paging after a run goes on with the run updated a microsecond before it", func(t *testing.T) {
		k := setup(t, open)
		if _, ok := k.lister(); !ok {
			t.Skip("Plans does not list runs (store.RunLister)")
		}
		at := k.microsecond()
		// run-c is the latest, then run-b and run-a a microsecond apart: by
		// their run ids alone, as a store keeping milliseconds would tie
		// them, they would be listed the other way.
		for i, run := range []string{"run-a", "run-b", "run-c"} {
			if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", run, samplePlan("plan-1"), store.RunCompleted, at.Add(time.Duration(i)*time.Microsecond))); err != nil {
				t.Fatalf("SavePlan: %v", err)
			}
		}
		var got []string
		for _, r := range k.listAll(t, "acme", nil, 1) {
			got = append(got, r.RunID)
		}
		if want := []string{"run-c", "run-b", "run-a"}; !slices.Equal(got, want) {
			t.Errorf("pages of one listed %v, want %v", got, want)
		}
	})

	t.Run("A spend at exactly at-window is outside the window and one a microsecond later inside, to Spend and to Spent", func(t *testing.T) {
		k := setup(t, open)
		c, ok := k.Plans.(store.CeilingStore)
		if !ok {
			t.Skip("Plans counts no ceilings (store.CeilingStore)")
		}
		d := decimal.RequireFromString
		const window = time.Hour
		at := k.microsecond()
		spend := func(key, amount string, when time.Time) error {
			return c.Spend(k.ctx, store.Spend{Tenant: "acme", Grant: "g", Key: key, Amount: d(amount), At: when}, window, d("100"))
		}
		if err := spend("edge", "1", at.Add(-window)); err != nil {
			t.Fatal(err)
		}
		if err := spend("inside", "10", at.Add(-window+time.Microsecond)); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Spent(k.ctx, "g", at, window, nil); err != nil || !got.Equal(d("10")) {
			t.Errorf("Spent = %s, %v; want 10, the spend a microsecond inside the window and not the one at its edge", got, err)
		}
		// 10 inside and 90 more is the ceiling: the spend at the edge must
		// not count.
		if err := spend("up-to", "90", at); err != nil {
			t.Errorf("a spend that reaches the ceiling with the spend inside the window: %v", err)
		}
		// And the spend inside must.
		if err := spend("past", "0.01", at); !errors.Is(err, store.ErrCeiling) {
			t.Errorf("a spend 0.01 past the ceiling: %v, want ErrCeiling", err)
		}
	})

	t.Run("An approval stands until the microsecond it expires, and gives way at it", func(t *testing.T) {
		k := setup(t, open)
		at := k.microsecond()
		expires := at.Add(time.Hour + 5*time.Microsecond)
		approved := planexec.Decision{RequestID: "rec-1", Status: planexec.Approved, Approver: "dana", DecidedAt: at, Expires: expires}
		if err := k.Approvals.SaveDecision(k.ctx, "acme", approved); err != nil {
			t.Fatalf("SaveDecision: %v", err)
		}
		denied := planexec.Decision{RequestID: "rec-1", Status: planexec.Denied, Approver: "lee", Why: "late", DecidedAt: expires.Add(-time.Microsecond)}
		if err := k.Approvals.SaveDecision(k.ctx, "acme", denied); !errors.Is(err, store.ErrDecided) {
			t.Errorf("a denial a microsecond before the approval expires: %v, want ErrDecided", err)
		}
		denied.DecidedAt = expires
		if err := k.Approvals.SaveDecision(k.ctx, "acme", denied); err != nil {
			t.Errorf("a denial as the approval expires: %v", err)
		}
		if got, err := k.Approvals.Decision(k.ctx, "acme", "rec-1"); err != nil || got.Status != planexec.Denied {
			t.Errorf("Decision = %+v, %v; want the denial", got, err)
		}
	})

	t.Run("A running run is stalled from the microsecond its lease ends, not a microsecond before", func(t *testing.T) {
		k := setup(t, open)
		r, ok := k.Plans.(store.Recoverer)
		if !ok {
			t.Skip("Plans recovers nothing (store.Recoverer)")
		}
		at := k.microsecond()
		expires := at.Add(time.Minute + 11*time.Microsecond)
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, at)
		rec.Holder, rec.LeaseExpires = "worker-1", expires
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		ref := store.RunRef{Tenant: "acme", RunID: "run-1"}
		before := expires.Add(-time.Microsecond)
		if got, err := r.Stalled(k.ctx, before, 10); err != nil || len(got) != 0 {
			t.Errorf("Stalled a microsecond before the lease ends = %+v, %v; want none", got, err)
		}
		if took, err := r.TakeRun(k.ctx, ref, "worker-2", before, time.Minute); err != nil || took {
			t.Errorf("TakeRun a microsecond before the lease ends = %v, %v; want false", took, err)
		}
		if got, err := r.Stalled(k.ctx, expires, 10); err != nil || len(got) != 1 || got[0] != ref {
			t.Errorf("Stalled as the lease ends = %+v, %v; want run-1", got, err)
		}
		if took, err := r.TakeRun(k.ctx, ref, "worker-2", expires, time.Minute); err != nil || !took {
			t.Errorf("TakeRun as the lease ends = %v, %v; want true", took, err)
		}
	})
}

func runPeekBoundaries(t *testing.T, open Open) {
	// peek asks what theKey holds for a step of a run that never took it,
	// taking nothing.
	peek := func(t *testing.T, k kit, takeOver bool) store.Claim {
		t.Helper()
		c, err := k.Idempotency.Claim(k.ctx, store.ClaimRequest{Key: theKey, RunID: "run-peek", StepID: "s1", Tool: "pay", Holder: "peeker", Lease: lease,
			TakeOver: takeOver, Peek: true})
		if err != nil {
			t.Fatalf("a peek (TakeOver %v): %v", takeOver, err)
		}
		return c
	}
	// claims is what claims of theKey get, one after another: a look by a
	// caller that may not take it over, then a claim by one that may.
	claims := func(t *testing.T, k kit) []store.Claim {
		t.Helper()
		var out []store.Claim
		for _, takeOver := range []bool{false, true} {
			c, err := k.Idempotency.Claim(k.ctx, store.ClaimRequest{Key: theKey, RunID: "run-1", StepID: "s1", Tool: "pay", Holder: "worker-c", Lease: lease,
				TakeOver: takeOver})
			if err != nil {
				t.Fatalf("Claim (TakeOver %v): %v", takeOver, err)
			}
			out = append(out, c)
		}
		return out
	}
	// samePeek reports whether a peek answered as want: its state and
	// epoch, the holder of a key held or in doubt, the lease of a key held,
	// the outcome of a key completed.
	samePeek := func(got, want store.Claim) bool {
		return got.State == want.State && got.Epoch == want.Epoch && got.Holder == want.Holder &&
			(want.LeaseExpires.IsZero() || sameInstant(got.LeaseExpires, want.LeaseExpires)) &&
			(want.Outcome == nil) == (got.Outcome == nil) && (want.Outcome == nil || jsonEqual(got.Outcome, want.Outcome))
	}
	free := func(epoch int64) store.Claim { return store.Claim{State: store.ClaimFree, Epoch: epoch} }

	cases := []struct {
		name string
		// leave leaves theKey as the case says, and returns the claim
		// that took it (none for a key never claimed).
		leave func(t *testing.T, k kit) store.Claim
		// want is what a peek gets, by whether it may take the key over.
		want func(c store.Claim, takeOver bool) store.Claim
	}{
		{"never claimed",
			func(t *testing.T, k kit) store.Claim { return store.Claim{} },
			func(c store.Claim, takeOver bool) store.Claim { return free(0) }},
		{"free",
			func(t *testing.T, k kit) store.Claim {
				c := k.acquire(t, theKey, "worker-a", false)
				if err := k.Idempotency.Release(k.ctx, theKey, c.Epoch, false); err != nil {
					t.Fatalf("Release: %v", err)
				}
				return c
			},
			func(c store.Claim, takeOver bool) store.Claim { return free(c.Epoch) }},
		{"held by a live holder",
			func(t *testing.T, k kit) store.Claim {
				c := k.acquire(t, theKey, "worker-a", false)
				k.clk.Advance(lease / 2)
				return c
			},
			func(c store.Claim, takeOver bool) store.Claim {
				return store.Claim{State: store.ClaimHeld, Epoch: c.Epoch, Holder: "worker-a", LeaseExpires: c.LeaseExpires}
			}},
		{"whose holder's lease ran out",
			func(t *testing.T, k kit) store.Claim {
				c := k.acquire(t, theKey, "worker-a", false)
				k.clk.Advance(lease + time.Second)
				return c
			},
			func(c store.Claim, takeOver bool) store.Claim {
				if takeOver {
					return free(c.Epoch)
				}
				return store.Claim{State: store.ClaimInDoubt, Epoch: c.Epoch, Holder: "worker-a", LeaseExpires: c.LeaseExpires}
			}},
		{"in doubt",
			func(t *testing.T, k kit) store.Claim {
				c := k.acquire(t, theKey, "worker-a", false)
				if err := k.Idempotency.Release(k.ctx, theKey, c.Epoch, true); err != nil {
					t.Fatalf("Release in doubt: %v", err)
				}
				return c
			},
			func(c store.Claim, takeOver bool) store.Claim {
				return store.Claim{State: store.ClaimInDoubt, Epoch: c.Epoch, Holder: "worker-a"}
			}},
		{"completed",
			func(t *testing.T, k kit) store.Claim {
				c := k.acquire(t, theKey, "worker-a", false)
				if err := k.Idempotency.Complete(k.ctx, theKey, c.Epoch, json.RawMessage(`"PNR-A"`)); err != nil {
					t.Fatalf("Complete: %v", err)
				}
				return c
			},
			func(c store.Claim, takeOver bool) store.Claim {
				return store.Claim{State: store.ClaimCompleted, Epoch: c.Epoch, Outcome: json.RawMessage(`"PNR-A"`)}
			}},
	}
	for _, c := range cases {
		t.Run("A peek at a key "+c.name+" answers as a claim would, a key it would take as free, and leaves the key as it was", func(t *testing.T) {
			// Two stores left alike: one is peeked at, the other not,
			// and then claims must find the key the same in both.
			peeked, twin := setup(t, open), setup(t, open)
			took := c.leave(t, peeked)
			c.leave(t, twin)
			for range 2 {
				for _, takeOver := range []bool{false, true} {
					if got, want := peek(t, peeked, takeOver), c.want(took, takeOver); !samePeek(got, want) {
						t.Errorf("a peek (TakeOver %v) = %s, want %s", takeOver, showClaim(got), showClaim(want))
					}
				}
			}
			// Neither the peeking run nor any other came to hold the
			// key, nor did a row appear for it.
			for _, run := range []string{"run-peek", ""} {
				for _, r := range []store.Resolution{{Applied: true, Outcome: json.RawMessage(`"from a peek"`)}, {Applied: false}} {
					expectNoRecord(t, fmt.Sprintf("Resolve (applied %v) by run %q after the peeks", r.Applied, run), peeked.Idempotency.Resolve(peeked.ctx, theKey, run, r))
				}
			}
			got, want := claims(t, peeked), claims(t, twin)
			for i := range got {
				if !SameClaim(got[i], want[i]) {
					t.Errorf("claim %d after the peeks = %s, and with no peek %s: the peeks changed the key", i+1, showClaim(got[i]), showClaim(want[i]))
				}
			}
		})
	}
}

func runSpendMoveBoundaries(t *testing.T, open Open) {
	d := decimal.RequireFromString
	const window = time.Hour
	// spender is a kit's CeilingStore, spending and summing grant g.
	type spender struct {
		k kit
		c store.CeilingStore
	}
	setupSpends := func(t *testing.T) spender {
		k := setup(t, open)
		c, ok := k.Plans.(store.CeilingStore)
		if !ok {
			t.Skip("Plans counts no ceilings (store.CeilingStore)")
		}
		return spender{k, c}
	}
	spend := func(s spender, key, amount string, at time.Time) error {
		return s.c.Spend(s.k.ctx, store.Spend{Tenant: "acme", Grant: "g", Key: key, Amount: d(amount), At: at}, window, d("100"))
	}
	expectSpent := func(t *testing.T, s spender, what string, at time.Time, except []string, want string) {
		t.Helper()
		if got, err := s.c.Spent(s.k.ctx, "g", at, window, except); err != nil || !got.Equal(d(want)) {
			t.Errorf("Spent %s = %s, %v; want %s", what, got, err, want)
		}
	}

	t.Run("A spend of a key recorded already is moved to its new time and amount, where Spent counts it, once", func(t *testing.T) {
		s := setupSpends(t)
		at := s.k.microsecond()
		later := at.Add(window + time.Second)
		if err := spend(s, "k1", "30", at); err != nil {
			t.Fatalf("Spend k1: %v", err)
		}
		expectSpent(t, s, "a window and a second after k1", later, nil, "0")
		if err := spend(s, "k1", "40", later); err != nil {
			t.Fatalf("Spend k1 again, a window and a second later: %v", err)
		}
		expectSpent(t, s, "at k1's new time", later, nil, "40")
		// At its old time it counts as a later spend, at its new amount,
		// once: nothing of it is left at the old time.
		expectSpent(t, s, "at k1's old time", at, nil, "40")
	})

	t.Run("A spend of a key again at its time and amount succeeds, though the window is full, and changes nothing", func(t *testing.T) {
		s := setupSpends(t)
		at := s.k.microsecond()
		if err := spend(s, "k1", "30", at); err != nil {
			t.Fatalf("Spend k1: %v", err)
		}
		if err := spend(s, "k2", "70", at); err != nil {
			t.Fatalf("Spend k2 up to the ceiling: %v", err)
		}
		for range 2 {
			if err := spend(s, "k1", "30", at); err != nil {
				t.Errorf("Spend k1 again at its time and amount, its own record not counted: %v, want success", err)
			}
		}
		expectSpent(t, s, "after the repeats", at, nil, "100")
		expectSpent(t, s, "after the repeats, but for k2", at, []string{"k2"}, "30")
		if err := spend(s, "k3", "0.01", at); !errors.Is(err, store.ErrCeiling) {
			t.Errorf("a spend 0.01 past the ceiling after the repeats: %v, want ErrCeiling", err)
		}
	})

	t.Run("A move that would pass the ceiling in its new window is ErrCeiling and leaves the spend where it was", func(t *testing.T) {
		s := setupSpends(t)
		at := s.k.microsecond()
		later := at.Add(window + time.Second)
		if err := spend(s, "k1", "30", at); err != nil {
			t.Fatalf("Spend k1: %v", err)
		}
		// k1 is out of the window of a spend a window and a second later.
		if err := spend(s, "k2", "80", later); err != nil {
			t.Fatalf("Spend k2 a window and a second after k1: %v", err)
		}
		if err := spend(s, "k1", "30", later); !errors.Is(err, store.ErrCeiling) {
			t.Errorf("moving k1 to k2's time, 30 with k2's 80 against 100: %v, want ErrCeiling", err)
		}
		expectSpent(t, s, "at the time k1 was not moved to", later, nil, "80")
		expectSpent(t, s, "at k1's time, but for k2", at, []string{"k2"}, "30")
		expectSpent(t, s, "at k1's time", at, nil, "110")
	})
}

// expectFencedSave fails unless err is store.ErrFenced as a store's answer,
// not wrapped in a *store.Error: the run is held, and nothing failed.
func expectFencedSave(t *testing.T, what string, err error) {
	t.Helper()
	var se *store.Error
	switch {
	case !errors.Is(err, store.ErrFenced):
		t.Errorf("%s: %v, want ErrFenced", what, err)
	case errors.As(err, &se):
		t.Errorf("%s: %v, want ErrFenced itself, not a *store.Error: nothing failed", what, err)
	}
}

func runHolderBoundaries(t *testing.T, open Open) {
	const runLease = time.Minute
	// heldBy is run-1 saved by holder, running under a lease from now
	// (none when expires is zero: the save lets the run go).
	heldBy := func(k kit, holder string, status store.RunStatus, expires time.Time) *store.PlanRecord {
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), status, k.microsecond())
		rec.Holder, rec.LeaseExpires = holder, expires
		return rec
	}
	expectHolder := func(t *testing.T, k kit, holder string, expires time.Time) {
		t.Helper()
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		if got.Holder != holder || !sameInstant(got.LeaseExpires, expires) {
			t.Errorf("LoadPlan: held by %q until %v, want %q until %v", got.Holder, got.LeaseExpires, holder, expires)
		}
	}

	t.Run("Of two holders saving one run, the second is ErrFenced while the first's lease is live, and saves once it ran out", func(t *testing.T) {
		k := setup(t, open)
		expires := k.microsecond().Add(runLease)
		if err := k.Plans.SavePlan(k.ctx, heldBy(k, "exec-1", store.RunRunning, expires)); err != nil {
			t.Fatalf("SavePlan by exec-1: %v", err)
		}
		expectFencedSave(t, "SavePlan by exec-2 while exec-1's lease is live", k.Plans.SavePlan(k.ctx, heldBy(k, "exec-2", store.RunRunning, expires)))
		rec := heldBy(k, "exec-2", store.RunRunning, expires)
		rec.Update, rec.Rev = true, k.revision(t, "acme", "run-1") // only the holder fences it
		expectFencedSave(t, "SavePlan with Update by exec-2 while exec-1's lease is live", k.Plans.SavePlan(k.ctx, rec))
		// The holder saves again, and moves its lease on.
		k.clk.Advance(runLease / 2)
		expires = k.microsecond().Add(runLease)
		rec = heldBy(k, "exec-1", store.RunRunning, expires)
		rec.Update, rec.Rev = true, k.revision(t, "acme", "run-1")
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan by exec-1 again: %v", err)
		}
		expectHolder(t, k, "exec-1", expires)
		k.clk.Advance(runLease / 2)
		expectFencedSave(t, "SavePlan by exec-2 before exec-1's lease moved on runs out", k.Plans.SavePlan(k.ctx, heldBy(k, "exec-2", store.RunRunning, expires)))
		k.clk.Advance(runLease/2 + time.Second)
		next := k.microsecond().Add(runLease)
		if err := k.Plans.SavePlan(k.ctx, heldBy(k, "exec-2", store.RunRunning, next)); err != nil {
			t.Fatalf("SavePlan by exec-2 once exec-1's lease ran out: %v", err)
		}
		expectHolder(t, k, "exec-2", next)
		expectFencedSave(t, "SavePlan by exec-1 once exec-2 holds the run", k.Plans.SavePlan(k.ctx, heldBy(k, "exec-1", store.RunRunning, next)))
	})

	t.Run("A save with Create makes the run, and of savers creating one run at once exactly one does", func(t *testing.T) {
		k := setup(t, open)
		created := func(holder string) *store.PlanRecord {
			rec := heldBy(k, holder, store.RunPlanning, k.microsecond().Add(runLease))
			rec.Create = true
			return rec
		}
		const savers = 8
		errs := make(chan error, savers)
		var wg sync.WaitGroup
		for i := range savers {
			wg.Go(func() { errs <- k.Plans.SavePlan(k.ctx, created(fmt.Sprintf("exec-%d", i))) })
		}
		wg.Wait()
		close(errs)
		made := 0
		for err := range errs {
			switch {
			case err == nil:
				made++
			default:
				expectFencedSave(t, "SavePlan with Create of a run another saver made", err)
			}
		}
		if made != 1 {
			t.Fatalf("%d of %d savers made the run, want exactly one", made, savers)
		}
		if rev := k.revision(t, "acme", "run-1"); rev != 1 {
			t.Errorf("revision after the run was made = %d, want 1", rev)
		}
		// A run let go is still not made again.
		k.clk.Advance(2 * runLease)
		rec := heldBy(k, "exec-9", store.RunCompleted, time.Time{})
		rec.Update, rec.Rev = true, 1
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan once the maker's lease ran out: %v", err)
		}
		rec = created("exec-10")
		rec.LeaseExpires = time.Time{}
		expectFencedSave(t, "SavePlan with Create of a finished run", k.Plans.SavePlan(k.ctx, rec))
		if got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); err != nil || got.Status != store.RunCompleted {
			t.Errorf("LoadPlan after the refused Create: %+v, %v; want the finished run as it was", got, err)
		}
	})

	t.Run("A run saved planning under a lease is held like a running one, ExtendRun moves it, and one to now lets it go", func(t *testing.T) {
		k := setup(t, open)
		r, ok := k.Plans.(store.Recoverer)
		if !ok {
			t.Skip("Plans recovers nothing (store.Recoverer)")
		}
		ref := store.RunRef{Tenant: "acme", RunID: "run-1"}
		if err := k.Plans.SavePlan(k.ctx, heldBy(k, "exec-1", store.RunPlanning, k.microsecond().Add(runLease))); err != nil {
			t.Fatalf("SavePlan by exec-1: %v", err)
		}
		k.clk.Advance(runLease / 2)
		expires := k.microsecond().Add(runLease)
		if err := r.ExtendRun(k.ctx, ref, "exec-1", expires); err != nil {
			t.Fatalf("ExtendRun of a run planning by its holder: %v", err)
		}
		expectHolder(t, k, "exec-1", expires)
		k.clk.Advance(runLease * 3 / 4) // past the first lease, within the one moved on
		rec := heldBy(k, "exec-2", store.RunPlanning, k.microsecond().Add(runLease))
		rec.Update, rec.Rev = true, k.revision(t, "acme", "run-1")
		expectFencedSave(t, "SavePlan by exec-2 while exec-1 plans", k.Plans.SavePlan(k.ctx, rec))
		if got, err := r.Stalled(k.ctx, expires.Add(time.Hour), 10); err != nil || len(got) != 0 {
			t.Errorf("Stalled = %+v, %v; a run planning is never stalled", got, err)
		}
		if err := r.ExtendRun(k.ctx, ref, "exec-1", k.microsecond()); err != nil {
			t.Fatalf("ExtendRun to now by exec-1: %v", err)
		}
		k.clk.Advance(time.Microsecond)
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Errorf("SavePlan by exec-2 once exec-1 let the run go: %v", err)
		}
		done := heldBy(k, "exec-2", store.RunCompleted, time.Time{})
		done.Update, done.Rev = true, k.revision(t, "acme", "run-1")
		if err := k.Plans.SavePlan(k.ctx, done); err != nil {
			t.Fatalf("SavePlan completed by exec-2: %v", err)
		}
		if err := r.ExtendRun(k.ctx, ref, "exec-2", k.microsecond().Add(runLease)); !errors.Is(err, store.ErrFenced) {
			t.Errorf("ExtendRun of a completed run: %v, want ErrFenced", err)
		}
	})

	t.Run("A save with no lease lets the run go: no holder is kept, and anyone may save next", func(t *testing.T) {
		k := setup(t, open)
		if err := k.Plans.SavePlan(k.ctx, heldBy(k, "exec-1", store.RunRunning, k.microsecond().Add(runLease))); err != nil {
			t.Fatalf("SavePlan by exec-1: %v", err)
		}
		rec := heldBy(k, "exec-1", store.RunInterrupted, time.Time{})
		rec.Update, rec.Rev = true, k.revision(t, "acme", "run-1")
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan by exec-1 with no lease: %v", err)
		}
		expectHolder(t, k, "", time.Time{})
		if _, ok := k.lister(); ok {
			if listed := k.listAll(t, "acme", nil, 10); len(listed) != 1 || !listed[0].LeaseExpires.IsZero() {
				t.Errorf("listed %+v, want run-1 with no lease", listed)
			}
		}
		// Within what was exec-1's lease.
		expires := k.microsecond().Add(runLease)
		if err := k.Plans.SavePlan(k.ctx, heldBy(k, "exec-2", store.RunRunning, expires)); err != nil {
			t.Fatalf("SavePlan by exec-2 after exec-1 let the run go: %v", err)
		}
		expectHolder(t, k, "exec-2", expires)
	})

	for _, update := range []bool{false, true} {
		t.Run(fmt.Sprintf("A fenced save writes nothing: not its plan, status, lease or events, and drops no step (Update %v)", update), func(t *testing.T) {
			k := setup(t, open)
			expires := k.microsecond().Add(runLease)
			rec := heldBy(k, "exec-1", store.RunRunning, expires)
			rec.Events = eventDocs("held", 2)
			if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
				t.Fatalf("SavePlan by exec-1: %v", err)
			}
			if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", k.microsecond())); err != nil {
				t.Fatalf("SaveStep: %v", err)
			}
			before, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
			if err != nil {
				t.Fatalf("LoadPlan: %v", err)
			}
			k.clk.Advance(time.Second)
			// Another plan, whose save would drop the step, another
			// status, what it waits for, and events.
			other := sampleRecord("acme", "run-1", samplePlan("plan-2"), store.RunAwaitingApproval, k.microsecond())
			other.Holder, other.LeaseExpires, other.Update, other.Events = "exec-2", k.microsecond().Add(runLease), update, zombieEvents
			other.Rev = before.Rev // only the holder fences it
			other.Waiting = []store.Wait{{StepID: "s2", Tool: "book_flight", Request: "sha256:req"}}
			expectFencedSave(t, "SavePlan by exec-2 while exec-1 holds the run", k.Plans.SavePlan(k.ctx, other))
			got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
			switch {
			case err != nil:
				t.Fatalf("LoadPlan after the fenced save: %v", err)
			case got.PlanID != "plan-1" || got.Status != store.RunRunning || !jsonEqual(got.Plan, before.Plan) || len(got.Waiting) != 0:
				t.Errorf("after the fenced save the run is %s waiting for %s, want %s as it was", showRun(got), showWaits(got.Waiting), showRun(before))
			case len(got.Steps) != 1:
				t.Errorf("after the fenced save the run has %d steps, want its one", len(got.Steps))
			case !got.Updated.Equal(before.Updated):
				t.Errorf("after the fenced save the run was updated %v, want %v as it was", got.Updated, before.Updated)
			}
			expectHolder(t, k, "exec-1", expires)
			if _, ok := k.history(); ok {
				k.expectHistory(t, "acme", "run-1", rec.Events)
			}
		})
	}

	t.Run("A run taken with TakeRun by a holder is saved by it and by no other, and ExtendRun and Stalled go by its lease", func(t *testing.T) {
		k := setup(t, open)
		r, ok := k.Plans.(store.Recoverer)
		if !ok {
			t.Skip("Plans recovers nothing (store.Recoverer)")
		}
		if err := k.Plans.SavePlan(k.ctx, heldBy(k, "exec-1", store.RunRunning, k.microsecond().Add(runLease))); err != nil {
			t.Fatalf("SavePlan by exec-1: %v", err)
		}
		k.clk.Advance(runLease + time.Second)
		ref := store.RunRef{Tenant: "acme", RunID: "run-1"}
		now := k.microsecond()
		if took, err := r.TakeRun(k.ctx, ref, "exec-3", now, runLease); err != nil || !took {
			t.Fatalf("TakeRun by exec-3 once exec-1's lease ran out = %v, %v; want true", took, err)
		}
		expectHolder(t, k, "exec-3", now.Add(runLease))
		for _, other := range []string{"exec-1", "exec-2", ""} {
			rec := heldBy(k, other, store.RunRunning, now.Add(runLease))
			rec.Update, rec.Rev = true, k.revision(t, "acme", "run-1") // only the holder fences it
			expectFencedSave(t, fmt.Sprintf("SavePlan by %q while exec-3 holds the run it took", other), k.Plans.SavePlan(k.ctx, rec))
		}
		k.clk.Advance(time.Second)
		expires := k.microsecond().Add(runLease)
		rec := heldBy(k, "exec-3", store.RunRunning, expires)
		rec.Update, rec.Rev = true, k.revision(t, "acme", "run-1")
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan by exec-3, which took the run: %v", err)
		}
		expires = expires.Add(runLease)
		if err := r.ExtendRun(k.ctx, ref, "exec-3", expires); err != nil {
			t.Errorf("ExtendRun by exec-3 after its save: %v", err)
		}
		if err := r.ExtendRun(k.ctx, ref, "exec-1", expires); !errors.Is(err, store.ErrFenced) {
			t.Errorf("ExtendRun by exec-1: %v, want ErrFenced", err)
		}
		expectHolder(t, k, "exec-3", expires)
		if got, err := r.Stalled(k.ctx, expires.Add(-time.Microsecond), 10); err != nil || len(got) != 0 {
			t.Errorf("Stalled before exec-3's lease runs out = %+v, %v; want none", got, err)
		}
		if got, err := r.Stalled(k.ctx, expires, 10); err != nil || len(got) != 1 || got[0] != ref {
			t.Errorf("Stalled as exec-3's lease runs out = %+v, %v; want run-1", got, err)
		}
		k.clk.Advance(expires.Sub(k.clk.Now()))
		if err := k.Plans.SavePlan(k.ctx, heldBy(k, "exec-2", store.RunRunning, k.microsecond().Add(runLease))); err != nil {
			t.Errorf("SavePlan by exec-2 as exec-3's lease runs out: %v", err)
		}
	})
}

func runHolderRaceBoundaries(t *testing.T, open Open) {
	t.Run("Of executions saving one run at once, each under a live lease, one holds it and the others are ErrFenced", func(t *testing.T) {
		const savers = 8
		k := setup(t, open)
		for _, start := range []string{"a new run", "a run whose holder's lease ran out"} {
			if start != "a new run" {
				k.clk.Advance(time.Hour) // the winner's lease below runs out
			}
			expires := k.microsecond().Add(time.Minute)
			errs := make([]error, savers)
			begin := make(chan struct{})
			var wg sync.WaitGroup
			for i := range errs {
				rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.microsecond())
				rec.Holder, rec.LeaseExpires, rec.Events = fmt.Sprint("exec-", i), expires, eventDocs(fmt.Sprint("exec-", i), 1)
				wg.Go(func() {
					<-begin
					errs[i] = k.Plans.SavePlan(k.ctx, rec)
				})
			}
			close(begin)
			wg.Wait()
			won := -1
			for i, err := range errs {
				switch {
				case err == nil && won >= 0:
					t.Errorf("%s: both exec-%d and exec-%d saved it", start, won, i)
				case err == nil:
					won = i
				case !errors.Is(err, store.ErrFenced):
					t.Errorf("%s: SavePlan by exec-%d: %v, want nil or ErrFenced", start, i, err)
				}
			}
			if won < 0 {
				t.Fatalf("%s: no execution saved it", start)
			}
			switch got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); {
			case err != nil:
				t.Fatalf("%s: LoadPlan: %v", start, err)
			case got.Holder != fmt.Sprint("exec-", won):
				t.Errorf("%s: LoadPlan: held by %q, want exec-%d, which saved it", start, got.Holder, won)
			}
		}
		// Each save that held the run appended its event; no other did.
		if _, ok := k.history(); ok {
			if got := k.events(t, "acme", "run-1"); len(got) != 2 {
				t.Errorf("%d events stored by the saves, want one of each save that held the run", len(got))
			}
		}
	})
}

// revision is the run's revision as LoadPlan gives it.
func (k kit) revision(t *testing.T, tenant, run string) int64 {
	t.Helper()
	rec, err := k.Plans.LoadPlan(k.ctx, tenant, run)
	if err != nil {
		t.Fatalf("LoadPlan of %s/%s: %v", tenant, run, err)
	}
	return rec.Rev
}

// expectRevision fails unless LoadPlan gives run-1 of acme at revision want.
func (k kit) expectRevision(t *testing.T, what string, want int64) {
	t.Helper()
	if got := k.revision(t, "acme", "run-1"); got != want {
		t.Errorf("%s: LoadPlan gives revision %d, want %d", what, got, want)
	}
}

func runRevisionBoundaries(t *testing.T, open Open) {
	t.Run("A run's revision is 1 once created and moves on by one with each save, and LoadPlan gives it", func(t *testing.T) {
		k := setup(t, open)
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.microsecond())
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan creating the run: %v", err)
		}
		k.expectRevision(t, "once created", 1)
		k.expectRevision(t, "read again", 1)
		// Saves based on the revision the saver last wrote, not read
		// again: a save stores rec.Rev+1.
		for want := int64(2); want <= 3; want++ {
			k.clk.Advance(time.Second)
			rec.Update, rec.Rev, rec.Status, rec.Updated = true, want-1, store.RunInterrupted, k.microsecond()
			if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
				t.Fatalf("SavePlan with Update based on revision %d, the one last written: %v", rec.Rev, err)
			}
			k.expectRevision(t, fmt.Sprintf("after the save based on revision %d", rec.Rev), want)
		}
		// Saves based on the revision read.
		for want := int64(4); want <= 5; want++ {
			read, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
			if err != nil {
				t.Fatalf("LoadPlan: %v", err)
			}
			k.clk.Advance(time.Second)
			read.Update, read.Status, read.Updated = true, store.RunRunning, k.microsecond()
			if err := k.Plans.SavePlan(k.ctx, read); err != nil {
				t.Fatalf("SavePlan with Update based on revision %d, the one read: %v", read.Rev, err)
			}
			k.expectRevision(t, fmt.Sprintf("after the save based on revision %d", read.Rev), want)
		}
		if got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); err != nil || got.Status != store.RunRunning || got.Rev != 5 {
			t.Errorf("LoadPlan = %s at revision %d, %v; want it running at revision 5", showRun(got), revOf(got), err)
		}
	})

	t.Run("A save with Update based on a revision that is not the run's is ErrFenced and writes nothing: plan, status, waits, events and steps stay", func(t *testing.T) {
		k := setup(t, open)
		first := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.microsecond())
		first.Events = eventDocs("created", 1)
		if err := k.Plans.SavePlan(k.ctx, first); err != nil {
			t.Fatalf("SavePlan creating the run: %v", err)
		}
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", k.microsecond())); err != nil {
			t.Fatalf("SaveStep: %v", err)
		}
		stale, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		// Another saves the run since: it awaits a decision.
		k.clk.Advance(time.Second)
		since := *stale
		since.Update, since.Status, since.Updated, since.Events = true, store.RunAwaitingApproval, k.microsecond(), eventDocs("since", 1)
		since.Waiting = []store.Wait{{StepID: "s2", Tool: "book_flight", Request: "sha256:req-since"}}
		if err := k.Plans.SavePlan(k.ctx, &since); err != nil {
			t.Fatalf("SavePlan with Update based on the revision read: %v", err)
		}
		before, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		if before.Rev != stale.Rev+1 {
			t.Fatalf("after the save the run is at revision %d, want %d", before.Rev, stale.Rev+1)
		}
		// Saves by no holder, so that only the revision may fence them:
		// based on the revision before, and on one the run never had.
		for _, rev := range []int64{stale.Rev, before.Rev + 1, 0} {
			k.clk.Advance(time.Second)
			// Another plan, whose save would drop the step, another
			// status, what it waits for, and events.
			late := sampleRecord("acme", "run-1", samplePlan("plan-2"), store.RunFailed, k.microsecond())
			late.Update, late.Rev, late.Events = true, rev, zombieEvents
			late.Waiting = []store.Wait{{StepID: "s9", Tool: "pay", Key: "sha256:zombie"}}
			late.Delegation = json.RawMessage(`{"zombie":true}`)
			expectFencedSave(t, fmt.Sprintf("SavePlan with Update based on revision %d, the run at %d", rev, before.Rev), k.Plans.SavePlan(k.ctx, late))
			got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
			switch {
			case err != nil:
				t.Fatalf("LoadPlan after the fenced save: %v", err)
			case got.PlanID != "plan-1" || got.Status != store.RunAwaitingApproval || !jsonEqual(got.Plan, before.Plan):
				t.Errorf("based on revision %d: after the fenced save the run is %s, want %s as it was", rev, showRun(got), showRun(before))
			case !sameWaits(got.Waiting, before.Waiting):
				t.Errorf("based on revision %d: after the fenced save the run waits for %s, want %s", rev, showWaits(got.Waiting), showWaits(before.Waiting))
			case string(got.Delegation) != string(before.Delegation):
				t.Errorf("based on revision %d: after the fenced save the run acts under %s, want %s as it was", rev, got.Delegation, before.Delegation)
			case len(got.Steps) != 1:
				t.Errorf("based on revision %d: after the fenced save the run has %d steps, want its one", rev, len(got.Steps))
			case !got.Updated.Equal(before.Updated):
				t.Errorf("based on revision %d: after the fenced save the run was updated %v, want %v as it was", rev, got.Updated, before.Updated)
			case got.Rev != before.Rev:
				t.Errorf("based on revision %d: after the fenced save the run is at revision %d, want %d as it was", rev, got.Rev, before.Rev)
			}
		}
		if _, ok := k.history(); ok {
			k.expectHistory(t, "acme", "run-1", slices.Concat(first.Events, since.Events))
		}
		if _, ok := k.lister(); ok {
			if listed := k.listAll(t, "acme", nil, 10); len(listed) != 1 || listed[0].Status != store.RunAwaitingApproval || listed[0].PlanID != "plan-1" {
				t.Errorf("listed %+v, want run-1 awaiting approval under plan-1", listed)
			}
		}
		// The save based on the run's revision goes through.
		k.clk.Advance(time.Second)
		before.Update, before.Status, before.Updated = true, store.RunRunning, k.microsecond()
		if err := k.Plans.SavePlan(k.ctx, before); err != nil {
			t.Fatalf("SavePlan with Update based on the run's revision: %v", err)
		}
		k.expectRevision(t, "after the save based on the run's revision", before.Rev+1)
	})

	t.Run("Of savers that read one revision and save with Update at once, exactly one saves and the others are ErrFenced", func(t *testing.T) {
		const savers = 8
		k := setup(t, open)
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.microsecond())); err != nil {
			t.Fatalf("SavePlan creating the run: %v", err)
		}
		var events []json.RawMessage // what the winners appended
		for round := range 3 {
			read, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
			if err != nil {
				t.Fatalf("LoadPlan: %v", err)
			}
			k.clk.Advance(time.Second)
			errs := make([]error, savers)
			recs := make([]*store.PlanRecord, savers)
			begin := make(chan struct{})
			var wg sync.WaitGroup
			for i := range errs {
				// No holder: only the revision may fence them.
				rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunInterrupted, k.microsecond())
				rec.Update, rec.Rev, rec.Events = true, read.Rev, eventDocs(fmt.Sprintf("round-%d-saver-%d", round, i), 1)
				rec.Delegation = json.RawMessage(fmt.Sprintf(`{"saver":%d}`, i))
				recs[i] = rec
				wg.Go(func() {
					<-begin
					errs[i] = k.Plans.SavePlan(k.ctx, rec)
				})
			}
			close(begin)
			wg.Wait()
			won := -1
			for i, err := range errs {
				switch {
				case err == nil && won >= 0:
					t.Errorf("round %d: savers %d and %d both saved the run based on revision %d", round, won, i, read.Rev)
				case err == nil:
					won = i
				default:
					expectFencedSave(t, fmt.Sprintf("round %d: SavePlan by saver %d", round, i), err)
				}
			}
			if won < 0 {
				t.Fatalf("round %d: no saver saved the run", round)
			}
			events = append(events, recs[won].Events...)
			switch got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); {
			case err != nil:
				t.Fatalf("round %d: LoadPlan: %v", round, err)
			case got.Rev != read.Rev+1:
				t.Errorf("round %d: the run is at revision %d, want %d: one save on %d", round, got.Rev, read.Rev+1, read.Rev)
			case !jsonEqual(got.Delegation, recs[won].Delegation):
				t.Errorf("round %d: the run acts under %s, want %s, the one that saved", round, got.Delegation, recs[won].Delegation)
			}
		}
		if _, ok := k.history(); ok {
			k.expectHistory(t, "acme", "run-1", events)
		}
	})

	t.Run("SaveStep, CompleteStep, ReleaseStep, AppendEvents, ExtendRun and TakeRun leave the revision as it is", func(t *testing.T) {
		k := setup(t, open)
		const runLease = time.Minute
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.microsecond())
		rec.Holder, rec.LeaseExpires = "exec-1", k.microsecond().Add(runLease)
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan creating the run: %v", err)
		}
		k.clk.Advance(time.Second)
		rec.Update, rec.Rev, rec.Updated = true, 1, k.microsecond()
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan with Update: %v", err)
		}
		k.expectRevision(t, "after two saves", 2)
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", k.microsecond())); err != nil {
			t.Fatalf("SaveStep: %v", err)
		}
		k.expectRevision(t, "after SaveStep", 2)
		ss, _ := stepStoreOf(k.Stores)
		c := k.acquire(t, theKey, "exec-1", false)
		done := doneStep("s2", "plan-1", k.microsecond())
		done.Key = theKey.Digest
		if err := ss.CompleteStep(k.ctx, &store.StepWrite{Key: theKey, Epoch: c.Epoch, RunID: "run-1", Outcome: done.Outcome, Record: done,
			Events: eventDocs("completed", 1)}); err != nil {
			t.Fatalf("CompleteStep: %v", err)
		}
		k.expectRevision(t, "after CompleteStep", 2)
		c = k.acquire(t, otherKey, "exec-1", false)
		doubt := doubtStep("s3", "plan-1", k.microsecond())
		doubt.Key = otherKey.Digest
		if err := ss.ReleaseStep(k.ctx, &store.StepWrite{Key: otherKey, Epoch: c.Epoch, RunID: "run-1", InDoubt: true, Record: doubt,
			Events: eventDocs("released", 1)}); err != nil {
			t.Fatalf("ReleaseStep: %v", err)
		}
		k.expectRevision(t, "after ReleaseStep", 2)
		if h, ok := k.history(); ok {
			if err := h.AppendEvents(k.ctx, "acme", "run-1", eventDocs("appended", 2)); err != nil {
				t.Fatalf("AppendEvents: %v", err)
			}
			k.expectRevision(t, "after AppendEvents", 2)
		}
		if r, ok := k.Plans.(store.Recoverer); ok {
			ref := store.RunRef{Tenant: "acme", RunID: "run-1"}
			expires := k.microsecond().Add(runLease)
			if err := r.ExtendRun(k.ctx, ref, "exec-1", expires); err != nil {
				t.Fatalf("ExtendRun: %v", err)
			}
			k.expectRevision(t, "after ExtendRun", 2)
			k.clk.Advance(runLease + time.Second)
			if took, err := r.TakeRun(k.ctx, ref, "exec-2", k.microsecond(), runLease); err != nil || !took {
				t.Fatalf("TakeRun once exec-1's lease ran out = %v, %v; want true", took, err)
			}
			k.expectRevision(t, "after TakeRun", 2)
			rec.Holder, rec.LeaseExpires = "exec-2", k.microsecond().Add(runLease)
		}
		// The run's holder saves it, based on the revision as it was.
		k.clk.Advance(time.Second)
		rec.Rev, rec.Status, rec.Updated = 2, store.RunCompleted, k.microsecond()
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan with Update based on revision 2 after the other writes: %v", err)
		}
		if got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); err != nil || got.Rev != 3 || got.Status != store.RunCompleted || len(got.Steps) != 3 {
			t.Errorf("LoadPlan = %s at revision %d, %v; want it completed with its 3 steps at revision 3", showRun(got), revOf(got), err)
		}
	})

	t.Run("A save without Update creates or replaces the run whatever its revision, at rec.Rev+1", func(t *testing.T) {
		k := setup(t, open)
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.microsecond())
		rec.Rev = 6 // a record created is stored at rec.Rev+1 too
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan creating the run based on revision 6: %v", err)
		}
		k.expectRevision(t, "created based on revision 6", 7)
		for i, rev := range []int64{0, 2, 7, 40} {
			k.clk.Advance(time.Second)
			before := k.revision(t, "acme", "run-1")
			plan := fmt.Sprint("plan-", i+2)
			rec := sampleRecord("acme", "run-1", samplePlan(plan), store.RunInterrupted, k.microsecond())
			rec.Rev = rev
			if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
				t.Fatalf("SavePlan without Update based on revision %d, the run at %d: %v", rev, before, err)
			}
			if got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); err != nil || got.PlanID != plan || got.Rev != rev+1 {
				t.Errorf("after a save without Update based on revision %d: LoadPlan = %s at revision %d, %v; want %s at %d",
					rev, showRun(got), revOf(got), err, plan, rev+1)
			}
			// A save with Update based on the revision before the replace
			// is fenced, when the replace moved it.
			if before != rev+1 {
				stale := sampleRecord("acme", "run-1", samplePlan("plan-stale"), store.RunFailed, k.microsecond())
				stale.Update, stale.Rev = true, before
				expectFencedSave(t, fmt.Sprintf("SavePlan with Update based on revision %d, from before the replace", before), k.Plans.SavePlan(k.ctx, stale))
			}
		}
	})
}

// revOf is rec's revision, 0 for no record.
func revOf(rec *store.PlanRecord) int64 {
	if rec == nil {
		return 0
	}
	return rec.Rev
}
