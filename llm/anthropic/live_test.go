package anthropic_test

import (
	"context"
	"os"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/planexec/planexec/llm/anthropic"
)

// TestLivePlansATrip calls the real API. It runs only when ANTHROPIC_API_KEY
// is set; ANTHROPIC_MODEL picks the model.
func TestLivePlansATrip(t *testing.T) {
	if os.Getenv("ANTHROPIC_API_KEY") == "" {
		t.Skip("ANTHROPIC_API_KEY is not set")
	}
	name := os.Getenv("ANTHROPIC_MODEL")
	if name == "" {
		name = string(sdk.ModelClaudeSonnet5_5)
	}
	m, err := anthropic.New(name, anthropic.WithTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ex := executor(t)
	plan, err := ex.Plan(ctx, planner(t, m), "Find a flight from LHR to JFK and book one seat on it.")
	if err != nil {
		t.Fatalf("Planned: %v", err)
	}
	if len(plan.Steps) == 0 {
		t.Fatal("an empty plan validated")
	}
	for _, s := range plan.Steps {
		t.Logf("%s: %s %s (after %v)", s.ID, s.Tool, s.Arguments, s.DependsOn)
	}
	u := ex.Usage()
	if u.Calls == 0 || u.InputTokens == 0 || u.OutputTokens == 0 {
		t.Errorf("usage = %+v", u)
	}
	t.Logf("usage %+v", u)
}
