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
	book, err := planexec.NewTool("book_flight", "Book seats.", func(ctx context.Context, b Booking) (string, error) {
		return "PNR-" + b.Flight, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The contract on its own, as a test of the tool's arguments:
	err = book.Contract().Check([]byte(`{"flight":"BA117","seats":"1"}`))
	if !errors.Is(err, planexec.ReasonArguments) {
		t.Fatalf("want an arguments refusal, got %v", err) // "/seats: expected integer, got string"
	}
	// And the same plan step refused by a run, before anything runs:
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{book}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := ex.Run(planexec.Delegation{Tenant: "acme", User: "dana"})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Validate(planexec.Plan{Steps: []planexec.Step{
		{ID: "s1", Tool: "book_flight", Arguments: []byte(`{"flight":"BA117","seats":"1"}`)},
	}})
	if !errors.Is(err, planexec.ReasonArguments) {
		t.Fatalf("want an arguments refusal, got %v", err)
	}
}
