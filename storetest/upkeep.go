package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

func runCeilings(t *testing.T, open Open) {
	ceilings := func(t *testing.T, k kit) store.CeilingStore {
		c, ok := k.Plans.(store.CeilingStore)
		if !ok {
			t.Skip("Plans counts no ceilings (store.CeilingStore)")
		}
		return c
	}
	d := decimal.RequireFromString
	const window = time.Hour

	t.Run("Spends count within their window, and one past the ceiling records nothing", func(t *testing.T) {
		k := setup(t, open)
		c := ceilings(t, k)
		at := k.clk.Now()
		spend := func(key, amount string, when time.Time) error {
			return c.Spend(k.ctx, store.Spend{Tenant: "acme", Grant: "g-refunds", Key: key, Amount: d(amount), At: when}, window, d("100.00"))
		}
		if err := spend("k1", "60.10", at.Add(-2*window)); err != nil { // long ago: outside the window below
			t.Fatal(err)
		}
		if err := spend("k2", "60.10", at); err != nil {
			t.Fatal(err)
		}
		if err := spend("k3", "39.91", at.Add(time.Minute)); !errors.Is(err, store.ErrCeiling) {
			t.Errorf("a spend 0.01 past the ceiling: err = %v, want ErrCeiling", err)
		}
		if err := spend("k4", "39.90", at.Add(time.Minute)); err != nil {
			t.Errorf("a spend up to the ceiling exactly: %v", err)
		}
		got, err := c.Spent(k.ctx, "g-refunds", at.Add(time.Minute), window, nil)
		if err != nil || !got.Equal(d("100.00")) {
			t.Errorf("Spent = %s, %v; want 100.00 (the refused spend not counted)", got, err)
		}
		// A window later, the old spends fall out.
		if got, _ := c.Spent(k.ctx, "g-refunds", at.Add(window), window, nil); !got.Equal(d("39.90")) {
			t.Errorf("Spent a window later = %s, want 39.90", got)
		}
		if got, _ := c.Spent(k.ctx, "g-other", at, window, nil); !got.IsZero() {
			t.Errorf("another grant spent %s", got)
		}
	})

	t.Run("A spend recorded at a later time counts against one made before it", func(t *testing.T) {
		// Replicas' clocks differ, and a spend is made some time after its
		// At was read: whichever is recorded first, both count.
		k := setup(t, open)
		c := ceilings(t, k)
		at := k.clk.Now()
		if err := c.Spend(k.ctx, store.Spend{Tenant: "acme", Grant: "g", Key: "later", Amount: d("60"), At: at.Add(time.Second)}, window, d("100")); err != nil {
			t.Fatal(err)
		}
		if err := c.Spend(k.ctx, store.Spend{Tenant: "acme", Grant: "g", Key: "earlier", Amount: d("60"), At: at}, window, d("100")); !errors.Is(err, store.ErrCeiling) {
			t.Errorf("a spend that with a later one passes the ceiling: err = %v, want ErrCeiling", err)
		}
		if got, _ := c.Spent(k.ctx, "g", at, window, nil); !got.Equal(d("60")) {
			t.Errorf("Spent = %s, want 60 (the later spend counts)", got)
		}
	})

	t.Run("A step spends once, however often it is resumed", func(t *testing.T) {
		k := setup(t, open)
		c := ceilings(t, k)
		sp := store.Spend{Tenant: "acme", Grant: "g", Key: "k1", Amount: d("70"), At: k.clk.Now()}
		for range 3 {
			if err := c.Spend(k.ctx, sp, window, d("100")); err != nil {
				t.Fatalf("Spend of one key again: %v", err)
			}
		}
		if got, _ := c.Spent(k.ctx, "g", k.clk.Now(), window, nil); !got.Equal(d("70")) {
			t.Errorf("Spent = %s, want 70", got)
		}
	})

	t.Run("Spenders at once never take a grant past its ceiling together", func(t *testing.T) {
		k := setup(t, open)
		c := ceilings(t, k)
		const spenders = 24
		var ok atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, spenders)
		for i := range spenders {
			wg.Go(func() {
				err := c.Spend(k.ctx, store.Spend{Tenant: "acme", Grant: "g", Key: fmt.Sprint("k", i), Amount: d("10.00"), At: k.clk.Now()}, window, d("95.00"))
				switch {
				case err == nil:
					ok.Add(1)
				case !errors.Is(err, store.ErrCeiling):
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Spend: %v", err)
		}
		if n := ok.Load(); n != 9 {
			t.Errorf("%d spends of 10.00 went through under a ceiling of 95.00, want 9", n)
		}
		if got, _ := c.Spent(k.ctx, "g", k.clk.Now(), window, nil); !got.Equal(d("90")) {
			t.Errorf("Spent = %s, want 90", got)
		}
	})
}

func runPrune(t *testing.T, open Open) {
	t.Run("Prune drops finished runs, their histories, claims and decisions, and nothing that may still be needed", func(t *testing.T) {
		k := setup(t, open)
		p, ok := k.Plans.(store.Pruner)
		if !ok {
			t.Skip("Plans prunes nothing (store.Pruner)")
		}
		h, hasHistory := k.history()
		old := k.clk.Now()
		save := func(tenant, run string, status store.RunStatus) {
			t.Helper()
			if err := k.Plans.SavePlan(k.ctx, sampleRecord(tenant, run, samplePlan("plan-"+run), status, k.clk.Now())); err != nil {
				t.Fatal(err)
			}
			if hasHistory {
				if err := h.AppendEvents(k.ctx, tenant, run, eventDocs(run, 2)); err != nil {
					t.Fatal(err)
				}
			}
		}
		claim := func(run, digest string, perTenant bool, complete bool) planexec.Key {
			t.Helper()
			key := planexec.Key{Tenant: "acme", Digest: digest}
			c, err := k.Idempotency.Claim(k.ctx, store.ClaimRequest{Key: key, RunID: run, StepID: "s1", Tool: "refund", Holder: "h", Lease: time.Minute, PerTenant: perTenant})
			if err != nil || c.State != store.ClaimAcquired {
				t.Fatalf("Claim %s: %+v, %v", digest, c, err)
			}
			if complete {
				if err := k.Idempotency.Complete(k.ctx, key, c.Epoch, json.RawMessage(`"done"`)); err != nil {
					t.Fatal(err)
				}
			} else if err := k.Idempotency.Release(k.ctx, key, c.Epoch, true); err != nil {
				t.Fatal(err)
			}
			return key
		}
		// Old: finished runs (one of another tenant), and runs that may go on.
		save("acme", "done", store.RunCompleted)
		save("acme", "failed", store.RunFailed)
		save("globex", "done", store.RunCompleted)
		for _, st := range []store.RunStatus{store.RunRunning, store.RunAwaitingApproval, store.RunInDoubt, store.RunInterrupted} {
			save("acme", string(st), st)
		}
		if hasHistory {
			if err := h.AppendEvents(k.ctx, "acme", "refused", eventDocs("refused", 1)); err != nil {
				t.Fatal(err)
			}
		}
		doneClaim := claim("done", "sha256:done", false, true)
		onceClaim := claim("done", "sha256:once", true, true)
		doubtClaim := claim("done", "sha256:doubt", false, false)
		keptRunClaim := claim(string(store.RunInterrupted), "sha256:kept", false, true)
		if err := k.Approvals.SaveDecision(k.ctx, "acme", planexec.Decision{RequestID: "r-old", Status: planexec.Approved, Approver: "dana", DecidedAt: old}); err != nil {
			t.Fatal(err)
		}
		// New: after the cut.
		k.clk.Advance(time.Hour)
		cut := k.clk.Now()
		k.clk.Advance(time.Hour)
		save("acme", "done-recently", store.RunCompleted)
		if err := k.Approvals.SaveDecision(k.ctx, "acme", planexec.Decision{RequestID: "r-new", Status: planexec.Approved, Approver: "dana", DecidedAt: k.clk.Now()}); err != nil {
			t.Fatal(err)
		}

		pruned, err := p.Prune(k.ctx, "acme", cut)
		if err != nil {
			t.Fatalf("Prune: %v", err)
		}
		want := store.Pruned{Runs: 2, Claims: 1, Decisions: 1}
		if hasHistory {
			want.Histories = 1
		}
		if pruned != want {
			t.Errorf("Prune = %+v, want %+v", pruned, want)
		}
		for _, run := range []string{"done", "failed"} {
			if _, err := k.Plans.LoadPlan(k.ctx, "acme", run); !errors.Is(err, store.ErrNoRecord) {
				t.Errorf("run %s after Prune: err = %v, want ErrNoRecord", run, err)
			}
			k.expectNoHistory(t, "acme", run)
		}
		k.expectNoHistory(t, "acme", "refused")
		for _, run := range []string{"running", "awaiting_approval", "in_doubt", "interrupted", "done-recently"} {
			if _, err := k.Plans.LoadPlan(k.ctx, "acme", run); err != nil {
				t.Errorf("run %s after Prune: %v", run, err)
			}
		}
		if _, err := k.Plans.LoadPlan(k.ctx, "globex", "done"); err != nil {
			t.Errorf("another tenant's run after Prune: %v", err)
		}
		if err := k.Idempotency.Resolve(k.ctx, doneClaim, "done", store.Resolution{}); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("the dropped run's claim: Resolve = %v, want ErrNoRecord", err)
		}
		k.expectCompleted(t, onceClaim, `"done"`)
		k.expectInDoubt(t, doubtClaim)
		k.expectCompleted(t, keptRunClaim, `"done"`)
		if _, err := k.Approvals.Decision(k.ctx, "acme", "r-old"); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("the old decision after Prune: %v, want ErrNoRecord", err)
		}
		if _, err := k.Approvals.Decision(k.ctx, "acme", "r-new"); err != nil {
			t.Errorf("the new decision after Prune: %v", err)
		}
	})
}

func runRecovery(t *testing.T, open Open) {
	recoverer := func(t *testing.T, k kit) store.Recoverer {
		r, ok := k.Plans.(store.Recoverer)
		if !ok {
			t.Skip("Plans recovers nothing (store.Recoverer)")
		}
		return r
	}
	lease := time.Minute

	t.Run("Stalled runs are interrupted ones and running ones whose lease ran out", func(t *testing.T) {
		k := setup(t, open)
		r := recoverer(t, k)
		now := k.clk.Now()
		for _, c := range []struct {
			tenant, run string
			status      store.RunStatus
			expires     time.Time
		}{
			{"acme", "live", store.RunRunning, now.Add(lease)},
			{"acme", "dead", store.RunRunning, now.Add(-time.Second)},
			{"globex", "stopped", store.RunInterrupted, time.Time{}},
			{"acme", "waiting", store.RunAwaitingApproval, time.Time{}},
			{"acme", "done", store.RunCompleted, time.Time{}},
		} {
			rec := sampleRecord(c.tenant, c.run, samplePlan("p-"+c.run), c.status, now)
			if c.status == store.RunRunning {
				rec.Holder, rec.LeaseExpires = "worker-1", c.expires
			}
			if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
				t.Fatal(err)
			}
		}
		got, err := r.Stalled(k.ctx, now, 10)
		if err != nil {
			t.Fatalf("Stalled: %v", err)
		}
		want := map[store.RunRef]bool{{Tenant: "acme", RunID: "dead"}: true, {Tenant: "globex", RunID: "stopped"}: true}
		if len(got) != len(want) || !want[got[0]] || !want[got[1]] {
			t.Errorf("Stalled = %+v, want %v", got, want)
		}
		if one, _ := r.Stalled(k.ctx, now, 1); len(one) != 1 {
			t.Errorf("Stalled with limit 1 gave %d", len(one))
		}
		rec, err := k.Plans.LoadPlan(k.ctx, "acme", "live")
		if err != nil || rec.Holder != "worker-1" || !sameInstant(rec.LeaseExpires, now.Add(lease)) {
			t.Errorf("a running run's holder and lease read back as %q %v (%v)", rec.Holder, rec.LeaseExpires, err)
		}
	})

	t.Run("Of replicas taking a stalled run at once, one does", func(t *testing.T) {
		k := setup(t, open)
		r := recoverer(t, k)
		rec := sampleRecord("acme", "run-1", samplePlan("p"), store.RunInterrupted, k.clk.Now())
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatal(err)
		}
		ref := store.RunRef{Tenant: "acme", RunID: "run-1"}
		var took atomic.Int64
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				ok, err := r.TakeRun(k.ctx, ref, fmt.Sprint("replica-", i), k.clk.Now(), lease)
				if err != nil {
					t.Errorf("TakeRun: %v", err)
				}
				if ok {
					took.Add(1)
				}
			})
		}
		wg.Wait()
		if n := took.Load(); n != 1 {
			t.Fatalf("%d replicas took the run, want 1", n)
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil || got.Status != store.RunRunning || got.Holder == "" || !sameInstant(got.LeaseExpires, k.clk.Now().Add(lease)) {
			t.Fatalf("the taken run = %+v, %v", got, err)
		}
		if stalled, _ := r.Stalled(k.ctx, k.clk.Now(), 10); len(stalled) != 0 {
			t.Errorf("a taken run is still stalled: %+v", stalled)
		}
		// Its holder keeps it; another cannot extend it.
		if err := r.ExtendRun(k.ctx, ref, got.Holder, k.clk.Now().Add(2*lease)); err != nil {
			t.Errorf("ExtendRun by its holder: %v", err)
		}
		if err := r.ExtendRun(k.ctx, ref, "someone-else", k.clk.Now().Add(2*lease)); !errors.Is(err, store.ErrFenced) {
			t.Errorf("ExtendRun by another: %v, want ErrFenced", err)
		}
		if err := r.ExtendRun(k.ctx, store.RunRef{Tenant: "acme", RunID: "nope"}, got.Holder, k.clk.Now()); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("ExtendRun of no run: %v, want ErrNoRecord", err)
		}
		k.clk.Advance(lease + time.Second)
		if stalled, _ := r.Stalled(k.ctx, k.clk.Now(), 10); len(stalled) != 0 {
			t.Errorf("a run whose lease was extended is stalled before the extension ran out: %+v", stalled)
		}
		k.clk.Advance(lease)
		if stalled, _ := r.Stalled(k.ctx, k.clk.Now(), 10); len(stalled) != 1 {
			t.Errorf("a run whose holder stopped extending is not stalled: %+v", stalled)
		}
	})
}
