package planexec_test

// A run's history is its events as the store keeps them: read from any
// executor over the store, after the one that wrote them is gone, and
// followed as they are stored.

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// hExecutor is an executor over r's tools and st, with a granting gate.
func hExecutor(t *testing.T, r *recorder, st store.Store, edit func(*planexec.Config)) (*planexec.Executor, *approve) {
	t.Helper()
	gate := &approve{}
	cfg := planexec.Config{Tools: r.tools(), Gate: gate, Store: st}
	if edit != nil {
		edit(&cfg)
	}
	ex, err := planexec.NewExecutor(cfg)
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	return ex, gate
}

// hRun is run id of tenant on ex.
func hRun(t *testing.T, ex *planexec.Executor, tenant, id string) *planexec.Run {
	t.Helper()
	run, err := ex.Run(planexec.Delegation{RunID: id, Tenant: tenant, User: "dana", Agent: "courier"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return run
}

// hSame fails unless the stored history is the live record: the same
// events, numbered alike.
func hSame(t *testing.T, stored, live []planexec.Event) {
	t.Helper()
	if len(stored) != len(live) {
		t.Fatalf("stored history has %d events %v, the run recorded %d %v", len(stored), kinds(stored), len(live), kinds(live))
	}
	for i := range live {
		s, l := stored[i], live[i]
		if s.Seq != l.Seq || s.Kind != l.Kind || s.StepID != l.StepID || s.Tool != l.Tool || s.PlanID != l.PlanID ||
			s.Approver != l.Approver || s.Detail != l.Detail || s.Duration != l.Duration || !s.Time.Equal(l.Time) {
			t.Errorf("event %d stored as %+v, recorded as %+v", i+1, s, l)
		}
	}
}

func TestARunsHistoryIsReadFromAnotherExecutorOverTheStore(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	acting, _ := hExecutor(t, r, st, nil)
	run := hRun(t, acting, "acme", "run-1")
	if _, err := run.Execute(ctx, tripPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}

	console, _ := hExecutor(t, &recorder{}, st, func(c *planexec.Config) { c.Tools = nil })
	stored, err := hRun(t, console, "acme", "run-1").History(ctx, 0, 1000)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	hSame(t, stored, run.Events())
	cLastKind(t, stored, planexec.EventPlanCompleted)

	// Paging: after an event, at most limit.
	page, err := hRun(t, console, "acme", "run-1").History(ctx, 2, 3)
	if err != nil || len(page) != 3 || page[0].Seq != 3 || page[2].Seq != 5 {
		t.Errorf("History(after 2, limit 3) = %v, %v", kinds(page), err)
	}
	// Another tenant's run of the same id has no history.
	if other, err := hRun(t, console, "globex", "run-1").History(ctx, 0, 1000); err != nil || len(other) != 0 {
		t.Errorf("globex's run-1 history = %v, %v; want none", kinds(other), err)
	}
}

// hCounting counts the store's writes of a history.
type hCounting struct {
	*memory.Store
	mu      sync.Mutex
	appends int // AppendEvents calls
	inSteps int // events written with a step's record
}

func (s *hCounting) AppendEvents(ctx context.Context, tenant, run string, events []json.RawMessage) error {
	s.mu.Lock()
	s.appends++
	s.mu.Unlock()
	return s.Store.AppendEvents(ctx, tenant, run, events)
}

func (s *hCounting) CompleteStep(ctx context.Context, w *store.StepWrite) error {
	s.mu.Lock()
	s.inSteps += len(w.Events)
	s.mu.Unlock()
	return s.Store.CompleteStep(ctx, w)
}

func TestAStepsEventsCostNoWriteOfTheirOwn(t *testing.T) {
	ctx := context.Background()
	appends := map[int]int{}
	for _, n := range []int{1, 8} {
		st := &hCounting{Store: memory.New()}
		ex, _ := hExecutor(t, &recorder{}, st, nil)
		plan := planexec.Plan{Goal: "searches"}
		for i := range n {
			plan.Steps = append(plan.Steps, iSearch(string(rune('a'+i)), "LH"+string(rune('A'+i))))
		}
		run := hRun(t, ex, "acme", "run-1")
		if _, err := run.Execute(ctx, plan); err != nil {
			t.Fatalf("Execute: %v", err)
		}
		stored, err := run.History(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		hSame(t, stored, run.Events())
		if st.inSteps == 0 {
			t.Errorf("%d steps: no events went with a step's record", n)
		}
		appends[n] = st.appends
	}
	if appends[8] != appends[1] {
		t.Errorf("history writes of their own: %d for 1 step, %d for 8; want the same", appends[1], appends[8])
	}
}

func TestAFollowerSeesEachEventAsItIsStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := memory.New()
	held := newHoldFirst()
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "book_flight" {
			held.hold()
		}
		return nil
	}}
	ex, _ := hExecutor(t, r, st, func(c *planexec.Config) { c.PollInterval = time.Millisecond })
	run := hRun(t, ex, "acme", "run-1")

	var followed []planexec.Event
	var followErr error
	sawSearch := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		once := sync.OnceFunc(func() { close(sawSearch) })
		defer once()
		for e, err := range hRun(t, ex, "acme", "run-1").Follow(ctx, 0) {
			if err != nil {
				followErr = err
				return
			}
			followed = append(followed, e)
			if e.Kind == planexec.EventStepExecuted && e.StepID == "s1" {
				once()
			}
			if e.Kind == planexec.EventPlanCompleted {
				return
			}
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := run.Execute(ctx, tripPlan())
		done <- err
	}()
	// The booking waits until the follower has seen the search finish:
	// events are followed while the run is still going.
	select {
	case <-sawSearch:
	case <-ctx.Done():
		t.Fatal("the follower never saw s1 executed while the run went on")
	}
	held.open()
	if err := <-done; err != nil {
		t.Fatalf("Execute: %v", err)
	}
	wg.Wait()
	if followErr != nil {
		t.Fatalf("Follow: %v", followErr)
	}
	hSame(t, followed, run.Events())
}

func TestARunWhosePlanningFailedHasAHistory(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	ex, _ := hExecutor(t, &recorder{}, st, func(c *planexec.Config) { c.MaxReplans = planexec.NoReplans })
	run := hRun(t, ex, "acme", "run-1")
	_, err := run.Plan(ctx, hGarbage{}, "get them to New York")
	var refused *planexec.PlanValidationError
	if !errors.As(err, &refused) {
		t.Fatalf("Plan: err = %v, want a refusal", err)
	}
	stored, err := run.History(ctx, 0, 100)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	hSame(t, stored, run.Events())
	if !slices.ContainsFunc(stored, func(e planexec.Event) bool { return e.Kind == planexec.EventPlanRefused }) {
		t.Errorf("stored history %v holds no PLAN_REFUSED", kinds(stored))
	}
	if _, err := st.LoadPlan(ctx, "acme", "run-1"); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("a run that never had a plan has a plan record: %v", err)
	}
}

// hGarbage is a planner whose model writes what is not a plan.
type hGarbage struct{}

func (hGarbage) Plan(context.Context, planexec.PlanRequest) (*planexec.PlanResponse, error) {
	return &planexec.PlanResponse{Payload: []byte(`{"steps": "book it all"}`)}, nil
}

func TestHistoryNeedsAStoreThatKeepsOne(t *testing.T) {
	// A store that keeps runs and claims, and no histories.
	noHistory := struct{ store.Store }{memory.New()}
	run, _ := newExecutor(t, &recorder{}, withStore(noHistory))
	var ce *planexec.ConfigurationError
	if _, err := run.History(context.Background(), 0, 10); !errors.As(err, &ce) {
		t.Errorf("History over a store with no histories: err = %v, want a *ConfigurationError", err)
	}
}
