package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sync"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// errand is what the suite's tools take.
type errand struct {
	Item string `json:"item"`
}

// errands are three tools, the middle one irreversible, that count their
// calls.
type errands struct {
	mu    sync.Mutex
	calls map[string]int
}

func (e *errands) tool(name string, opts ...planexec.ContractOption) *planexec.Tool {
	return planexec.MustTool(name, "Run an errand.", func(ctx context.Context, a errand) (string, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.calls == nil {
			e.calls = map[string]int{}
		}
		e.calls[name]++
		return name + ":" + a.Item, nil
	}, opts...)
}

func (e *errands) counts() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.calls)
}

func runExecutor(t *testing.T, open Open) {
	t.Run("A plan held for a person is decided, resumed and replayed by new executors over the same stores", func(t *testing.T) {
		k := setup(t, open)
		tools := &errands{}
		// executor builds a new executor over the stores, and its run-1.
		executor := func(holder string, gate planexec.ApprovalGate) *planexec.Run {
			t.Helper()
			ex, err := planexec.NewExecutor(planexec.Config{
				Tools:  []*planexec.Tool{tools.tool("fetch"), tools.tool("pay", planexec.Irreversible()), tools.tool("notify")},
				Gate:   gate,
				Store:  k.store(),
				Holder: holder,
				Now:    k.clk.Now,
			})
			if err != nil {
				t.Fatalf("NewExecutor: %v", err)
			}
			run, err := ex.Run(planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "dana", Agent: "clerk"})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			return run
		}
		pending := planexec.ApprovalGateFunc(func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
			return req.Defer(), nil
		})
		var asked []string
		var askedMu sync.Mutex
		mustNotAsk := planexec.ApprovalGateFunc(func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
			askedMu.Lock()
			asked = append(asked, req.StepID)
			askedMu.Unlock()
			return req.Deny("storetest", "asked twice"), nil
		})
		plan := planexec.Plan{ID: "plan-1", Goal: "pay the bill", Steps: []planexec.Step{
			{ID: "s1", Tool: "fetch", Arguments: json.RawMessage(`{"item":"invoice"}`)},
			{ID: "s2", Tool: "pay", Arguments: json.RawMessage(`{"item":"invoice"}`), DependsOn: []string{"s1"}},
			{ID: "s3", Tool: "notify", Arguments: json.RawMessage(`{"item":"receipt"}`), DependsOn: []string{"s2"}},
		}}

		_, err := executor("first", pending).Execute(k.ctx, plan)
		var ap *planexec.ApprovalPendingError
		if !errors.As(err, &ap) {
			t.Fatalf("Execute with a pending gate: want *ApprovalPendingError, got %v", err)
		}
		if !ap.Stored || len(ap.Requests) != 1 || ap.Requests[0].StepID != "s2" {
			t.Fatalf("pending = %+v, want the plan stored and s2 waiting", ap)
		}
		if c := tools.counts(); len(c) != 0 {
			t.Fatalf("tools ran while approval was pending: %v", c)
		}
		if rec, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); err != nil || rec.Status != store.RunAwaitingApproval {
			t.Fatalf("record while pending = %+v, %v; want awaiting approval", rec, err)
		}

		k.clk.Advance(lease)
		if err := executor("second", mustNotAsk).Decide(k.ctx, ap.Requests[0].Approve("dana")); err != nil {
			t.Fatalf("Decide: %v", err)
		}

		res, err := executor("third", mustNotAsk).Resume(k.ctx)
		if err != nil || !res.Complete {
			t.Fatalf("Resume after the decision: %+v, %v", res, err)
		}
		for _, id := range []string{"s1", "s2", "s3"} {
			if s := res.Steps[id]; s.Status != planexec.StepDone || s.Replayed {
				t.Errorf("step %s = %+v, want run now", id, s)
			}
		}
		if s2 := res.Steps["s2"]; s2.ApprovedBy != "dana" || !jsonEqual(s2.Outcome, []byte(`"pay:invoice"`)) {
			t.Errorf("s2 = approved by %q with outcome %s, want dana's approval and \"pay:invoice\"", s2.ApprovedBy, s2.Outcome)
		}
		want := map[string]int{"fetch": 1, "pay": 1, "notify": 1}
		if c := tools.counts(); !maps.Equal(c, want) {
			t.Errorf("tool calls %v, want each once", c)
		}
		rec, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil || rec.Status != store.RunCompleted || len(rec.Steps) != 3 {
			t.Fatalf("record after the resume = %+v, %v; want completed with three steps", rec, err)
		}

		again, err := executor("fourth", mustNotAsk).Resume(k.ctx)
		if err != nil || !again.Complete {
			t.Fatalf("second Resume: %+v, %v", again, err)
		}
		for _, id := range []string{"s1", "s2", "s3"} {
			if s := again.Steps[id]; s.Status != planexec.StepDone || !s.Replayed || !jsonEqual(s.Outcome, res.Steps[id].Outcome) {
				t.Errorf("step %s on the second resume = %+v, want replayed with %s", id, s, res.Steps[id].Outcome)
			}
		}
		if c := tools.counts(); !maps.Equal(c, want) {
			t.Errorf("tool calls after the second resume %v, want still each once", c)
		}
		askedMu.Lock()
		defer askedMu.Unlock()
		if len(asked) != 0 {
			t.Errorf("the gate was asked again for %v although the decision was stored", asked)
		}
	})
}
