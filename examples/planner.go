// Command planner plans a trip and runs it, end to end: a model writes a typed
// plan, the executor refuses the first (one argument has the wrong type), the
// model writes it again, the independent steps run together, and the
// irreversible booking of the flight the search found (a reference to the
// search's outcome, type-checked before anything ran) waits for a person's
// approval at the terminal, who sees the flight and fare really found. The
// outcomes go back to the model, which answers in a second round.
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
// The default build has neither the provider adapters nor the durable
// stores, which its run does not use, so that the first run does not wait
// for the providers' SDKs and the database drivers (a pure-Go SQLite among
// them) to compile. With -model and the provider's key set, or with -store,
// the command builds itself again with what the flags need (go build -tags
// providers, stores, or providers,stores) and hands over, passing Ctrl-C on;
// the first such run compiles those SDKs or drivers.
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
	"log"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/term"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/examples/internal/trip"
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
	log.SetFlags(0)
	log.SetPrefix("planner: ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Stdin, os.Stdout, o)
	if trip.NeedsRebuild(err) {
		err = rebuild(ctx, err)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		// The command built again has said what went wrong.
		stop()
		os.Exit(max(exit.ExitCode(), 1))
	}
	if err != nil {
		stop()
		log.Fatal(err)
	}
}

// rebuild builds this command again with the parts err says this build
// lacks and runs it in this one's place (trip.Rebuild).
func rebuild(ctx context.Context, err error) error {
	_, self, _, _ := runtime.Caller(0)
	return trip.Rebuild(ctx, filepath.Dir(self), err)
}

func run(ctx context.Context, stdin io.Reader, out io.Writer, o options) error {
	out = &syncWriter{w: out} // the gate and the observer write from the steps' goroutines
	// What this build lacks for the flags is asked first, so that it is built
	// again once, with all of it, before anything runs.
	if err := trip.Needs(o.model, o.store); err != nil {
		return err
	}
	yes := o.yes
	model, err := trip.ChooseModel(o.model, true, func(line string) { fmt.Fprintln(out, line) })
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
	store, closeStore, err := trip.OpenStore(ctx, o.store)
	if err != nil {
		return err
	}
	defer closeStore()
	runID := ""
	if o.store != "" {
		runID = o.run
	}
	start := time.Now()
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools:  trip.Tools(nil),
		Store:  store,
		Ladder: ladder,
		Gate:   terminalGate(stdin, out, yes),
		// A short lease, so a run killed mid-step can be resumed soon after.
		Lease:    3 * time.Second,
		Observer: func(e planexec.Event) { printEvent(out, start, e) },
	})
	if err != nil {
		return err
	}
	trip, err := ex.Run(planexec.Delegation{RunID: runID, Tenant: "acme", User: "dana", Agent: "courier"})
	if err != nil {
		return err
	}

	// Do resumes the run if a durable store holds it already, and plans and
	// executes it otherwise.
	const task = "get them to New York"
	res, err := trip.Do(ctx, planner, task)
	var doubt *planexec.IndeterminateOutcomeError
	if errors.Is(err, planexec.ErrInDoubt) && errors.As(err, &doubt) && o.resolve != "" {
		// Someone found out what happened to the step left in doubt.
		r := planexec.Resolution{Applied: o.resolve != "not-applied"}
		if r.Applied {
			outcome, ok := strings.CutPrefix(o.resolve, "applied:")
			if !ok {
				return fmt.Errorf("-resolve %q: want not-applied or applied:OUTCOME", o.resolve)
			}
			r.Outcome, _ = json.Marshal(outcome)
		}
		if err := trip.Resolve(ctx, doubt.Key, r); err != nil {
			return err
		}
		fmt.Fprintf(out, "resolved step %s: %s\n", doubt.Step, o.resolve)
		res, err = trip.Do(ctx, planner, task)
	}
	if findKind(trip.Events(), planexec.EventPlanResumed) {
		fmt.Fprintf(out, "resumed run %s from the store\n", trip.ID())
	}
	summary(out, trip, res, time.Since(start))
	if errors.As(err, &doubt) {
		if errors.Is(err, planexec.ErrInDoubt) {
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
	fmt.Fprintf(out, "answer (round %d): %s\n", res.Round, res.Answer)
	return nil
}

// terminalGate asks at the terminal. With yes it approves; with a standard
// input that is not a terminal it denies, since nobody is there to ask.
func terminalGate(stdin io.Reader, out io.Writer, yes bool) planexec.ApprovalGate {
	lines := bufio.NewScanner(stdin)
	return planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
		fmt.Fprintf(out, "\n  approval needed: step %s calls %s %s\n  because %s\n", req.StepID, req.Tool, req.Arguments, req.Why)
		if yes {
			fmt.Fprintln(out, "  approved (-yes)")
			return req.Approve("dana (-yes)"), nil
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
			return req.Approve("dana"), nil
		}
		return req.Deny("dana", "declined at the terminal"), nil
	})
}

// syncWriter writes to w one write at a time.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

func printEvent(out io.Writer, start time.Time, e planexec.Event) {
	line := fmt.Sprintf("%6.3fs  %-19s", e.Time.Sub(start).Seconds(), e.Kind)
	if e.Round > 0 {
		line += fmt.Sprintf(" round %d", e.Round)
	}
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

// findKind reports whether an event of kind is on the record.
func findKind(events []planexec.Event, kind planexec.EventKind) bool {
	return slices.ContainsFunc(events, func(e planexec.Event) bool { return e.Kind == kind })
}

func summary(out io.Writer, trip *planexec.Run, res *planexec.Result, took time.Duration) {
	u := trip.Usage()
	fmt.Fprintf(out, "\nsummary: run %s, %d model calls, %d tokens, %.2fs\n", trip.ID(), u.Calls, u.Total(), took.Seconds())
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
