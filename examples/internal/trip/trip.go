// Package trip is the examples' business trip: its tools, and a stand-in
// for a model that plans it, so that each example shows its own part (a
// terminal, a server) over the same job. It also opens the model and the
// store an example's flags name; the provider adapters and the durable
// stores are left out of the default build (providers.go and stores.go,
// with their build tags), and Rebuild builds an example again with them.
package trip

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
)

// The tools' arguments: each contract is generated from one of these.

type FlightSearch struct {
	Origin      string `json:"origin" validate:"len=3" jsonschema_description:"IATA airport code"`
	Destination string `json:"destination" validate:"len=3" jsonschema_description:"IATA airport code"`
	Date        string `json:"date" jsonschema_description:"departure date, YYYY-MM-DD"`
}

type RoomHold struct {
	Hotel    string          `json:"hotel"`
	Nights   int             `json:"nights" validate:"min=1,max=30"`
	Total    decimal.Decimal `json:"total" validate:"gt=0"`
	Currency string          `json:"currency" validate:"len=3"`
}

type Booking struct {
	Flight   string          `json:"flight"`
	Seats    int             `json:"seats" validate:"min=1,max=9"`
	Fare     decimal.Decimal `json:"fare" validate:"gt=0"`
	Currency string          `json:"currency" validate:"len=3"`
}

type Itinerary struct {
	To    string `json:"to" validate:"email"`
	Trip  string `json:"trip"`
	Notes string `json:"notes,omitempty"`
}

// Flight is what the search finds.
type Flight struct {
	Flight string          `json:"flight"`
	Fare   decimal.Decimal `json:"fare"`
}

// Work stands for a remote call of d.
func Work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Tools are the trip's tools; book is what booking a flight does once its
// step is cleared (nil: Book).
func Tools(book func(context.Context, Booking) (string, error)) []*planexec.Tool {
	if book == nil {
		book = Book
	}
	return []*planexec.Tool{
		planexec.MustTool("search_flights", "Find flights between two airports on a date.",
			func(ctx context.Context, s FlightSearch) ([]Flight, error) {
				return []Flight{{"BA117", decimal.RequireFromString("412.50")}, {"VS3", decimal.RequireFromString("455.00")}}, Work(ctx, 300*time.Millisecond)
			}),
		planexec.MustTool("hold_room", "Hold a hotel room; the hold lapses unless confirmed.",
			func(ctx context.Context, h RoomHold) (string, error) {
				return "HOLD-" + strings.ToUpper(h.Hotel[:min(3, len(h.Hotel))]), Work(ctx, 300*time.Millisecond)
			}, planexec.KeyArguments("hotel")),
		planexec.MustTool("book_flight", "Book and pay for seats on a flight. Cannot be undone.", book,
			planexec.Irreversible(), planexec.KeyArguments("flight", "seats")),
		planexec.MustTool("send_itinerary", "Email the itinerary.",
			func(ctx context.Context, it Itinerary) (string, error) {
				return "sent to " + it.To, Work(ctx, 100*time.Millisecond)
			}),
	}
}

// Book books a flight: it stands for a payment API called with the step's
// idempotency key, what the API deduplicates on.
func Book(ctx context.Context, b Booking) (string, error) {
	key, _ := planexec.IdempotencyKey(ctx)
	// Preparing the request: interrupted here, nothing was sent, and saying
	// so (ErrNotApplied) lets the step run again instead of leaving the
	// booking in doubt.
	if err := Work(ctx, 200*time.Millisecond); err != nil {
		return "", fmt.Errorf("booking not sent: %w: %w", err, planexec.ErrNotApplied)
	}
	return "PNR-" + b.Flight + "-" + key[max(0, len(key)-6):], nil // sent: the airline has it
}

// What the stand-in model writes. FirstPlan books "1" seat as a string,
// which the contract refuses; Plan is right. The booking reads the flight
// and its fare from what the search returns ({"$from": step, "path": JSON
// Pointer}), so nothing is guessed before the search has run. Booked and
// NotBooked answer in round 2, once the model was told what round 1 did.
const (
	FirstPlan = `{"goal":"get them to New York","steps":[
 {"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK","date":"2026-12-14"}},
 {"id":"s2","tool":"book_flight","arguments":{"flight":{"$from":"s1","path":"/0/flight"},"seats":"1","fare":{"$from":"s1","path":"/0/fare"},"currency":"GBP"}}]}`
	Plan = `{"goal":"get them to New York","steps":[
 {"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK","date":"2026-12-14"},"intent":"find the fare before booking"},
 {"id":"s2","tool":"hold_room","arguments":{"hotel":"Hudson","nights":3,"total":540.00,"currency":"GBP"},"intent":"a room near the office"},
 {"id":"s3","tool":"book_flight","arguments":{"flight":{"$from":"s1","path":"/0/flight"},"seats":1,"fare":{"$from":"s1","path":"/0/fare"},"currency":"GBP"},"intent":"book the cheapest flight found"},
 {"id":"s4","tool":"send_itinerary","arguments":{"to":"traveller@example.com","trip":"LHR-JFK 14 Dec, 3 nights"},"depends_on":["s2","s3"]}],"answer":null,"question":null}`
	Booked    = `{"goal":"","steps":[],"question":null,"answer":"Booked BA117 (LHR-JFK, 14 Dec) at 412.50 GBP, held a room at the Hudson for 3 nights, and emailed the itinerary to traveller@example.com."}`
	NotBooked = `{"goal":"","steps":[],"question":null,"answer":"Not booked: the booking of BA117 at 412.50 GBP was not approved. A room at the Hudson is held for 3 nights."}`
)

// Model stands in for a model, following the conversation as one would:
// the plan (when refuseFirst, FirstPlan first, and Plan once told why it
// was refused), then the answer once told what round 1 did. An ordinary
// completion (no plan asked for) gets a line saying what it is.
func Model(refuseFirst bool) llm.Model {
	return scripted.Respond(func(req *llm.Request) scripted.Reply {
		if req.Output == nil {
			return scripted.Reply{Content: "I am the scripted stand-in for a model. Send \"planner_mode\": true and an x-session-id header to plan a trip."}
		}
		told := req.Messages[0].Content
		switch {
		case strings.Contains(told, "Round 1 ran") && strings.Contains(told, "did not approve"):
			return scripted.Reply{Content: NotBooked}
		case strings.Contains(told, "Round 1 ran"):
			return scripted.Reply{Content: Booked}
		case refuseFirst && len(req.Messages) == 1:
			return scripted.Reply{Content: FirstPlan}
		default:
			return scripted.Reply{Content: Plan}
		}
	})
}
