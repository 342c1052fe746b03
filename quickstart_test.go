package planexec_test

import (
	"context"
	"errors"
	"testing"

	"github.com/planexec/planexec"
)

// The README's quickstart, kept compiling and passing here.
func TestBookingIsRefusedWithAStringForSeats(t *testing.T) {
	type Booking struct {
		Flight string `json:"flight"`
		Seats  int    `json:"seats" validate:"min=1,max=9"`
	}
	book := planexec.NewTool("book_flight", "Book seats.", func(ctx context.Context, b Booking) (string, error) {
		return "PNR-" + b.Flight, nil
	})
	ex, _ := planexec.NewExecutor(planexec.Config{
		Tools:     []planexec.Tool{book},
		Contracts: []*planexec.Contract{planexec.MustContract[Booking]("book_flight")},
		Agent:     planexec.Agent{Name: "courier", Tools: []string{"book_flight"}},
	})
	err := ex.Validate(planexec.Plan{Steps: []planexec.Step{
		{ID: "s1", Tool: "book_flight", Arguments: []byte(`{"flight":"BA117","seats":"1"}`)},
	}})
	if !errors.Is(err, planexec.ReasonArguments) {
		t.Fatalf("want an arguments refusal, got %v", err) // "/seats: expected integer, got string"
	}
}
