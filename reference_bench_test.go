package planexec

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/shopspring/decimal"
)

// Twelve tools of a travel desk, with arguments and outcomes of the shapes
// services write: strings, integers, decimals, optional members, lists and
// nested objects.
type (
	catSearch struct {
		Origin      string `json:"origin" validate:"len=3" jsonschema_description:"IATA airport code"`
		Destination string `json:"destination" validate:"len=3" jsonschema_description:"IATA airport code"`
		Date        string `json:"date" jsonschema_description:"departure date, YYYY-MM-DD"`
		Cabin       string `json:"cabin,omitempty" validate:"omitempty,oneof=economy business first"`
	}
	catOffer struct {
		Flight    string          `json:"flight"`
		Fare      decimal.Decimal `json:"fare"`
		Currency  string          `json:"currency"`
		SeatsLeft int             `json:"seats_left"`
	}
	catBooking struct {
		Flight   string          `json:"flight"`
		Seats    int             `json:"seats" validate:"min=1,max=9"`
		Fare     decimal.Decimal `json:"fare" validate:"gt=0"`
		Currency string          `json:"currency" validate:"len=3"`
	}
	catTicket struct {
		PNR    string `json:"pnr"`
		Flight string `json:"flight"`
	}
	catRoom struct {
		Hotel    string          `json:"hotel"`
		Nights   int             `json:"nights" validate:"min=1,max=30"`
		Total    decimal.Decimal `json:"total" validate:"gt=0"`
		Currency string          `json:"currency" validate:"len=3"`
	}
	catHold struct {
		Hold    string    `json:"hold"`
		Expires string    `json:"expires"`
		Rooms   []catRoom `json:"rooms"`
	}
	catPerson struct {
		Email string `json:"email" validate:"email"`
		Name  string `json:"name"`
	}
	catProfile struct {
		Name      string   `json:"name"`
		Email     string   `json:"email"`
		Loyalty   *string  `json:"loyalty,omitempty"`
		Addresses []string `json:"addresses"`
	}
	catMessage struct {
		To      string   `json:"to" validate:"email"`
		Subject string   `json:"subject"`
		Body    string   `json:"body"`
		CC      []string `json:"cc,omitempty"`
	}
	catOrder struct {
		Order string `json:"order"`
	}
	catOrderInfo struct {
		Order    string          `json:"order"`
		Amount   decimal.Decimal `json:"amount"`
		Currency string          `json:"currency"`
		Lines    []catLine       `json:"lines"`
	}
	catLine struct {
		SKU      string `json:"sku"`
		Quantity int    `json:"quantity"`
	}
	catRefund struct {
		Order    string          `json:"order"`
		Amount   decimal.Decimal `json:"amount" validate:"gt=0"`
		Currency string          `json:"currency" validate:"len=3"`
		Reason   string          `json:"reason,omitempty"`
	}
)

func catalogTools(b testing.TB) []*Tool {
	b.Helper()
	var tools []*Tool
	add := func(t *Tool, err error) {
		if err != nil {
			b.Fatal(err)
		}
		tools = append(tools, t)
	}
	add(NewTool("search_flights", "Find flights.", func(context.Context, catSearch) ([]catOffer, error) { return nil, nil }))
	add(NewTool("book_flight", "Book seats.", func(context.Context, catBooking) (catTicket, error) { return catTicket{}, nil }, Irreversible()))
	add(NewTool("cancel_flight", "Cancel a booking.", func(context.Context, catTicket) (bool, error) { return true, nil }, Irreversible()))
	add(NewTool("search_hotels", "Find hotels.", func(context.Context, catSearch) ([]catRoom, error) { return nil, nil }))
	add(NewTool("hold_room", "Hold a room.", func(context.Context, catRoom) (catHold, error) { return catHold{}, nil }))
	add(NewTool("confirm_room", "Confirm a hold.", func(context.Context, catOrder) (catHold, error) { return catHold{}, nil }, Irreversible()))
	add(NewTool("find_person", "Find a person.", func(context.Context, catPerson) (catProfile, error) { return catProfile{}, nil }))
	add(NewTool("send_email", "Send an email.", func(context.Context, catMessage) (string, error) { return "", nil }))
	add(NewTool("lookup_order", "Look up an order.", func(context.Context, catOrder) (catOrderInfo, error) { return catOrderInfo{}, nil }))
	add(NewTool("refund", "Refund an order.", func(context.Context, catRefund) (string, error) { return "", nil }, Irreversible()))
	add(NewTool("list_orders", "List a person's orders.", func(context.Context, catPerson) ([]catOrderInfo, error) { return nil, nil }))
	add(NewTool("note", "Write a note on an order.", func(context.Context, catMessage) (int, error) { return 0, nil }))
	return tools
}

// BenchmarkPlanSchema measures what a model is shown for a twelve-tool
// catalog: the plan schema with and without references, and the catalog
// (arguments and outcome schemas) the planner's prompt carries.
func BenchmarkPlanSchema(b *testing.B) {
	tools := catalogTools(b)
	specs := make([]ToolSpec, len(tools))
	withoutOutputs := make([]ToolSpec, len(tools))
	for i, t := range tools {
		specs[i] = t.spec()
		withoutOutputs[i] = specs[i]
		withoutOutputs[i].Output = nil
	}
	var with, without []byte
	b.ReportAllocs()
	for b.Loop() {
		with = planSchema(specs, true)
	}
	without = planSchema(specs, false)
	catalog, _ := json.MarshalIndent(specs, "", "  ")
	plain, _ := json.MarshalIndent(withoutOutputs, "", "  ")
	b.ReportMetric(float64(len(with)), "schema-bytes")
	b.ReportMetric(float64(len(without)), "schema-bytes-without-refs")
	b.ReportMetric(float64(len(catalog)), "catalog-bytes")
	b.ReportMetric(float64(len(plain)), "catalog-bytes-without-outputs")
}

// BenchmarkValidateReferences validates a 24-step plan in which 20 steps read
// an earlier step's outcome (a chain of lookups, refunds and notes), beside
// the same plan with every value written out.
func BenchmarkValidateReferences(b *testing.B) {
	ex, err := NewExecutor(Config{Tools: catalogTools(b), Gate: DecideLater})
	if err != nil {
		b.Fatal(err)
	}
	run, err := ex.Run(Delegation{RunID: "bench", Tenant: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	plans := map[string]Plan{"references": refPlan(true), "literal": refPlan(false)}
	for _, name := range []string{"references", "literal"} {
		plan := plans[name]
		b.Run(name, func(b *testing.B) {
			refs := 0
			b.ReportAllocs()
			for b.Loop() {
				v, err := run.validate(&plan, nil, nil, &run.d)
				if err != nil {
					b.Fatal(err)
				}
				refs = 0
				for _, s := range v.steps {
					refs += len(s.refs)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/plan")
			b.ReportMetric(float64(refs), "references")
		})
	}
}

// refPlan is four lookups, each followed by five steps that wait on it: a
// refund of its amount, a note, a second lookup and an email read it (five
// references), a refund of a line does not: 24 steps and 20 references.
// Without references the same values are written out.
func refPlan(refs bool) Plan {
	var steps []Step
	val := func(ref, path, literal string) string {
		if refs {
			return fmt.Sprintf(`{"$from":%q,"path":%q}`, ref, path)
		}
		return literal
	}
	for g := range 4 {
		look := fmt.Sprintf("look%d", g)
		steps = append(steps, Step{ID: look, Tool: "lookup_order", Arguments: json.RawMessage(fmt.Sprintf(`{"order":"o-%d"}`, g))})
		add := func(id, tool, args string) {
			s := Step{ID: fmt.Sprintf("%s-%d", id, g), Tool: tool, Arguments: json.RawMessage(args)}
			if !refs {
				s.DependsOn = []string{look}
			}
			steps = append(steps, s)
		}
		add("refund", "refund", fmt.Sprintf(`{"order":%s,"amount":%s,"currency":"GBP"}`, val(look, "/order", fmt.Sprintf(`"o-%d"`, g)), val(look, "/amount", "12.50")))
		add("note", "note", fmt.Sprintf(`{"to":"desk@example.com","subject":%s,"body":"refunded"}`, val(look, "/order", fmt.Sprintf(`"o-%d"`, g))))
		add("again", "lookup_order", fmt.Sprintf(`{"order":%s}`, val(look, "/lines/0/sku", fmt.Sprintf(`"sku-%d"`, g))))
		add("mail", "send_email", fmt.Sprintf(`{"to":"desk@example.com","subject":"order %d","body":%s}`, g, val(look, "/order", fmt.Sprintf(`"o-%d"`, g))))
		add("line", "refund", fmt.Sprintf(`{"order":"l-%d","amount":1,"currency":"GBP","reason":"a line"}`, g))
	}
	return Plan{ID: "p", Revision: 1, Goal: "refunds", Steps: steps}
}
