package planexec_test

// A Run executes one plan at a time: asking it to execute, resume or do while
// it is executing is ErrRunBusy, and the execution under way goes on as if
// nothing had been asked.

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

func TestARunAskedToExecuteWhileExecutingIsBusyAndTheFirstGoesOn(t *testing.T) {
	planner, model := doPlanner(t)
	for _, tc := range []struct {
		name   string
		second func(context.Context, *planexec.Run) (*planexec.Result, error)
	}{
		{"Execute", func(ctx context.Context, run *planexec.Run) (*planexec.Result, error) {
			return run.Execute(ctx, tripPlan())
		}},
		{"Resume", func(ctx context.Context, run *planexec.Run) (*planexec.Result, error) {
			return run.Resume(ctx)
		}},
		{"Do", func(ctx context.Context, run *planexec.Run) (*planexec.Result, error) {
			return run.Do(ctx, planner, "get them to New York")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := memory.New()
			hold := newHoldFirst()
			defer hold.open()
			r := &recorder{fail: func(string, any) error {
				hold.hold()
				return nil
			}}
			run, _ := newExecutor(t, r, withStore(st))
			done := make(chan cancelOutcome, 1)
			go func() {
				res, err := run.Execute(ctx, tripPlan())
				done <- cancelOutcome{res, err}
			}()
			cancelWait(t, hold.entered, "the first execution never called its tool")
			before := run.Events()

			res, err := tc.second(ctx, run)
			if !errors.Is(err, planexec.ErrRunBusy) {
				t.Errorf("second %s: err = %v, want ErrRunBusy", tc.name, err)
			}
			if res != nil {
				t.Errorf("second %s: result %+v, want none", tc.name, res)
			}
			if after := run.Events(); len(after) != len(before) {
				t.Errorf("the busy %s recorded events: %v", tc.name, kinds(after[len(before):]))
			}

			hold.open()
			out := <-done
			if out.err != nil || !out.res.Complete {
				t.Fatalf("the first execution: %+v, %v", out.res, out.err)
			}
			if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
				t.Errorf("calls = %v, want the first execution's search and booking only", got)
			}
			if n := len(model.Requests()); n != 0 {
				t.Errorf("a busy Do asked the model %d times", n)
			}
			// Done executing, the run takes the next request.
			again, err := run.Resume(ctx)
			if err != nil || !again.Complete || !again.Steps["s2"].Replayed {
				t.Errorf("Resume once the first execution ended: %+v, %v; want every step replayed", again, err)
			}
		})
	}
}
