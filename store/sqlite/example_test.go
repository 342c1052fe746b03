package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/sqlite"
)

type Refund struct {
	Order string `json:"order"`
	Cents int    `json:"cents" validate:"min=1"`
}

// One file keeps the plan, each step's record and each effect's claim; a
// second executor for the same run replays the step instead of refunding
// twice.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := sqlite.Open(ctx, filepath.Join(dir, "runs.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	refund := planexec.NewTool("refund", "Refund an order.", func(ctx context.Context, r Refund) (string, error) {
		return "refunded " + r.Order, nil
	})
	executor := func() *planexec.Executor {
		ex, err := planexec.NewExecutor(planexec.Config{
			Tools:       []planexec.Tool{refund},
			Contracts:   []*planexec.Contract{planexec.MustContract[Refund]("refund")},
			Agent:       planexec.Agent{Name: "support", Tools: []string{"refund"}},
			Delegation:  planexec.Delegation{RunID: "run-42", Tenant: "acme"},
			Plans:       store,
			Idempotency: store,
		})
		if err != nil {
			log.Fatal(err)
		}
		return ex
	}

	plan := planexec.Plan{ID: "p1", Steps: []planexec.Step{
		{ID: "s1", Tool: "refund", Arguments: []byte(`{"order":"A-17","cents":1250}`)},
	}}
	first, err := executor().Execute(ctx, plan)
	if err != nil {
		log.Fatal(err)
	}
	again, err := executor().Execute(ctx, plan)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(first.Steps["s1"].Outcome), first.Steps["s1"].Replayed)
	fmt.Println(string(again.Steps["s1"].Outcome), again.Steps["s1"].Replayed)
	// Output:
	// "refunded A-17" false
	// "refunded A-17" true
}
