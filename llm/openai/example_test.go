package openai_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/openai"
)

// A planner over OpenAI. The key comes from OPENAI_API_KEY; the example needs
// it, so it is compiled but not run.
func Example() {
	type Booking struct {
		Flight string `json:"flight"`
		Seats  int    `json:"seats" validate:"min=1,max=9"`
	}
	book, err := planexec.NewTool("book_flight", "Book seats on a flight.",
		func(ctx context.Context, b Booking) (string, error) { return "PNR-" + b.Flight, nil })
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

	model, err := openai.New("gpt-4o-mini", openai.WithTimeout(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	plan, err := run.Plan(ctx, planner, "book one seat on BA117")
	var pe *llm.ProviderError
	switch {
	case errors.As(err, &pe) && pe.Retryable:
		log.Fatalf("the provider is busy, try later: %v", err)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println(len(plan.Steps), "steps, cost", run.Usage().Total(), "tokens")
	res, err := run.Execute(ctx, plan)
	if err != nil {
		log.Fatal(err)
	}
	var pnr string
	_ = res.Outcome(plan.Steps[0].ID, &pnr)
	fmt.Println(pnr)
}

// A local model served by Ollama: no key, and JSON mode where the server has
// no Structured Outputs.
func ExampleNew_ollama() {
	model, err := openai.New("llama3.1",
		openai.WithBaseURL("http://localhost:11434/v1"),
		openai.WithAPIKey(""),
		openai.WithMode(openai.ModeJSONObject),
		openai.WithTimeout(2*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"}); err != nil {
		log.Fatal(err)
	}
}
