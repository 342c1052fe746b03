package planexec_test

// Runs: one executor serves many runs at once, each under its own
// delegation and with its own record; a run whose ids could not be stored
// and shown faithfully is refused before it can act.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// runsClean reports whether s is valid UTF-8 without control characters.
func runsClean(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

func TestARunIsRefusedWhenItsIDsCannotBeStoredFaithfully(t *testing.T) {
	ex, err := planexec.NewExecutor(planexec.Config{Tools: (&recorder{}).tools(), Gate: &approve{}})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	good := planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "dana", Agent: "courier", Parent: "run-0"}
	if _, err := ex.Run(good); err != nil {
		t.Fatalf("a clean delegation was refused: %v", err)
	}
	fields := map[string]func(*planexec.Delegation, string){
		"run id": func(d *planexec.Delegation, v string) { d.RunID = v },
		"tenant": func(d *planexec.Delegation, v string) { d.Tenant = v },
		"user":   func(d *planexec.Delegation, v string) { d.User = v },
		"agent":  func(d *planexec.Delegation, v string) { d.Agent = v },
		"parent": func(d *planexec.Delegation, v string) { d.Parent = v },
	}
	bad := map[string]string{
		"invalid UTF-8":           "acme\xff",
		"a lone continuation":     "\x80acme",
		"a truncated sequence":    "acm\xc3",
		"an overlong encoding":    "\xc0\xafacme",
		"an encoded surrogate":    "\xed\xa0\x80acme",
		"a NUL":                   "ac\x00me",
		"a newline":               "acme\nroot",
		"a terminal escape":       "\x1b[31macme",
		"a DEL":                   "acme\x7f",
		"a C1 control (U+0085)":   "acme\u0085",
		"a C1 control (U+009B)":   "acme\u009b",
		"a carriage return alone": "\r",
	}
	for field, set := range fields {
		for what, v := range bad {
			t.Run(field+" with "+what, func(t *testing.T) {
				d := good
				set(&d, v)
				run, err := ex.Run(d)
				var de *planexec.DelegationError
				if !errors.As(err, &de) {
					t.Fatalf("err = %v, want a *DelegationError", err)
				}
				if run != nil {
					t.Error("a refused delegation still made a run")
				}
				if !strings.Contains(de.Why, field) {
					t.Errorf("Why = %q, want it to name the %s", de.Why, field)
				}
				// What the error carries and says can be logged as it is.
				if !runsClean(de.RunID) || !runsClean(de.Error()) {
					t.Errorf("the error carries the unclean id: RunID %q, message %q", de.RunID, de.Error())
				}
			})
		}
	}
	// Names in any script are stored faithfully.
	for _, d := range []planexec.Delegation{
		{RunID: "прогон-1", Tenant: "アクメ", User: "Dörte", Agent: "курьер"},
		{RunID: "run-\uFFFD", Tenant: "acme/eu", User: "d@example.com", Agent: "स्टेप"},
	} {
		run, err := ex.Run(d)
		if err != nil {
			t.Errorf("%+v was refused: %v", d, err)
			continue
		}
		if run.ID() != d.RunID || run.Delegation().Tenant != d.Tenant {
			t.Errorf("run of %+v is %q of %q", d, run.ID(), run.Delegation().Tenant)
		}
	}
}

func TestRunIDsThatDifferOnlyInInvalidBytesCanNeverShareKeys(t *testing.T) {
	// Shown or digested, each would read "run-\uFFFD": accepted, they would
	// share idempotency keys and approvals. Refused, neither can act.
	r := &recorder{}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: r.tools(), Gate: &approve{}, Store: memory.New()})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	for _, id := range []string{"run-\xff", "run-\xfe", "run-\xc3", "run-\xef\xbf"} {
		if _, err := ex.Run(planexec.Delegation{RunID: id, Tenant: "acme"}); err == nil {
			t.Errorf("run id %q was accepted", id)
		}
	}
	// Valid ids get keys of their own, however alike they look: nothing is
	// normalised, so a precomposed é and an e with a combining accent are two
	// runs, and so are a replacement character and a question mark.
	seen := map[string]string{}
	for _, id := range []string{"run-\u00e9", "run-e\u0301", "run-\uFFFD", "run-?", "run-e"} {
		run, err := ex.Run(planexec.Delegation{RunID: id, Tenant: "acme"})
		if err != nil {
			t.Fatalf("run id %q was refused: %v", id, err)
		}
		before := len(r.Calls())
		if _, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{cSearch("s1", "LHR")}}); err != nil {
			t.Fatalf("run %q: %v", id, err)
		}
		calls := r.Calls()
		if len(calls) != before+1 {
			t.Fatalf("run %q: the search was not called (replayed another run's outcome?)", id)
		}
		key := calls[len(calls)-1].Key
		if other, dup := seen[key]; dup {
			t.Errorf("runs %q and %q share key %s", other, id, key)
		}
		seen[key] = id
	}
}

// runsProbe is what the probe tool takes.
type runsProbe struct {
	N int `json:"n"`
}

func TestOneExecutorServesManyRunsAtOnceEachWithItsOwnRecord(t *testing.T) {
	const runs, steps = 300, 5
	var mu sync.Mutex
	calls := map[[2]string]int{}     // by run and step
	observed := map[string][]int64{} // Seq of the events Config.Observer saw, by run
	probe := planexec.MustTool("probe", "Report a number.", func(ctx context.Context, p runsProbe) (int, error) {
		info, ok := planexec.CurrentStep(ctx)
		if !ok {
			return 0, errors.New("no current step")
		}
		mu.Lock()
		calls[[2]string{info.RunID, info.StepID}]++
		mu.Unlock()
		return p.N, nil
	})
	db := memory.New()
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools: []*planexec.Tool{probe},
		Store: db,
		Observer: func(e planexec.Event) {
			mu.Lock()
			observed[e.RunID] = append(observed[e.RunID], e.Seq)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	// p1 fans out to p2, p3 and p4, which p5 waits on.
	plan := planexec.Plan{Goal: "probe", Steps: []planexec.Step{
		step("p1", "probe", `{"n":1}`),
		step("p2", "probe", `{"n":2}`, "p1"),
		step("p3", "probe", `{"n":3}`, "p1"),
		step("p4", "probe", `{"n":4}`, "p1"),
		step("p5", "probe", `{"n":5}`, "p2", "p3", "p4"),
	}}

	type outcome struct {
		id      string
		res     *planexec.Result
		err     error
		events  []planexec.Event
		foreign []string // run ids its own observer saw that were not its own
	}
	out := make([]outcome, runs)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			o := &out[i]
			o.id = fmt.Sprintf("run-%03d", i)
			run, err := ex.Run(planexec.Delegation{RunID: o.id, Tenant: "acme", User: "dana"},
				planexec.WithObserver(func(e planexec.Event) {
					if e.RunID != o.id {
						o.foreign = append(o.foreign, e.RunID)
					}
				}))
			if err != nil {
				o.err = err
				return
			}
			<-start
			o.res, o.err = run.Execute(context.Background(), plan)
			o.events = run.Events()
		})
	}
	close(start)
	wg.Wait()

	for _, o := range out {
		if o.err != nil || o.res == nil || !o.res.Complete {
			t.Errorf("%s: complete %v, err %v", o.id, o.res != nil && o.res.Complete, o.err)
			continue
		}
		if o.res.RunID != o.id || len(o.res.Steps) != steps {
			t.Errorf("%s: result of run %q with %d steps", o.id, o.res.RunID, len(o.res.Steps))
		}
		for n := 1; n <= steps; n++ {
			var got int
			if err := o.res.Outcome(fmt.Sprintf("p%d", n), &got); err != nil || got != n || o.res.Steps[fmt.Sprintf("p%d", n)].Replayed {
				t.Errorf("%s: p%d outcome %d, %v, want %d, not replayed", o.id, n, got, err, n)
			}
		}
		if len(o.foreign) > 0 {
			t.Errorf("%s: its observer saw events of %v", o.id, o.foreign)
		}
		for k, e := range o.events {
			if e.RunID != o.id || e.Tenant != "acme" || e.Seq != int64(k+1) {
				t.Errorf("%s: event %d is %s of run %q tenant %q, Seq %d", o.id, k, e.Kind, e.RunID, e.Tenant, e.Seq)
				break
			}
		}
		if n := count(o.events, planexec.EventStepExecuted); n != steps {
			t.Errorf("%s: %d STEP_EXECUTED events, want %d", o.id, n, steps)
		}
		if n := len(o.events); n == 0 || o.events[n-1].Kind != planexec.EventPlanCompleted {
			t.Errorf("%s: the record does not end with PLAN_COMPLETED: %v", o.id, kinds(o.events))
		}
		if got := observed[o.id]; len(got) != len(o.events) {
			t.Errorf("%s: Config.Observer saw %d events, the run recorded %d", o.id, len(got), len(o.events))
		} else {
			for k, seq := range got {
				if seq != int64(k+1) {
					t.Errorf("%s: Config.Observer saw the run's events out of order: %v", o.id, got)
					break
				}
			}
		}
		rec, err := db.LoadPlan(context.Background(), "acme", o.id)
		if err != nil || rec.Status != store.RunCompleted || len(rec.Steps) != steps {
			t.Errorf("%s: stored as %v, %v", o.id, rec, err)
		}
	}
	if len(calls) != runs*steps {
		t.Errorf("%d (run, step) pairs called, want %d", len(calls), runs*steps)
	}
	for k, n := range calls {
		if n != 1 {
			t.Errorf("run %s step %s: tool called %d times, want once", k[0], k[1], n)
		}
	}
}
