package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// cancelRuns is how many runs the cancellation check cancels at a random
// moment.
const cancelRuns = 40

// effects counts, per run and step, the effects tools really had.
type effects struct {
	mu sync.Mutex
	n  map[[2]string]int
}

func (e *effects) add(run, step string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[[2]string{run, step}]++
}

func (e *effects) of(run, step string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[[2]string{run, step}]
}

// runCancellation cancels runs at random moments, over the real store, and
// resumes each: a step whose tool never acted must never be left in doubt,
// and every step's effect must happen exactly once in the end.
func runCancellation(t *testing.T, open Open) {
	t.Run("A run cancelled at any moment leaves no step in doubt whose tool never acted", func(t *testing.T) {
		k := setup(t, open)
		fx := &effects{n: map[[2]string]int{}}
		// The tool acts at once, or not at all when the run was cancelled
		// before it began, and then says so: it never fails after acting.
		act := planexec.MustTool("act", "Do something once.", func(ctx context.Context, a errand) (string, error) {
			if err := ctx.Err(); err != nil {
				return "", fmt.Errorf("not started: %w: %w", err, planexec.ErrNotApplied)
			}
			info, _ := planexec.CurrentStep(ctx)
			fx.add(info.RunID, info.StepID)
			return "done " + a.Item, nil
		}, planexec.Irreversible())
		ex, err := planexec.NewExecutor(planexec.Config{
			Tools: []*planexec.Tool{act},
			Gate: planexec.ApprovalGateFunc(func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
				return req.Approve("storetest"), nil
			}),
			Store: k.store(),
			Lease: lease,
			Now:   k.clk.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		// Two lanes of three, then one joining them.
		plan := planexec.Plan{Goal: "act once each", Steps: []planexec.Step{
			{ID: "a1", Tool: "act", Arguments: json.RawMessage(`{"item":"a1"}`)},
			{ID: "a2", Tool: "act", Arguments: json.RawMessage(`{"item":"a2"}`), DependsOn: []string{"a1"}},
			{ID: "a3", Tool: "act", Arguments: json.RawMessage(`{"item":"a3"}`), DependsOn: []string{"a2"}},
			{ID: "b1", Tool: "act", Arguments: json.RawMessage(`{"item":"b1"}`)},
			{ID: "b2", Tool: "act", Arguments: json.RawMessage(`{"item":"b2"}`), DependsOn: []string{"b1"}},
			{ID: "b3", Tool: "act", Arguments: json.RawMessage(`{"item":"b3"}`), DependsOn: []string{"b2"}},
			{ID: "z", Tool: "act", Arguments: json.RawMessage(`{"item":"z"}`), DependsOn: []string{"a3", "b3"}},
		}}
		rng := rand.New(rand.NewPCG(7, 11))
		// How long one whole run takes here, so cancellations land across it.
		span := timeOneRun(t, k, ex, plan)
		inDoubt, cancelled := 0, 0
		for i := range cancelRuns {
			id := fmt.Sprintf("cancel-%02d", i)
			run, err := ex.Run(planexec.Delegation{RunID: id, Tenant: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(k.ctx)
			timer := time.AfterFunc(time.Duration(rng.Int64N(int64(span)+1)), cancel)
			_, err = run.Execute(ctx, plan)
			timer.Stop()
			cancel()
			if errors.Is(err, context.Canceled) {
				cancelled++
			}
			if errors.Is(err, planexec.ErrInDoubt) {
				inDoubt++
				t.Errorf("run %s: a cancelled run left a step in doubt: %v", id, err)
			}
			// Whatever the cancellation left held runs out; then a new
			// run of the same id finishes the plan.
			k.clk.Advance(lease + time.Second)
			again, err := ex.Run(planexec.Delegation{RunID: id, Tenant: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			res, err := again.Resume(k.ctx)
			if errors.Is(err, store.ErrNoRecord) {
				res, err = again.Execute(k.ctx, plan) // cancelled before the plan was stored
			}
			if errors.Is(err, planexec.ErrInDoubt) {
				inDoubt++
			}
			if err != nil || !res.Complete {
				t.Errorf("run %s: resuming after the cancellation: %v", id, err)
				continue
			}
			for _, s := range plan.Steps {
				if n := fx.of(id, s.ID); n != 1 {
					t.Errorf("run %s: step %s acted %d times, want once", id, s.ID, n)
				}
			}
		}
		t.Logf("%d runs, %d cancelled mid-run, %d steps in doubt", cancelRuns, cancelled, inDoubt)
	})
}

// timeOneRun runs plan once to completion and returns how long it took.
func timeOneRun(t *testing.T, k kit, ex *planexec.Executor, plan planexec.Plan) time.Duration {
	t.Helper()
	run, err := ex.Run(planexec.Delegation{RunID: "cancel-warm-up", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := run.Execute(k.ctx, plan); err != nil {
		t.Fatalf("a run nobody cancels: %v", err)
	}
	return time.Since(start)
}
