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

// One file keeps the plan, each step's record and each effect's claim; the
// same run in a new executor replays the step instead of refunding twice.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := sqlite.Open(ctx, filepath.Join(dir, "runs.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	refund, err := planexec.NewTool("refund", "Refund an order.", func(ctx context.Context, r Refund) (string, error) {
		return "refunded " + r.Order, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// run builds a new executor over the file, as a restarted process
	// would, and the run it resumes.
	run := func() *planexec.Run {
		ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{refund}, Store: store})
		if err != nil {
			log.Fatal(err)
		}
		r, err := ex.Run(planexec.Delegation{RunID: "run-42", Tenant: "acme"})
		if err != nil {
			log.Fatal(err)
		}
		return r
	}

	plan := planexec.Plan{ID: "p1", Steps: []planexec.Step{
		{ID: "s1", Tool: "refund", Arguments: []byte(`{"order":"A-17","cents":1250}`)},
	}}
	first, err := run().Execute(ctx, plan)
	if err != nil {
		log.Fatal(err)
	}
	again, err := run().Execute(ctx, plan)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(first.Steps["s1"].Outcome), first.Steps["s1"].Replayed)
	fmt.Println(string(again.Steps["s1"].Outcome), again.Steps["s1"].Replayed)
	// Output:
	// "refunded A-17" false
	// "refunded A-17" true
}
