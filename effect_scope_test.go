package planexec_test

// A contract says whether its key names an effect of one run (the default)
// or of the tenant (OncePerTenant): the same refund asked for by two runs
// happens once.

import (
	"context"
	"testing"

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
