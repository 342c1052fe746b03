package planexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

// What a search finds, as its tool returns it: the booking reads it.
type Offer struct {
	Flight    string          `json:"flight"`
	Fare      decimal.Decimal `json:"fare"`
	SeatsLeft int             `json:"seats_left"`
	Price     float64         `json:"price"`
	Note      *string         `json:"note,omitempty"`
	Legs      []string        `json:"legs"`
	Operator  Operator        `json:"operator"`
}

type Operator struct {
	Name string `json:"name"`
	Code string `json:"code"`
}

// Carrier is what a step may be given from an Offer's operator.
type Carrier struct {
	Operator Operator `json:"operator"`
	Legs     []string `json:"legs"`
}

// offers serves the tools of the tests here and counts what they did.
type offers struct {
	mu     sync.Mutex
	found  []Offer        // what search_flights returns
	loose  any            // what quote (a tool that returns any) returns
	calls  []string       // tool names, in order
	booked []Booking      // what book_flight was given
	keys   map[string]int // idempotency keys book_flight was called with
}

func (o *offers) called(tool string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, tool)
}

func (o *offers) count(tool string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.calls {
		if c == tool {
			n++
		}
	}
	return n
}

func (o *offers) tools(bookOpts ...planexec.ContractOption) []*planexec.Tool {
	if bookOpts == nil {
		bookOpts = []planexec.ContractOption{planexec.Irreversible(), planexec.KeyArguments("flight", "seats")}
	}
	return []*planexec.Tool{
		planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s Search) ([]Offer, error) {
			o.called("search_flights")
			o.mu.Lock()
			defer o.mu.Unlock()
			return o.found, nil
		}),
		planexec.MustTool("quote", "Quote a fare; its outcome has no declared shape.", func(ctx context.Context, s Search) (any, error) {
			o.called("quote")
			return o.loose, nil
		}),
		planexec.MustTool("book_flight", "Book a flight.", func(ctx context.Context, b Booking) (string, error) {
			o.called("book_flight")
			key, _ := planexec.IdempotencyKey(ctx)
			o.mu.Lock()
			defer o.mu.Unlock()
			o.booked = append(o.booked, b)
			if o.keys == nil {
				o.keys = map[string]int{}
			}
			o.keys[key]++
			return "PNR-" + b.Flight, nil
		}, bookOpts...),
		planexec.MustTool("charter", "Charter with a carrier.", func(ctx context.Context, c Carrier) (string, error) {
			o.called("charter")
			return "chartered " + c.Operator.Code, nil
		}),
	}
}

func newOffers() *offers {
	return &offers{found: []Offer{
		{Flight: "BA117", Fare: decimal.RequireFromString("412.50"), SeatsLeft: 3, Price: 412.5, Legs: []string{"LHR", "JFK"}, Operator: Operator{"British Airways", "BA"}},
		{Flight: "VS3", Fare: decimal.RequireFromString("455.00"), SeatsLeft: 0, Price: 455, Legs: []string{"LHR", "JFK"}, Operator: Operator{"Virgin", "VS"}},
	}}
}

// refRun is a run over o's tools, with gate and a memory store.
func refRun(t *testing.T, o *offers, gate planexec.ApprovalGate, edit ...func(*planexec.Config)) (*planexec.Executor, *planexec.Run) {
	t.Helper()
	cfg := planexec.Config{Tools: o.tools(), Gate: gate, Store: memory.New()}
	for _, e := range edit {
		e(&cfg)
	}
	ex, err := planexec.NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "trip-1", Tenant: "acme", User: "dana"})
	if err != nil {
		t.Fatal(err)
	}
	return ex, run
}

const searchArgs = `{"origin":"LHR","destination":"JFK"}`

// bookFound books the first flight found at its fare: two references.
func bookFound(extra string) planexec.Plan {
	return planexec.Plan{Goal: "book what the search found", Steps: []planexec.Step{
		step("s1", "search_flights", searchArgs),
		step("s2", "book_flight", `{"flight":{"$from":"s1","path":"/0/flight"},"seats":1,"fare":{"$from":"s1","path":"/0/fare"}`+extra+`}`),
	}}
}

func TestABookingReadsTheFlightAndFareTheSearchFound(t *testing.T) {
	o := newOffers()
	gate := &approve{}
	_, run := refRun(t, o, gate)
	res, err := run.Execute(context.Background(), bookFound(""))
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	// The reference is the dependency: s2 ran after s1 without depends_on.
	if !slices.Equal(o.calls, []string{"search_flights", "book_flight"}) {
		t.Fatalf("calls %v, want the search then the booking", o.calls)
	}
	want := Booking{Flight: "BA117", Seats: 1, Fare: decimal.RequireFromString("412.50")}
	if got := o.booked[0]; got.Flight != want.Flight || got.Seats != 1 || !got.Fare.Equal(want.Fare) {
		t.Errorf("booked %+v, want %+v", got, want)
	}
	var pnr string
	if err := res.Outcome("s2", &pnr); err != nil || pnr != "PNR-BA117" {
		t.Errorf("outcome %q, %v", pnr, err)
	}
	// The person was asked with the values that would really be booked.
	asked := gate.Asked()
	if len(asked) != 1 {
		t.Fatalf("asked %d times, want once", len(asked))
	}
	var shown map[string]json.RawMessage
	if err := json.Unmarshal(asked[0].Arguments, &shown); err != nil {
		t.Fatal(err)
	}
	// The outcome recorded the fare as json.Marshal writes a decimal.
	if string(shown["flight"]) != `"BA117"` || string(shown["fare"]) != `"412.5"` {
		t.Errorf("the approval shows %s, want the resolved flight and fare", asked[0].Arguments)
	}
}

func TestTheKeyOfAStepWithReferencesIsThatOfItsResolvedArguments(t *testing.T) {
	// Once per tenant, so two runs meet on one key: a run that names the
	// flight and a run that reads it from the search book once.
	o := newOffers()
	tools := o.tools(planexec.KeyArguments("flight", "seats"), planexec.OncePerTenant())
	ex, err := planexec.NewExecutor(planexec.Config{Tools: tools, Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	literal, _ := ex.Run(planexec.Delegation{RunID: "by-hand", Tenant: "acme"})
	first, err := literal.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		step("b", "book_flight", `{"flight":"BA117","seats":1,"fare":412.50}`)}})
	if err != nil {
		t.Fatal(err)
	}
	byRef, _ := ex.Run(planexec.Delegation{RunID: "by-reference", Tenant: "acme"})
	second, err := byRef.Execute(context.Background(), bookFound(""))
	if err != nil {
		t.Fatal(err)
	}
	if n := o.count("book_flight"); n != 1 {
		t.Errorf("book_flight called %d times, want once: the resolved arguments are the same effect", n)
	}
	if !second.Steps["s2"].Replayed || second.Steps["s2"].Key != first.Steps["b"].Key {
		t.Errorf("the referring step's key %v (replayed %v), want %v", second.Steps["s2"].Key, second.Steps["s2"].Replayed, first.Steps["b"].Key)
	}
}

// refused executes plan and expects a refusal for reason at step s2 with a
// violation at path whose text holds each of says; nothing may have run.
func refused(t *testing.T, plan planexec.Plan, reason planexec.Reason, path string, says ...string) {
	t.Helper()
	o := newOffers()
	_, run := refRun(t, o, &approve{})
	_, err := run.Execute(context.Background(), plan)
	var perr *planexec.PlanValidationError
	if !errors.As(err, &perr) {
		t.Fatalf("Execute: %v, want a *PlanValidationError", err)
	}
	if perr.Reason != reason || perr.Step != "s2" {
		t.Fatalf("refused %s at step %q (%v), want %s at s2", perr.Reason, perr.Step, perr.Violations, reason)
	}
	if len(perr.Violations) == 0 {
		t.Fatalf("no violation: %v", perr)
	}
	v := perr.Violations[0]
	if v.Path != path {
		t.Errorf("violation at %q (%s), want %q", v.Path, v.Why, path)
	}
	for _, s := range says {
		if !strings.Contains(v.Why, s) {
			t.Errorf("violation %q does not say %q", v.Why, s)
		}
	}
	if len(o.calls) != 0 {
		t.Errorf("tools ran before the refusal: %v", o.calls)
	}
}

func plan2(second string, deps ...string) planexec.Plan {
	return planexec.Plan{Steps: []planexec.Step{step("s1", "search_flights", searchArgs), step("s2", "book_flight", second, deps...)}}
}

func TestAReferenceThatCannotWorkIsRefusedBeforeAnythingRuns(t *testing.T) {
	t.Run("to a step nobody planned", func(t *testing.T) {
		refused(t, plan2(`{"flight":{"$from":"s9","path":"/0/flight"},"seats":1}`), planexec.ReasonDependency, "/steps/1/arguments/flight", `"s9"`, "nobody planned")
	})
	t.Run("to its own outcome", func(t *testing.T) {
		refused(t, plan2(`{"flight":{"$from":"s2","path":""},"seats":1}`), planexec.ReasonCycle, "/steps/1/arguments/flight", "own outcome")
	})
	t.Run("into a path the outcome's type lacks", func(t *testing.T) {
		refused(t, plan2(`{"flight":{"$from":"s1","path":"/0/number"},"seats":1}`), planexec.ReasonReference, "/flight", `"s1"`, `"/0/number"`, `no member "number"`)
	})
	t.Run("a name where an index goes", func(t *testing.T) {
		refused(t, plan2(`{"flight":{"$from":"s1","path":"/first/flight"},"seats":1}`), planexec.ReasonReference, "/flight", "no index")
	})
	t.Run("a string where an integer goes", func(t *testing.T) {
		refused(t, plan2(`{"flight":"BA117","seats":{"$from":"s1","path":"/0/flight"}}`), planexec.ReasonReference, "/seats", "a string where an integer goes")
	})
	t.Run("a number where an integer goes", func(t *testing.T) {
		refused(t, plan2(`{"flight":"BA117","seats":{"$from":"s1","path":"/0/price"}}`), planexec.ReasonReference, "/seats", "a number where an integer goes")
	})
	t.Run("an optional value where a required one goes", func(t *testing.T) {
		refused(t, plan2(`{"flight":{"$from":"s1","path":"/0/note"},"seats":1}`), planexec.ReasonReference, "/flight", "may be absent or null")
	})
	t.Run("a list where a string goes", func(t *testing.T) {
		refused(t, plan2(`{"flight":{"$from":"s1","path":"/0/legs"},"seats":1}`), planexec.ReasonReference, "/flight", "a list where a string goes")
	})
	t.Run("a list where an object goes", func(t *testing.T) {
		p := planexec.Plan{Steps: []planexec.Step{step("s1", "search_flights", searchArgs),
			step("s2", "charter", `{"operator":{"$from":"s1","path":""},"legs":[]}`)}}
		refused(t, p, planexec.ReasonReference, "/operator", "a list where an object goes")
	})
	t.Run("an object whose members do not all fit", func(t *testing.T) {
		p := planexec.Plan{Steps: []planexec.Step{step("s1", "search_flights", searchArgs),
			step("s2", "charter", `{"operator":{"$from":"s1","path":"/0"},"legs":[]}`)}}
		refused(t, p, planexec.ReasonReference, "/operator", `no member "name"`)
	})
	t.Run("into a cycle", func(t *testing.T) {
		p := planexec.Plan{Steps: []planexec.Step{
			step("s1", "search_flights", searchArgs, "s2"),
			step("s2", "book_flight", `{"flight":{"$from":"s1","path":"/0/flight"},"seats":1}`)}}
		_, run := refRun(t, newOffers(), &approve{})
		_, err := run.Execute(context.Background(), p)
		if !errors.Is(err, planexec.ReasonCycle) {
			t.Fatalf("Execute: %v, want a cycle", err)
		}
	})
	t.Run("not written as a reference", func(t *testing.T) {
		refused(t, plan2(`{"flight":{"$from":"s1","path":"/0/flight","step":"s1"},"seats":1}`), planexec.ReasonReference, "/flight/step", "unknown key")
		refused(t, plan2(`{"flight":{"$from":1,"path":"/0/flight"},"seats":1}`), planexec.ReasonReference, "/flight/$from", "expected string")
		refused(t, plan2(`{"flight":{"$from":"s1","path":"0/flight"},"seats":1}`), planexec.ReasonReference, "/flight/path", "JSON Pointer")
	})
	t.Run("where the arguments have no member", func(t *testing.T) {
		refused(t, plan2(`{"flight":"BA117","seats":1,"gate":{"$from":"s1","path":"/0/flight"}}`), planexec.ReasonArguments, "/gate", "no member")
	})
	t.Run("beside an argument of the wrong type", func(t *testing.T) {
		refused(t, plan2(`{"flight":{"$from":"s1","path":"/0/flight"},"seats":"1"}`), planexec.ReasonArguments, "/seats", "expected integer")
	})
}

func TestAReferenceThatFitsIsAccepted(t *testing.T) {
	for name, args := range map[string]string{
		"an integer where an integer goes":          `{"flight":"BA117","seats":{"$from":"s1","path":"/0/seats_left"}}`,
		"a decimal where a decimal goes":            `{"flight":"BA117","seats":1,"fare":{"$from":"s1","path":"/1/fare"}}`,
		"a decimal where a string goes":             `{"flight":"BA117","seats":1,"note":{"$from":"s1","path":"/1/fare"}}`,
		"an optional value where one may be absent": `{"flight":"BA117","seats":1,"note":{"$from":"s1","path":"/0/note"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, run := refRun(t, newOffers(), &approve{})
			if err := run.Validate(plan2(args)); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
	t.Run("an object and a list, member by member", func(t *testing.T) {
		o := newOffers()
		_, run := refRun(t, o, &approve{})
		res, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{step("s1", "search_flights", searchArgs),
			step("s2", "charter", `{"operator":{"$from":"s1","path":"/1/operator"},"legs":{"$from":"s1","path":"/1/legs"}}`)}})
		if err != nil {
			t.Fatal(err)
		}
		var out string
		if err := res.Outcome("s2", &out); err != nil || out != "chartered VS" {
			t.Errorf("outcome %q, %v", out, err)
		}
	})
}

// failsAtDispatch runs plan and expects step s2 to fail with arguments
// before book_flight is called, and s3, after it, not to run.
func failsAtDispatch(t *testing.T, o *offers, plan planexec.Plan, says string) {
	t.Helper()
	_, run := refRun(t, o, &approve{})
	res, err := run.Execute(context.Background(), plan)
	var serr *planexec.StepError
	if !errors.As(err, &serr) || serr.Step != "s2" || !errors.Is(err, planexec.ReasonArguments) {
		t.Fatalf("Execute: %v, want step s2 failing with arguments", err)
	}
	if !strings.Contains(err.Error(), says) {
		t.Errorf("error %q does not say %q", err, says)
	}
	if n := o.count("book_flight"); n != 0 {
		t.Errorf("book_flight called %d times", n)
	}
	if n := o.count("charter"); n != 0 {
		t.Errorf("a step after the failed one ran")
	}
	if res == nil || res.Steps["s2"].Status != planexec.StepFailed || res.Complete {
		t.Errorf("result %+v, want s2 failed", res)
	}
}

func TestAResolvedValueThatBreaksTheContractFailsTheStepBeforeItsToolIsCalled(t *testing.T) {
	after := step("s3", "charter", `{"operator":{"name":"x","code":"x"},"legs":[]}`, "s2")
	t.Run("an index the outcome does not have", func(t *testing.T) {
		o := newOffers()
		o.found = nil // the search found nothing: [] has no element 0
		p := bookFound("")
		p.Steps = append(p.Steps, after)
		failsAtDispatch(t, o, p, "finds nothing in the outcome")
	})
	t.Run("a value rule", func(t *testing.T) {
		o := newOffers()
		p := plan2(`{"flight":"VS3","seats":{"$from":"s1","path":"/1/seats_left"}}`) // 0 seats: min=1
		p.Steps = append(p.Steps, after)
		failsAtDispatch(t, o, p, "fails rule min=1")
	})
	t.Run("an outcome of no declared shape", func(t *testing.T) {
		o := newOffers()
		o.loose = map[string]any{"flight": 117}
		p := planexec.Plan{Steps: []planexec.Step{step("s1", "quote", searchArgs),
			step("s2", "book_flight", `{"flight":{"$from":"s1","path":"/flight"},"seats":1}`), after}}
		failsAtDispatch(t, o, p, "expected string, got number")
	})
}

func TestAnOutcomeOfNoDeclaredShapeIsReadWhenItFits(t *testing.T) {
	o := newOffers()
	o.loose = map[string]any{"flight": "UA1"}
	_, run := refRun(t, o, &approve{})
	_, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{step("s1", "quote", searchArgs),
		step("s2", "book_flight", `{"flight":{"$from":"s1","path":"/flight"},"seats":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if o.booked[0].Flight != "UA1" {
		t.Errorf("booked %+v", o.booked[0])
	}
}

func TestAStepWithReferencesIsPutToAPersonWhenItIsReadyAndTheRunPausesThere(t *testing.T) {
	o := newOffers()
	ex, run := refRun(t, o, planexec.DecideLater)
	_, err := run.Execute(context.Background(), bookFound(""))
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) || len(pending.Requests) != 1 || !pending.Stored {
		t.Fatalf("Execute: %v, want one stored pending request", err)
	}
	if o.count("search_flights") != 1 || o.count("book_flight") != 0 {
		t.Fatalf("calls %v: the search runs, the booking waits", o.calls)
	}
	req := pending.Requests[0]
	if req.StepID != "s2" || !strings.Contains(string(req.Arguments), `"BA117"`) || !strings.Contains(string(req.Arguments), `"412.5"`) {
		t.Errorf("request %+v, want s2 with the resolved flight and fare", req)
	}
	page, err := ex.Runs(context.Background(), "acme", planexec.RunQuery{})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].Status != planexec.RunAwaitingApproval {
		t.Fatalf("listed %+v, %v: want the run awaiting approval", page, err)
	}
	if err := run.Decide(context.Background(), req.Approve("dana")); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	res, err := run.Resume(context.Background())
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if o.count("search_flights") != 1 || o.count("book_flight") != 1 {
		t.Errorf("calls %v: the search is replayed, the booking runs once", o.calls)
	}
	if !res.Steps["s1"].Replayed || res.Steps["s2"].ApprovedBy != "dana" {
		t.Errorf("result %+v", res.Steps)
	}
}

func TestAClassForbiddenOutrightIsRefusedBeforeTheStepsItWouldReadRun(t *testing.T) {
	o := newOffers()
	ladder, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: "bookings", Tools: []string{"book_flight"}, Amount: "fare"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ladder.Grant(planexec.Grant{ID: "no", Tenant: "acme", Class: "bookings", Level: planexec.LevelNever}); err != nil {
		t.Fatal(err)
	}
	_, run := refRun(t, o, &approve{}, func(c *planexec.Config) { c.Ladder = ladder })
	_, err = run.Execute(context.Background(), bookFound(""))
	var refusedErr *planexec.AutonomyRefusedError
	if !errors.As(err, &refusedErr) || refusedErr.Step != "s2" {
		t.Fatalf("Execute: %v, want s2 refused", err)
	}
	if len(o.calls) != 0 {
		t.Errorf("calls %v, want none", o.calls)
	}
}

func TestACeilingIsCheckedOnTheResolvedAmount(t *testing.T) {
	for _, tc := range []struct {
		fare  string
		asked bool
	}{{"412.50", false}, {"612.50", true}} {
		t.Run(tc.fare, func(t *testing.T) {
			o := newOffers()
			o.found[0].Fare = decimal.RequireFromString(tc.fare)
			ladder, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: "bookings", Tools: []string{"book_flight"}, Amount: "fare"})
			if err != nil {
				t.Fatal(err)
			}
			if err := ladder.Grant(planexec.Grant{ID: "g", Tenant: "acme", Class: "bookings", Level: planexec.LevelActWithinLimits,
				Ceiling: &planexec.Ceiling{Amount: decimal.RequireFromString("500"), Currency: "GBP"}}); err != nil {
				t.Fatal(err)
			}
			gate := &approve{}
			_, run := refRun(t, o, gate, func(c *planexec.Config) { c.Ladder = ladder })
			res, err := run.Execute(context.Background(), bookFound(""))
			if err != nil {
				t.Fatal(err)
			}
			if asked := len(gate.Asked()) == 1; asked != tc.asked {
				t.Errorf("a person asked: %v, want %v", asked, tc.asked)
			}
			if grant := res.Steps["s2"].Grant; (grant == "g") == tc.asked {
				t.Errorf("acted under grant %q", grant)
			}
		})
	}
}

func TestTheCatalogTellsThePlannerWhatEachToolReturns(t *testing.T) {
	_, run := refRun(t, newOffers(), &approve{})
	for _, spec := range run.Catalog() {
		switch spec.Name {
		case "quote":
			if spec.Output != nil {
				t.Errorf("quote returns any, yet its output schema is %s", spec.Output)
			}
		case "search_flights":
			var s struct {
				Type  string `json:"type"`
				Items struct {
					Properties map[string]struct {
						Type string `json:"type"`
					} `json:"properties"`
				} `json:"items"`
			}
			if err := json.Unmarshal(spec.Output, &s); err != nil {
				t.Fatal(err)
			}
			if s.Type != "array" || s.Items.Properties["flight"].Type != "string" || s.Items.Properties["fare"].Type != "string" {
				t.Errorf("search_flights output schema %s, want a list of offers with the fare as a string", spec.Output)
			}
		}
	}
}

func TestTwoStepsThatAreOneEffectOnceResolvedAreRefused(t *testing.T) {
	o := newOffers()
	_, run := refRun(t, o, &approve{})
	_, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", searchArgs),
		step("s2", "book_flight", `{"flight":{"$from":"s1","path":"/0/flight"},"seats":1}`),
		step("s3", "book_flight", `{"flight":"BA117","seats":1}`, "s2"),
	}})
	var serr *planexec.StepError
	if !errors.As(err, &serr) || serr.Step != "s2" || !errors.Is(err, planexec.ReasonDuplicateEffect) {
		t.Fatalf("Execute: %v, want s2 refused as the same effect as s3", err)
	}
	if !strings.Contains(err.Error(), `"s3"`) {
		t.Errorf("the refusal does not name s3: %v", err)
	}
	if n := o.count("book_flight"); n != 0 {
		t.Errorf("book_flight called %d times", n)
	}
}
