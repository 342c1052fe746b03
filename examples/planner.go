// Command planner plans a trip and runs it, end to end: a model writes a typed
// plan, the executor refuses the first (one argument has the wrong type), the
// model writes it again, the independent steps run together, and the
// irreversible booking waits for a person's approval at the terminal.
//
//	go run ./examples/planner.go          # asks before booking
//	go run ./examples/planner.go -yes     # approves without asking
//	go run ./examples/planner.go -yes -store sqlite:trip.db
//	go run ./examples/planner.go -yes -store postgres:postgres://localhost/db
//	go run ./examples/planner.go -model openai:MODEL     # with OPENAI_API_KEY (and OPENAI_BASE_URL)
//	go run ./examples/planner.go -model anthropic:MODEL  # with ANTHROPIC_API_KEY
//
// With no model configured it plans with a scripted model: no key, no
// network. Standard input that is not a terminal, without -yes, denies.
//
// With -store the run is durable: interrupt it (Ctrl-C, or kill it) and run
// the same command again, and it resumes the stored plan where it stopped,
// replaying what finished instead of doing it again.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/term"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/anthropic"
	"github.com/planexec/planexec/llm/openai"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/store/sqlite"
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

type Flight struct {
	Flight string          `json:"flight"`
	Fare   decimal.Decimal `json:"fare"`
}

// work stands for a remote call.
func work(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func tools() ([]planexec.Tool, []*planexec.Contract) {
	return []planexec.Tool{
			planexec.NewTool("search_flights", "Find flights between two airports on a date.",
				func(ctx context.Context, s FlightSearch) ([]Flight, error) {
					return []Flight{{"BA117", decimal.RequireFromString("412.50")}, {"VS3", decimal.RequireFromString("455.00")}}, work(ctx, 300*time.Millisecond)
				}),
			planexec.NewTool("hold_room", "Hold a hotel room; the hold lapses unless confirmed.",
				func(ctx context.Context, h RoomHold) (string, error) {
					return "HOLD-" + strings.ToUpper(h.Hotel[:3]), work(ctx, 300*time.Millisecond)
				}),
			planexec.NewTool("book_flight", "Book and pay for seats on a flight. Cannot be undone.",
				func(ctx context.Context, b Booking) (string, error) {
					key, _ := planexec.IdempotencyKey(ctx) // what a payment API would deduplicate on
					return "PNR-" + b.Flight + "-" + key[len(key)-6:], work(ctx, 200*time.Millisecond)
				}),
			planexec.NewTool("send_itinerary", "Email the itinerary.",
				func(ctx context.Context, it Itinerary) (string, error) {
					return "sent to " + it.To, work(ctx, 100*time.Millisecond)
				}),
		}, []*planexec.Contract{
			planexec.MustContract[FlightSearch]("search_flights"),
			planexec.MustContract[RoomHold]("hold_room", planexec.KeyArguments("hotel")),
			planexec.MustContract[Booking]("book_flight", planexec.Irreversible(), planexec.KeyArguments("flight", "seats")),
			planexec.MustContract[Itinerary]("send_itinerary"),
		}
}

// The scripted model's two answers: the first books "1" seat as a string,
// which the contract refuses; the second is right.
const (
	firstPlan = `{"goal":"get them to New York","steps":[
 {"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK","date":"2026-12-14"}},
 {"id":"s2","tool":"book_flight","arguments":{"flight":"BA117","seats":"1","fare":412.50,"currency":"GBP"},"depends_on":["s1"]}]}`
	secondPlan = `{"goal":"get them to New York","steps":[
 {"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK","date":"2026-12-14"},"intent":"find the fare before booking"},
 {"id":"s2","tool":"hold_room","arguments":{"hotel":"Hudson","nights":3,"total":540.00,"currency":"GBP"},"intent":"a room near the office"},
 {"id":"s3","tool":"book_flight","arguments":{"flight":"BA117","seats":1,"fare":412.50,"currency":"GBP"},"depends_on":["s1"],"intent":"hold the seat before the fare moves"},
 {"id":"s4","tool":"send_itinerary","arguments":{"to":"traveller@example.com","trip":"LHR-JFK 14 Dec, 3 nights"},"depends_on":["s2","s3"]}]}`
)

// options are the command's flags.
type options struct {
	yes   bool   // approve without asking
	store string // "", "sqlite:FILE" or "postgres:DSN"
	run   string // the run id a durable store keeps the plan under
	// resolve settles a step left in doubt: "not-applied" or "applied:OUTCOME".
	resolve string
	model   string // "", "openai:MODEL" or "anthropic:MODEL"
}

func main() {
	var o options
	flag.BoolVar(&o.yes, "yes", false, "approve the booking without asking")
	flag.StringVar(&o.store, "store", "", "keep the run in sqlite:FILE or postgres:DSN, and resume it if it was interrupted")
	flag.StringVar(&o.run, "run", "example-trip", "the run id kept in the store")
	flag.StringVar(&o.model, "model", "", "plan with openai:MODEL (OPENAI_API_KEY, OPENAI_BASE_URL) or anthropic:MODEL (ANTHROPIC_API_KEY); default: the scripted model")
	flag.StringVar(&o.resolve, "resolve", "", "settle a booking left in doubt by an interrupted run: not-applied, or applied:PNR")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdin, os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "planner:", err)
		os.Exit(1)
	}
}

// chooseModel returns the model named by spec ("openai:MODEL",
// "anthropic:MODEL"), or the scripted one when spec is empty or the
// provider's key is not set. It says in one line which it is.
func chooseModel(spec string, out io.Writer) (llm.Model, error) {
	provider, name, _ := strings.Cut(spec, ":")
	key := map[string]string{"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}[provider]
	switch {
	case spec == "":
	case key == "":
		return nil, fmt.Errorf("-model %q: want openai:MODEL or anthropic:MODEL", spec)
	case os.Getenv(key) == "":
		fmt.Fprintf(out, "model: scripted (%s is not set, so -model %s is not used)\n", key, spec)
		return scriptedModel(), nil
	case provider == "openai":
		fmt.Fprintf(out, "model: %s via the OpenAI-compatible API\n", name)
		return openai.New(name)
	case provider == "anthropic":
		fmt.Fprintf(out, "model: %s via the Anthropic API\n", name)
		return anthropic.New(name)
	}
	fmt.Fprintln(out, "model: scripted (no provider configured; no key, no network)")
	return scriptedModel(), nil
}

func scriptedModel() llm.Model {
	return scripted.New(scripted.Reply{Content: firstPlan}, scripted.Reply{Content: secondPlan})
}

// openStore opens the store named by spec; memory when spec is empty.
func openStore(ctx context.Context, spec string) (planexec.PlanStore, planexec.IdempotencyStore, func(), error) {
	kind, where, _ := strings.Cut(spec, ":")
	switch kind {
	case "":
		return &planexec.MemoryPlanStore{}, &planexec.MemoryIdempotencyStore{}, func() {}, nil
	case "sqlite":
		st, err := sqlite.Open(ctx, where)
		if err != nil {
			return nil, nil, nil, err
		}
		return st, st, func() { st.Close() }, nil
	case "postgres":
		st, err := postgres.Open(ctx, where)
		if err != nil {
			return nil, nil, nil, err
		}
		return st, st, st.Close, nil
	default:
		return nil, nil, nil, fmt.Errorf("-store %q: want sqlite:FILE or postgres:DSN", spec)
	}
}

func run(ctx context.Context, stdin io.Reader, out io.Writer, o options) error {
	yes := o.yes
	model, err := chooseModel(o.model, out)
	if err != nil {
		return err
	}

	// Holding rooms is delegated: up to £600 a week without asking.
	ladder, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: "lodging", Tools: []string{"hold_room"}, Amount: "total", Currency: "currency"})
	if err != nil {
		return err
	}
	if err := ladder.Grant(planexec.Grant{ID: "lodging-ops", Tenant: "acme", Class: "lodging", Level: planexec.LevelActWithinLimits,
		Ceiling: &planexec.Ceiling{Amount: decimal.NewFromInt(600), Currency: "GBP", Window: 7 * 24 * time.Hour}}); err != nil {
		return err
	}

	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "trip-planner", Instructions: "Plan business trips."})
	if err != nil {
		return err
	}
	plans, claims, closeStore, err := openStore(ctx, o.store)
	if err != nil {
		return err
	}
	defer closeStore()
	runID := ""
	if o.store != "" {
		runID = o.run
	}
	start := time.Now()
	ts, contracts := tools()
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools:       ts,
		Contracts:   contracts,
		Agent:       planexec.Agent{Name: "courier", Tools: []string{"search_flights", "hold_room", "book_flight", "send_itinerary"}},
		Delegation:  planexec.Delegation{RunID: runID, Tenant: "acme", User: "dana", Agent: "courier"},
		Ladder:      ladder,
		Gate:        terminalGate(stdin, out, yes),
		Plans:       plans,
		Idempotency: claims,
		// A short lease, so a run killed mid-step can be resumed soon after.
		Lease:    3 * time.Second,
		Observer: func(e planexec.Event) { printEvent(out, start, e) },
	})
	if err != nil {
		return err
	}

	// A durable store may hold this run already: resume it rather than plan
	// again.
	res, err := ex.Resume(ctx)
	var doubt *planexec.IndeterminateOutcomeError
	if errors.As(err, &doubt) && doubt.InDoubt && o.resolve != "" {
		// Someone found out what happened to the step left in doubt.
		r := planexec.Resolution{Applied: o.resolve != "not-applied"}
		if r.Applied {
			outcome, ok := strings.CutPrefix(o.resolve, "applied:")
			if !ok {
				return fmt.Errorf("-resolve %q: want not-applied or applied:OUTCOME", o.resolve)
			}
			r.Outcome, _ = json.Marshal(outcome)
		}
		if err := ex.Resolve(ctx, doubt.Key, r); err != nil {
			return err
		}
		fmt.Fprintf(out, "resolved step %s: %s\n", doubt.Step, o.resolve)
		res, err = ex.Resume(ctx)
	}
	if errors.Is(err, planexec.ErrNoRecord) {
		plan, perr := ex.Planned(ctx, planner, "get them to New York")
		if perr != nil {
			return perr
		}
		res, err = ex.Execute(ctx, plan)
	} else {
		fmt.Fprintf(out, "resumed run %s from the store\n", ex.RunID())
	}
	summary(out, ex, res, time.Since(start))
	if errors.As(err, &doubt) {
		if doubt.InDoubt {
			fmt.Fprintf(out, "\nstep %s was interrupted mid-call: it may have booked. Find out, then run again with\n"+
				"-resolve applied:PNR (it did) or -resolve not-applied (it did not).\n", doubt.Step)
		} else {
			fmt.Fprintf(out, "\nstep %s is still held by the interrupted run; run again once its lease ends (seconds).\n", doubt.Step)
		}
	}
	if err != nil {
		return err
	}
	for id, s := range res.Steps {
		var ticket string
		if s.Tool == "book_flight" && res.Outcome(id, &ticket) == nil {
			fmt.Fprintf(out, "booked: %s\n", ticket)
		}
	}
	return nil
}

// terminalGate asks at the terminal. With yes it approves; with a standard
// input that is not a terminal it denies, since nobody is there to ask.
func terminalGate(stdin io.Reader, out io.Writer, yes bool) planexec.ApprovalGate {
	lines := bufio.NewScanner(stdin)
	return planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.ApprovalDecision, error) {
		fmt.Fprintf(out, "\n  approval needed: step %s calls %s %s\n  because %s\n", req.StepID, req.Tool, req.Arguments, req.Why)
		if yes {
			fmt.Fprintln(out, "  approved (-yes)")
			return req.Grant("dana (-yes)"), nil
		}
		if f, ok := stdin.(*os.File); !ok || !isTerminal(f) {
			fmt.Fprintln(out, "  denied: standard input is not a terminal; pass -yes to approve")
			return req.Deny("nobody", "no terminal to ask; run with -yes to approve"), nil
		}
		fmt.Fprint(out, "  approve? [y/N] ")
		if !lines.Scan() {
			return req.Deny("dana", "no answer"), nil
		}
		if a := strings.ToLower(strings.TrimSpace(lines.Text())); a == "y" || a == "yes" {
			return req.Grant("dana"), nil
		}
		return req.Deny("dana", "declined at the terminal"), nil
	})
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

func printEvent(out io.Writer, start time.Time, e planexec.Event) {
	line := fmt.Sprintf("%6.3fs  %-19s", e.Time.Sub(start).Seconds(), e.Kind)
	if e.Revision > 0 {
		line += fmt.Sprintf(" rev %d", e.Revision)
	}
	if e.StepID != "" {
		line += fmt.Sprintf("  %s %s", e.StepID, e.Tool)
	}
	switch {
	case e.Reason != "":
		line += "  reason=" + string(e.Reason)
	case e.Grant != "":
		line += "  grant=" + e.Grant
	case e.Approver != "":
		line += "  by " + e.Approver
	}
	if e.Usage != nil {
		line += fmt.Sprintf("  tokens=%d", e.Usage.Total())
	}
	if e.Replayed {
		line += "  (replayed)"
	}
	if e.Detail != "" {
		line += "  — " + e.Detail
	}
	fmt.Fprintln(out, line)
}

func summary(out io.Writer, ex *planexec.Executor, res *planexec.Result, took time.Duration) {
	u := ex.Usage()
	fmt.Fprintf(out, "\nsummary: run %s, %d model calls, %d tokens, %.2fs\n", ex.RunID(), u.Calls, u.Total(), took.Seconds())
	if res == nil {
		fmt.Fprintln(out, "  nothing ran")
		return
	}
	for _, id := range slices.Sorted(maps.Keys(res.Steps)) {
		s := res.Steps[id]
		fmt.Fprintf(out, "  %s  %-14s %-6s %s", id, s.Tool, s.Status, s.Outcome)
		if s.ApprovedBy != "" {
			fmt.Fprintf(out, "  approved by %s", s.ApprovedBy)
		}
		if s.Grant != "" {
			fmt.Fprintf(out, "  under grant %s", s.Grant)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "  complete: %v\n", res.Complete)
}
