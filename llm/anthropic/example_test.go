package anthropic_test

import (
	"context"
	"fmt"
	"log"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm/anthropic"
)

// A planner that plans with Claude. It needs ANTHROPIC_API_KEY (or
// anthropic.WithAPIKey) and the network, so it is compiled, not run.
func Example() {
	ctx := context.Background()
	book, err := planexec.NewTool("book_flight", "Book seats on a flight.",
		func(ctx context.Context, b ExampleBooking) (string, error) { return "PNR-" + b.Flight, nil })
	if err != nil {
		log.Fatal(err)
	}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{book}})
	if err != nil {
		log.Fatal(err)
	}
	run, err := ex.Run(planexec.Delegation{Agent: "courier"})
	if err != nil {
		log.Fatal(err)
	}

	model, err := anthropic.New("claude-sonnet-4-5", anthropic.WithMaxTokens(2048))
	if err != nil {
		log.Fatal(err)
	}
	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"}) // holds no tools
	if err != nil {
		log.Fatal(err)
	}
	plan, err := run.Plan(ctx, planner, "book one seat on BA117")
	if err != nil {
		log.Fatal(err) // a *llm.ProviderError, or a *planexec.PlanValidationError past MaxReplans
	}
	fmt.Println(len(plan.Steps), "steps; tokens used:", run.Usage().Total())
}

type ExampleBooking struct {
	Flight string `json:"flight"`
	Seats  int    `json:"seats" validate:"min=1,max=9"`
}
