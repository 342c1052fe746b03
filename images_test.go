package planexec_test

import (
	"context"
	"slices"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
)

// seeing passes the images a task came with to the planner it wraps.
type seeing struct {
	planexec.Planner
	images []llm.Image
}

func (s seeing) Plan(ctx context.Context, req planexec.PlanRequest) (*planexec.PlanResponse, error) {
	req.Images = s.images
	return s.Planner.Plan(ctx, req)
}

func TestATasksImagesReachTheModelWithTheTaskMessage(t *testing.T) {
	planner, model := doPlanner(t)
	ex, _ := newExecutor(t, &recorder{}, nil)
	receipt := llm.Image{MediaType: "image/png", Data: []byte("\x89PNG receipt")}
	if _, err := ex.Do(context.Background(), seeing{planner, []llm.Image{receipt}}, "book the flight on this receipt"); err != nil {
		t.Fatalf("Do: %v", err)
	}
	reqs := model.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model was never asked")
	}
	first := reqs[0].Messages[0]
	if first.Role != llm.RoleUser || len(first.Images) != 1 ||
		first.Images[0].MediaType != "image/png" || !slices.Equal(first.Images[0].Data, receipt.Data) {
		t.Errorf("the first request's task message carries %+v, want the receipt", first.Images)
	}
}

func TestAPlanRequestWithoutImagesSendsNone(t *testing.T) {
	planner, model := doPlanner(t)
	ex, _ := newExecutor(t, &recorder{}, nil)
	if _, err := ex.Do(context.Background(), planner, "get them to New York"); err != nil {
		t.Fatalf("Do: %v", err)
	}
	for i, r := range model.Requests() {
		for _, m := range r.Messages {
			if len(m.Images) != 0 {
				t.Errorf("request %d carries images %+v", i, m.Images)
			}
		}
	}
}
