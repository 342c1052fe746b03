package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/planexec/planexec/store"
)

// lister returns the stores' RunLister, if Plans lists runs.
func (k kit) lister() (store.RunLister, bool) {
	l, ok := k.Plans.(store.RunLister)
	return l, ok
}

// listAll pages through a listing, limit runs at a time.
func (k kit) listAll(t *testing.T, tenant string, statuses []store.RunStatus, limit int) []store.RunSummary {
	t.Helper()
	l, _ := k.lister()
	var all []store.RunSummary
	q := store.RunQuery{Statuses: statuses, Limit: limit}
	for range 1000 {
		page, err := l.ListRuns(k.ctx, tenant, q)
		if err != nil {
			t.Fatalf("ListRuns: %v", err)
		}
		if len(page) > limit {
			t.Fatalf("ListRuns with limit %d gave %d", limit, len(page))
		}
		all = append(all, page...)
		if len(page) < limit {
			return all
		}
		last := page[len(page)-1]
		q.AfterUpdated, q.AfterRunID = last.Updated, last.RunID
	}
	t.Fatalf("the listing never ended")
	return nil
}

func runListing(t *testing.T, open Open) {
	if _, ok := setup(t, open).lister(); !ok {
		t.Skip("Plans does not list runs (store.RunLister)")
	}
	// save stores run of tenant at the kit's clock, in status, waiting for
	// waits.
	save := func(t *testing.T, k kit, tenant, run string, status store.RunStatus, waits []store.Wait) {
		t.Helper()
		rec := sampleRecord(tenant, run, samplePlan("plan-"+run), status, k.clk.Now())
		rec.Waiting = waits
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan %s: %v", run, err)
		}
	}

	t.Run("Runs are listed most recently updated first, by status, with what they wait for", func(t *testing.T) {
		k := setup(t, open)
		approval := []store.Wait{{StepID: "s2", Tool: "book_flight", Request: "sha256:req"}, {StepID: "s3", Tool: "notify", Request: "sha256:req3"}}
		doubt := []store.Wait{{StepID: "s2", Tool: "pay", Key: "sha256:key"}}
		calls := []store.Wait{{StepID: "s4", Tool: "confirm", Call: "call_1"}}
		for i, st := range store.RunStatuses {
			var waits []store.Wait
			switch st {
			case store.RunAwaitingApproval:
				waits = approval
			case store.RunInDoubt:
				waits = doubt
			case store.RunAwaitingTool:
				waits = calls
			}
			save(t, k, "acme", fmt.Sprintf("run-%d", i), st, waits)
			k.clk.Advance(time.Second)
		}
		all := k.listAll(t, "acme", nil, 100)
		if len(all) != len(store.RunStatuses) {
			t.Fatalf("listed %d runs, want %d", len(all), len(store.RunStatuses))
		}
		for i, s := range all {
			j := len(store.RunStatuses) - 1 - i
			if s.RunID != fmt.Sprintf("run-%d", j) || s.Status != store.RunStatuses[j] || s.PlanID != "plan-"+s.RunID {
				t.Errorf("run %d listed = %+v, want run-%d in %s", i, s, j, store.RunStatuses[j])
			}
			if i > 0 && !s.Updated.Before(all[i-1].Updated) {
				t.Errorf("run %s (updated %v) listed after run %s (updated %v)", s.RunID, s.Updated, all[i-1].RunID, all[i-1].Updated)
			}
		}
		for _, st := range store.RunStatuses {
			got := k.listAll(t, "acme", []store.RunStatus{st}, 10)
			if len(got) != 1 || got[0].Status != st {
				t.Errorf("listing %s gave %+v", st, got)
				continue
			}
			want := map[store.RunStatus][]store.Wait{store.RunAwaitingApproval: approval, store.RunInDoubt: doubt, store.RunAwaitingTool: calls}[st]
			if !sameWaits(got[0].Waiting, want) {
				t.Errorf("a run %s waits for %+v, want %+v", st, got[0].Waiting, want)
			}
			if !sameInstant(got[0].Created, got[0].Updated) || got[0].Created.IsZero() {
				t.Errorf("a run %s created %v, updated %v", st, got[0].Created, got[0].Updated)
			}
		}
		two := k.listAll(t, "acme", []store.RunStatus{store.RunFailed, store.RunInDoubt}, 10)
		if len(two) != 2 || two[0].Status != store.RunFailed || two[1].Status != store.RunInDoubt {
			t.Errorf("listing failed and in doubt gave %+v", two)
		}
	})

	t.Run("Paging visits every run once, ties in update time by run id", func(t *testing.T) {
		k := setup(t, open)
		const n = 23
		var want []string
		for i := range n {
			// Three runs at each instant: the run id breaks the tie.
			if i%3 == 0 {
				k.clk.Advance(time.Millisecond)
			}
			id := fmt.Sprintf("run-%02d", i)
			save(t, k, "acme", id, store.RunCompleted, nil)
			want = append(want, id)
		}
		slices.SortStableFunc(want, func(a, b string) int {
			ia, ib := 0, 0
			fmt.Sscanf(a, "run-%d", &ia)
			fmt.Sscanf(b, "run-%d", &ib)
			if ia/3 != ib/3 {
				return ib/3 - ia/3 // later instants first
			}
			return ia - ib
		})
		for _, limit := range []int{1, 4, 23, 50} {
			var got []string
			for _, s := range k.listAll(t, "acme", []store.RunStatus{store.RunCompleted}, limit) {
				got = append(got, s.RunID)
			}
			if !slices.Equal(got, want) {
				t.Errorf("pages of %d listed %v, want %v", limit, got, want)
			}
		}
	})

	t.Run("A running run is listed with its lease", func(t *testing.T) {
		k := setup(t, open)
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())
		rec.Holder, rec.LeaseExpires = "worker-1", k.clk.Now().Add(time.Minute)
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatal(err)
		}
		save(t, k, "acme", "run-2", store.RunCompleted, nil)
		for _, s := range k.listAll(t, "acme", nil, 10) {
			want := time.Time{}
			if s.RunID == "run-1" {
				want = rec.LeaseExpires
			}
			if !sameInstant(s.LeaseExpires, want) {
				t.Errorf("run %s listed with lease %v, want %v", s.RunID, s.LeaseExpires, want)
			}
		}
	})

	t.Run("A listing shows one tenant's runs only, and a saved run's new status", func(t *testing.T) {
		k := setup(t, open)
		save(t, k, "acme", "run-1", store.RunAwaitingApproval, []store.Wait{{StepID: "s2", Tool: "book_flight", Request: "r"}})
		save(t, k, "globex", "run-2", store.RunAwaitingApproval, nil)
		if got := k.listAll(t, "initech", nil, 10); len(got) != 0 {
			t.Errorf("a tenant with no runs listed %+v", got)
		}
		if got := k.listAll(t, "acme", nil, 10); len(got) != 1 || got[0].RunID != "run-1" {
			t.Errorf("acme listed %+v", got)
		}
		k.clk.Advance(time.Second)
		save(t, k, "acme", "run-1", store.RunFailed, nil)
		if got := k.listAll(t, "acme", []store.RunStatus{store.RunAwaitingApproval}, 10); len(got) != 0 {
			t.Errorf("a run saved as failed is still listed as awaiting approval: %+v", got)
		}
		got := k.listAll(t, "acme", []store.RunStatus{store.RunFailed}, 10)
		if len(got) != 1 || got[0].Waiting != nil || !got[0].Updated.After(got[0].Created) {
			t.Errorf("the failed run is listed as %+v, want it waiting for nothing, updated after it was created", got)
		}
	})
}

// A record's delegation and what it waits for come back as saved.
func runRecordFields(t *testing.T, open Open) {
	k := setup(t, open)
	rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunAwaitingApproval, k.clk.Now())
	rec.Delegation = json.RawMessage(`{"run_id":"run-1","tenant":"acme","user":` + string(mustJSON(plannerText)) + `,"scope":null}`)
	rec.Waiting = []store.Wait{{StepID: "s2", Tool: "book_flight", Request: "sha256:r"}, {StepID: "s3", Tool: "pay", Key: "sha256:k"}}
	if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Delegation) != string(rec.Delegation) || !sameWaits(got.Waiting, rec.Waiting) {
		t.Errorf("loaded delegation %s waiting %+v, want %s %+v", got.Delegation, got.Waiting, rec.Delegation, rec.Waiting)
	}
	rec.Status, rec.Waiting = store.RunRunning, nil
	if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got, err = k.Plans.LoadPlan(k.ctx, "acme", "run-1"); err != nil || got.Waiting != nil {
		t.Errorf("after saving it waiting for nothing: %+v, %v", got, err)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
