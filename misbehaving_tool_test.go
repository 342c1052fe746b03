package planexec_test

// A tool cannot crash or hang a run: a panic while its outcome is rendered,
// or a tool that ends its goroutine, is the step's failure, and for an
// irreversible tool that failure leaves the step in doubt.

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

type misbehavingTicketArgs struct {
	Flight string `json:"flight"`
}

// misbehavingTicket is an outcome that cannot be rendered: its MarshalJSON
// panics.
type misbehavingTicket struct{ PNR string }

func (misbehavingTicket) MarshalJSON() ([]byte, error) { panic("the ticket printer jammed") }

func TestAnOutcomeThatPanicsWhenRenderedIsAStepErrorAndLeavesAnIrreversibleKeyInDoubt(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	var issued atomic.Int32
	withTicket := func(s *setup) {
		s.Tools = append(s.Tools, planexec.MustTool("issue_ticket", "Issue a ticket.", func(ctx context.Context, a misbehavingTicketArgs) (misbehavingTicket, error) {
			issued.Add(1)
			return misbehavingTicket{PNR: "PNR-" + a.Flight}, nil
		}, planexec.Irreversible()))
		s.Store = db
	}
	plan := iOne(step("t1", "issue_ticket", `{"flight":"BA117"}`))

	first, _ := newExecutor(t, &recorder{}, withTicket)
	res, err := first.Execute(ctx, plan)
	var se *planexec.StepError
	if !errors.As(err, &se) || se.Step != "t1" {
		t.Fatalf("err = %v, want a *StepError for t1", err)
	}
	if !strings.Contains(se.Error(), "panicked") {
		t.Errorf("step error = %q, want it to say the tool panicked", se)
	}
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ioe) || !ioe.InDoubt {
		t.Errorf("err = %v, want the irreversible step in doubt", err)
	}
	if res == nil || res.Steps["t1"].Status != planexec.StepInDoubt {
		t.Errorf("result = %+v, want t1 in_doubt", res)
	}

	second, _ := newExecutor(t, &recorder{}, withTicket)
	_, err = second.Execute(ctx, plan)
	if !errors.As(err, &ioe) || !ioe.InDoubt || ioe.Step != "t1" {
		t.Fatalf("second run: err = %v, want *IndeterminateOutcomeError in doubt for t1", err)
	}
	if n := issued.Load(); n != 1 {
		t.Errorf("the ticket was issued %d times, want once", n)
	}
}

func TestAToolThatEndsItsGoroutineDoesNotHangTheRun(t *testing.T) {
	r := &recorder{fail: func(tool string, _ any) error {
		runtime.Goexit()
		return nil
	}}
	run, _ := newExecutor(t, r, nil)
	out := cancelWithin(t, "Execute with a tool calling runtime.Goexit", func() (*planexec.Result, error) {
		return run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{iSearch("s1", "LHR"), iSearch("s2", "LGW", "s1")}})
	})
	var se *planexec.StepError
	if !errors.As(out.err, &se) || se.Step != "s1" || se.Tool != "search_flights" {
		t.Fatalf("err = %v, want a *StepError for s1", out.err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want s1's only", got)
	}
	if out.res == nil || out.res.Complete {
		t.Errorf("result = %+v, want an incomplete result", out.res)
	}
}

// A tool that ends its goroutine failed without saying its effect did not
// land: for an irreversible tool that is doubt, as it is for a panic.
func TestAnIrreversibleToolThatEndsItsGoroutineIsLeftInDoubt(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	var exited atomic.Bool
	iSetFail(r, func(tool string, _ any) error {
		if tool == "book_flight" && exited.CompareAndSwap(false, true) {
			runtime.Goexit()
		}
		return nil
	})
	first, _ := newExecutor(t, r, withStore(st))
	out := cancelWithin(t, "Execute with a booking calling runtime.Goexit", func() (*planexec.Result, error) {
		return first.Execute(ctx, tripPlan())
	})
	var ioe *planexec.IndeterminateOutcomeError
	if !errors.As(out.err, &ioe) || !ioe.InDoubt || ioe.Step != "s2" || ioe.Key.Digest == "" {
		t.Errorf("err = %v, want s2 in doubt with its key, as for any irreversible failure without ErrNotApplied", out.err)
	}

	second, _ := newExecutor(t, r, withStore(st))
	if _, err := second.Resume(ctx); !errors.As(err, &ioe) || !ioe.InDoubt {
		t.Errorf("Resume: err = %v, want *IndeterminateOutcomeError in doubt", err)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("book_flight called %d times, want once: its effect may have landed", n)
	}
}
