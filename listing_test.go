package planexec_test

// A service lists a tenant's runs by where they stand, each with what it
// waits for, from the store: no index of its own.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// lByID indexes a listing by run id.
func lByID(runs []planexec.RunInfo) map[string]planexec.RunInfo {
	m := map[string]planexec.RunInfo{}
	for _, r := range runs {
		m[r.ID] = r
	}
	return m
}

// lFailing is a recorder whose booking of flight DOUBT times out (in doubt)
// and whose search from BAD fails.
func lFailing() *recorder {
	return &recorder{fail: func(_ string, args any) error {
		if b, ok := args.(Booking); ok && b.Flight == "DOUBT" {
			return errors.New("gateway timeout")
		}
		if s, ok := args.(Search); ok && s.Origin == "BAD" {
			return errors.New("no such airport")
		}
		return nil
	}}
}

func TestRunsAreListedByWhereTheyStandWithWhatTheyWaitFor(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := lFailing()
	ex, gate := hExecutor(t, r, st, nil)

	if _, err := hRun(t, ex, "acme", "done").Execute(ctx, tripPlan()); err != nil {
		t.Fatalf("done: %v", err)
	}
	if _, err := hRun(t, ex, "acme", "failed").Execute(ctx, iOne(iSearch("s1", "BAD"))); err == nil {
		t.Fatal("failed: no error")
	}
	var ioe *planexec.IndeterminateOutcomeError
	if _, err := hRun(t, ex, "acme", "doubt").Execute(ctx, iOne(step("b1", "book_flight", `{"flight":"DOUBT","seats":1}`))); !errors.As(err, &ioe) {
		t.Fatalf("doubt: err = %v, want in doubt", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := hRun(t, ex, "acme", "stopped").Execute(cancelled, iOne(iSearch("s1", "LHR"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped: err = %v, want context.Canceled", err)
	}
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Defer() }
	var pending *planexec.ApprovalPendingError
	if _, err := hRun(t, ex, "acme", "waiting").Execute(ctx, cPendingPlan()); !errors.As(err, &pending) {
		t.Fatalf("waiting: err = %v, want pending", err)
	}
	if _, err := hRun(t, ex, "globex", "theirs").Execute(ctx, cPendingPlan()); !errors.As(err, new(*planexec.ApprovalPendingError)) {
		t.Fatalf("theirs: err = %v, want pending", err)
	}

	page, err := ex.Runs(ctx, "acme", planexec.RunQuery{})
	if err != nil {
		t.Fatalf("Runs: %v", err)
	}
	got := lByID(page.Runs)
	want := map[string]planexec.RunStatus{"done": planexec.RunCompleted, "failed": planexec.RunFailed, "doubt": planexec.RunInDoubt,
		"stopped": planexec.RunInterrupted, "waiting": planexec.RunAwaitingApproval}
	if len(got) != len(want) || page.Next != "" {
		t.Fatalf("listed %+v (next %q), want the %d runs of acme on one page", page.Runs, page.Next, len(want))
	}
	for id, status := range want {
		if got[id].Status != status {
			t.Errorf("run %s listed %s, want %s", id, got[id].Status, status)
		}
	}
	if w := got["doubt"].Waiting; len(w) != 1 || w[0].Key != ioe.Key || w[0].Step != "b1" || w[0].Request != "" {
		t.Errorf("the run in doubt waits for %+v, want its key %v", w, ioe.Key)
	}
	var requests []string
	for _, w := range got["waiting"].Waiting {
		requests = append(requests, w.Request)
	}
	var asked []string
	for _, req := range pending.Requests {
		asked = append(asked, req.ID)
	}
	if !slices.Equal(requests, asked) {
		t.Errorf("the waiting run waits for requests %v, want %v", requests, asked)
	}

	// Only what was asked for, newest first.
	waiting, err := ex.Runs(ctx, "acme", planexec.RunQuery{Status: []planexec.RunStatus{planexec.RunAwaitingApproval, planexec.RunInDoubt}})
	if err != nil {
		t.Fatal(err)
	}
	if ids := lIDs(waiting.Runs); !slices.Equal(ids, []string{"waiting", "doubt"}) {
		t.Errorf("runs waiting for someone = %v, want [waiting doubt]", ids)
	}

	// A denial is where the run then stands.
	run := hRun(t, ex, "acme", "waiting")
	for _, req := range pending.Requests {
		if err := run.Decide(ctx, req.Deny("dana", "no")); err != nil {
			t.Fatalf("Decide: %v", err)
		}
	}
	if _, err := run.Resume(ctx); !errors.As(err, new(*planexec.ApprovalDeniedError)) {
		t.Fatalf("Resume after the denial: err = %v", err)
	}
	after, err := ex.Runs(ctx, "acme", planexec.RunQuery{Status: []planexec.RunStatus{planexec.RunAwaitingApproval}})
	if err != nil || len(after.Runs) != 0 {
		t.Errorf("after the denial, runs awaiting approval = %+v, %v; want none", after.Runs, err)
	}
	if failed, _ := ex.Runs(ctx, "acme", planexec.RunQuery{Status: []planexec.RunStatus{planexec.RunFailed}}); !slices.Contains(lIDs(failed.Runs), "waiting") {
		t.Errorf("the denied run is not listed as failed: %v", lIDs(failed.Runs))
	}
}

func lIDs(runs []planexec.RunInfo) []string {
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestAListingIsPagedWithTheCursorItGives(t *testing.T) {
	ctx := context.Background()
	ex, _ := hExecutor(t, &recorder{}, memory.New(), nil)
	var all []string
	for i := range 7 {
		id := fmt.Sprintf("run-%d", i)
		if _, err := hRun(t, ex, "acme", id).Execute(ctx, iOne(iSearch("s1", "LHR"))); err != nil {
			t.Fatal(err)
		}
		all = append([]string{id}, all...) // newest first
	}
	var got []string
	q := planexec.RunQuery{Limit: 3}
	for pages := 0; ; pages++ {
		page, err := ex.Runs(ctx, "acme", q)
		if err != nil {
			t.Fatalf("Runs: %v", err)
		}
		got = append(got, lIDs(page.Runs)...)
		if page.Next == "" {
			if pages != 2 || len(page.Runs) != 1 {
				t.Errorf("the listing ended on page %d with %d runs, want page 2 with 1", pages, len(page.Runs))
			}
			break
		}
		if len(page.Runs) != 3 {
			t.Fatalf("a page before the last has %d runs", len(page.Runs))
		}
		q.After = page.Next
	}
	if !slices.Equal(got, all) {
		t.Errorf("pages listed %v, want %v", got, all)
	}
}

func TestAListingOfWhatNoRunCanBeIsRefused(t *testing.T) {
	ctx := context.Background()
	ex, _ := hExecutor(t, &recorder{}, memory.New(), nil)
	for name, q := range map[string]planexec.RunQuery{
		"a status no run is in": {Status: []planexec.RunStatus{"archived"}},
		"a forged cursor":       {After: "not a cursor!"},
		"a cursor cut short":    {After: "AAAA"},
	} {
		if _, err := ex.Runs(ctx, "acme", q); !errors.Is(err, planexec.ErrInvalidQuery) {
			t.Errorf("%s: err = %v, want ErrInvalidQuery", name, err)
		}
	}
	if page, err := ex.Runs(ctx, "nobody", planexec.RunQuery{}); err != nil || len(page.Runs) != 0 {
		t.Errorf("a tenant with no runs: %+v, %v", page, err)
	}
	noLister, _ := hExecutor(t, &recorder{}, struct{ store.Store }{memory.New()}, nil)
	if _, err := noLister.Runs(ctx, "acme", planexec.RunQuery{}); !errors.As(err, new(*planexec.ConfigurationError)) {
		t.Errorf("listing over a store that lists no runs: err = %v, want a *ConfigurationError", err)
	}
}

func TestStatusOfSaysWhatTheStoreRecords(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := lFailing()
	approving, _ := hExecutor(t, r, st, nil)
	later, _ := hExecutor(t, r, st, func(c *planexec.Config) { c.Gate = planexec.DecideLater })
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	seen := map[planexec.RunStatus]bool{}
	for _, tc := range []struct {
		id   string
		ex   *planexec.Executor
		ctx  context.Context
		plan planexec.Plan
	}{
		{"done", approving, ctx, iOne(iSearch("s1", "LHR"))},
		{"failed", approving, ctx, iOne(iSearch("s1", "BAD"))},
		{"doubt", approving, ctx, iOne(step("b1", "book_flight", `{"flight":"DOUBT","seats":1}`))},
		{"stopped", approving, cancelled, iOne(iSearch("s1", "JFK"))},
		{"waiting", later, ctx, tripPlan()},
	} {
		_, err := hRun(t, tc.ex, "acme", tc.id).Execute(tc.ctx, tc.plan)
		rec, lerr := st.LoadPlan(ctx, "acme", tc.id)
		if lerr != nil {
			t.Fatalf("%s: %v", tc.id, lerr)
		}
		if got := planexec.StatusOf(err); got != rec.Status {
			t.Errorf("%s: StatusOf(%v) = %s, the store records %s", tc.id, err, got, rec.Status)
		}
		seen[rec.Status] = true
	}
	if len(seen) != 5 {
		t.Errorf("the runs ended in %d statuses, want 5: %v", len(seen), seen)
	}
}

func TestARunLeftRunningByADeadExecutorIsListedInterrupted(t *testing.T) {
	ctx := context.Background()
	clk := planexec.NewFakeClock()
	st := memory.New(memory.WithClock(clk.Now))
	ex, _ := hExecutor(t, &recorder{}, st, func(c *planexec.Config) { c.Now = clk.Now })
	for i, expires := range []time.Duration{time.Minute, -time.Second, -time.Minute} {
		p := iOne(iSearch("s1", "LHR"))
		p.ID, p.Revision = fmt.Sprint("p", i), 1
		rec := storedPlan(t, "acme", fmt.Sprint("run-", i), p, planexec.RunRunning)
		rec.Holder, rec.LeaseExpires = "replica", clk.Now().Add(expires)
		rec.Created, rec.Updated = clk.Now(), clk.Now()
		if err := st.SavePlan(ctx, rec); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	for _, tc := range []struct {
		status []planexec.RunStatus
		limit  int
		want   []string
	}{
		{nil, 10, []string{"run-2", "run-1", "run-0"}},
		{[]planexec.RunStatus{planexec.RunRunning}, 10, []string{"run-0"}},
		{[]planexec.RunStatus{planexec.RunInterrupted}, 10, []string{"run-2", "run-1"}},
		{[]planexec.RunStatus{planexec.RunInterrupted}, 1, []string{"run-2", "run-1"}},
	} {
		var got []string
		q := planexec.RunQuery{Status: tc.status, Limit: tc.limit}
		for {
			page, err := ex.Runs(ctx, "acme", q)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Runs {
				got = append(got, r.ID)
				if want := map[string]planexec.RunStatus{"run-0": planexec.RunRunning}[r.ID]; want == "" && r.Status != planexec.RunInterrupted || want != "" && r.Status != want {
					t.Errorf("%s listed %s", r.ID, r.Status)
				}
			}
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("listing %v by %d: %v, want %v", tc.status, tc.limit, got, tc.want)
		}
	}
}
