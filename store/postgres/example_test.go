package postgres_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/postgres"
)

type Shipment struct {
	Order string `json:"order"`
	Items int    `json:"items" validate:"min=1"`
}

// Two replicas share one database: the first runs the plan, the second
// resumes the same run and replays the step from the record instead of
// shipping twice. (It needs a database, so it is not run as an example;
// TestExample runs it when PLANEXEC_POSTGRES_URL is set.)
func Example() {
	ctx := context.Background()
	ship := planexec.MustTool("ship", "Ship an order.", func(ctx context.Context, s Shipment) (string, error) {
		return fmt.Sprintf("shipped %s (%d items)", s.Order, s.Items), nil
	})
	runID := uuid.NewString()
	replica := func() (*planexec.Run, func()) {
		store, err := postgres.Open(ctx, os.Getenv("PLANEXEC_POSTGRES_URL"), postgres.WithSchema("planexec_example"))
		if err != nil {
			panic(err)
		}
		// The one store keeps plans, claims and decisions.
		ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{ship}, Store: store})
		if err != nil {
			panic(err)
		}
		run, err := ex.Run(planexec.Delegation{RunID: runID, Tenant: "acme"})
		if err != nil {
			panic(err)
		}
		return run, func() { _ = store.Close() }
	}

	first, closeFirst := replica()
	defer closeFirst()
	res, err := first.Execute(ctx, planexec.Plan{Steps: []planexec.Step{
		{ID: "s1", Tool: "ship", Arguments: []byte(`{"order":"A-17","items":3}`)},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Steps["s1"].Outcome), res.Steps["s1"].Replayed)

	second, closeSecond := replica()
	defer closeSecond()
	if res, err = second.Resume(ctx); err != nil {
		panic(err)
	}
	fmt.Println(string(res.Steps["s1"].Outcome), res.Steps["s1"].Replayed, res.Complete)
}

func TestExample(t *testing.T) {
	pool := sharedPool(t)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{"planexec_example"}.Sanitize()+" CASCADE")
	})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	func() {
		defer func() { os.Stdout = stdout }()
		Example()
	}()
	w.Close()
	out, _ := io.ReadAll(r)
	want := "\"shipped A-17 (3 items)\" false\n\"shipped A-17 (3 items)\" true true\n"
	if string(out) != want {
		t.Errorf("Example printed\n%s\nwant\n%s", out, want)
	}
}
