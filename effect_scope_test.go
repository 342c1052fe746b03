package planexec_test

// A contract says whether its key names an effect of one run (the default)
// or of the tenant (OncePerTenant): the same refund asked for by two runs
// happens once.

import (
	"context"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

func TestAnEffectOncePerTenantHappensOnceWhicheverRunAsks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []planexec.ContractOption
		calls int // refund calls for two runs of acme and one of globex
	}{
		{"once per run", []planexec.ContractOption{planexec.KeyArguments("order")}, 3},
		{"once per tenant", []planexec.ContractOption{planexec.KeyArguments("order"), planexec.OncePerTenant()}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r := &recorder{}
			ex, _ := hExecutor(t, r, memory.New(), func(c *planexec.Config) {
				c.Tools = r.tools(map[string][]planexec.ContractOption{"refund": tc.opts})
			})
			var results []*planexec.Result
			for _, run := range []*planexec.Run{hRun(t, ex, "acme", "task-1"), hRun(t, ex, "acme", "task-2"), hRun(t, ex, "globex", "task-1")} {
				res, err := run.Execute(ctx, iOne(step("r1", "refund", `{"order":"O-77","amount":12.50,"currency":"GBP"}`)))
				if err != nil {
					t.Fatalf("Execute %s: %v", run.ID(), err)
				}
				results = append(results, res)
			}
			if n := callsOf(r, "refund"); n != tc.calls {
				t.Errorf("refund called %d times, want %d", n, tc.calls)
			}
			second := results[1].Steps["r1"]
			perTenant := tc.calls == 2
			if second.Replayed != perTenant || string(second.Outcome) != `"refunded O-77"` {
				t.Errorf("the second run's refund = %+v; replayed from the first: want %v", second, perTenant)
			}
			if results[2].Steps["r1"].Replayed {
				t.Errorf("another tenant's refund replayed acme's")
			}
			if (results[0].Steps["r1"].Key == second.Key) != perTenant {
				t.Errorf("keys %v and %v: shared between runs: want %v", results[0].Steps["r1"].Key, second.Key, perTenant)
			}
		})
	}
}

func TestPruningNeverLetsAnEffectOncePerTenantHappenAgain(t *testing.T) {
	ctx := context.Background()
	clk := planexec.NewFakeClock()
	st := memory.New(memory.WithClock(clk.Now))
	r := &recorder{}
	ex, _ := hExecutor(t, r, st, func(c *planexec.Config) {
		c.Now = clk.Now
		c.Tools = r.tools(map[string][]planexec.ContractOption{
			"refund": {planexec.KeyArguments("order"), planexec.OncePerTenant()},
		})
	})
	refund := iOne(step("r1", "refund", `{"order":"O-77","amount":12.50,"currency":"GBP"}`))
	search := iOne(iSearch("s1", "LHR"))
	for _, id := range []string{"task-1", "task-2"} {
		plan := refund
		if id == "task-2" {
			plan = search
		}
		if _, err := hRun(t, ex, "acme", id).Execute(ctx, plan); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(planexec.DefaultRetention + time.Hour)
	pruned, err := ex.Prune(ctx, "acme", 0)
	if err != nil || pruned.Runs != 2 || pruned.Claims != 1 {
		t.Fatalf("Prune = %+v, %v; want both runs and the search's claim dropped, the refund's kept", pruned, err)
	}
	res, err := hRun(t, ex, "acme", "task-3").Execute(ctx, refund)
	if err != nil {
		t.Fatal(err)
	}
	if n := callsOf(r, "refund"); n != 1 || !res.Steps["r1"].Replayed {
		t.Errorf("after pruning, the refund ran %d times in all (replayed: %v), want once", n, res.Steps["r1"].Replayed)
	}
}
