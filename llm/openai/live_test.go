package openai_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/planexec/planexec/llm/openai"
)

// TestLiveTrip plans the example trip with a real endpoint. It runs only when
// OPENAI_API_KEY is set; OPENAI_MODEL names the model (default gpt-4o-mini)
// and OPENAI_BASE_URL the endpoint (default OpenAI). Nothing is executed.
func TestLiveTrip(t *testing.T) {
	if os.Getenv("OPENAI_API_KEY") == "" {
		t.Skip("set OPENAI_API_KEY (and OPENAI_MODEL) to plan with a real endpoint")
	}
	name := os.Getenv("OPENAI_MODEL")
	if name == "" {
		name = "gpt-4o-mini"
	}
	model, err := openai.New(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ex := tripExecutor(t)
	plan, err := ex.Plan(ctx, planner(t, model),
		"Get the traveller from London Heathrow to New York JFK on 2026-12-14: find a flight, hold 3 nights at the Hudson "+
			"hotel for 540.00 GBP, book one seat on the flight found (fare 412.50 GBP), then email the itinerary to traveller@example.com.")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range plan.Steps {
		t.Logf("%s %s %s after %v", s.ID, s.Tool, s.Arguments, s.DependsOn)
	}
	for _, e := range ex.Events() {
		t.Logf("%s attempt %d reason %q model %q request %q usage %+v", e.Kind, e.Attempt, e.Reason, e.Model, e.RequestID, e.Usage)
	}
	if len(plan.Steps) < 3 {
		t.Errorf("a %d-step plan for a four-part task", len(plan.Steps))
	}
}
