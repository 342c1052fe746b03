package planexec_test

// A run of rounds is held while its next round is planned: a second Do or
// Reply meanwhile, on this executor or another over the same store, is
// ErrRunBusy before it asks its planner anything, so no round is planned
// twice; and a call whose planner failed lets the run go at once.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// gatedPlanner answers with replies in turn; the call numbered block (from
// 1) waits, once entered, until release is closed. It counts its calls.
type gatedPlanner struct {
	replies  []string
	block    int
	entered  chan struct{}
	release  chan struct{}
	calls    atomic.Int32
	fail     error // the answer of every call from failFrom (from 1), when set
	failFrom int
}

func newGatedPlanner(block int, replies ...string) *gatedPlanner {
	return &gatedPlanner{replies: replies, block: block, entered: make(chan struct{}), release: make(chan struct{})}
}

func (p *gatedPlanner) Plan(ctx context.Context, _ planexec.PlanRequest) (*planexec.PlanResponse, error) {
	n := int(p.calls.Add(1))
	if n == p.block {
		close(p.entered)
		select {
		case <-p.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if p.fail != nil && n >= p.failFrom {
		return nil, p.fail
	}
	if n > len(p.replies) {
		return nil, errors.New("no more replies")
	}
	return &planexec.PlanResponse{Payload: []byte(p.replies[n-1])}, nil
}

// twoExecutors builds two executors over st, as two replicas would be, and
// a run of each for run-1 of tenant acme.
func twoExecutors(t *testing.T, st store.Store, r *recorder) (*planexec.Run, *planexec.Run) {
	t.Helper()
	a, _ := newExecutor(t, r, edits(withStore(st), withHolder("replica-a")))
	b, _ := newExecutor(t, r, edits(withStore(st), withHolder("replica-b")))
	return a, b
}

func TestASecondDoWhileARoundIsPlannedIsBusyAndPlansNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block int // the planner call the first Do is held in
	}{
		{"the first round of a new run", 1},
		{"a round after one that ran", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r := &recorder{}
			first, second := twoExecutors(t, memory.New(), r)
			planner := newGatedPlanner(tc.block, doTripJSON, doAnswerJSON)
			done := make(chan cancelOutcome, 1)
			go func() {
				res, err := first.Do(ctx, planner, "get them to New York")
				done <- cancelOutcome{res, err}
			}()
			cancelWait(t, planner.entered, "the first Do never asked its planner")
			asked := planner.calls.Load()

			res, err := second.Do(ctx, planner, "get them to New York")
			if !errors.Is(err, planexec.ErrRunBusy) || res != nil {
				t.Errorf("the second Do: %+v, %v; want ErrRunBusy", res, err)
			}
			if n := planner.calls.Load(); n != asked {
				t.Errorf("the busy Do asked the planner: %d calls, want %d", n, asked)
			}

			close(planner.release)
			out := <-done
			if out.err != nil || !out.res.Complete || out.res.Answer != "Booked BA117." {
				t.Fatalf("the first Do: %+v, %v", out.res, out.err)
			}
			if n := callsOf(r, "book_flight"); n != 1 {
				t.Errorf("book_flight ran %d times, want once", n)
			}
			// Once the first ended, the second gets its answer from the store.
			res, err = second.Do(ctx, planner, "get them to New York")
			if err != nil || res.Answer != "Booked BA117." {
				t.Errorf("the second Do after the first ended: %+v, %v", res, err)
			}
			if n := planner.calls.Load(); n != 2 {
				t.Errorf("the planner was asked %d times, want twice", n)
			}
		})
	}
}

func TestManyDoAtOnceOnANewRunPlanEachRoundOnce(t *testing.T) {
	ctx := context.Background()
	for trial := range 20 {
		st := memory.New()
		r := &recorder{}
		planner := newGatedPlanner(0, doTripJSON, doAnswerJSON)
		var (
			wg             sync.WaitGroup
			answered, busy atomic.Int32
			mu             sync.Mutex
			unexpected     []error
		)
		for i := range 8 {
			run, _ := newExecutor(t, r, edits(withStore(st), withHolder("replica-"+string(rune('a'+i)))))
			wg.Go(func() {
				res, err := run.Do(ctx, planner, "get them to New York")
				switch {
				case err == nil && res.Answer == "Booked BA117.":
					answered.Add(1)
				case errors.Is(err, planexec.ErrRunBusy):
					busy.Add(1)
				default:
					mu.Lock()
					unexpected = append(unexpected, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(unexpected) > 0 || answered.Load() == 0 {
			t.Fatalf("trial %d: %d answered, %d busy, unexpected %v", trial, answered.Load(), busy.Load(), unexpected)
		}
		if n := planner.calls.Load(); n != 2 {
			t.Fatalf("trial %d: the planner was asked %d times, want twice (each round once)", trial, n)
		}
		if n := callsOf(r, "book_flight"); n != 1 {
			t.Fatalf("trial %d: book_flight ran %d times", trial, n)
		}
	}
}

func TestADoWhosePlannerFailedLetsTheRunGoAtOnce(t *testing.T) {
	ctx := context.Background()
	// The lease is long: a run still held after the failed Do would make
	// the next one wait an hour.
	long := func(s *setup) { s.Config.Lease = time.Hour }
	t.Run("in its first round: nothing is left stored", func(t *testing.T) {
		st, r := memory.New(), &recorder{}
		first, _ := newExecutor(t, r, edits(withStore(st), withHolder("replica-a"), long))
		second, _ := newExecutor(t, r, edits(withStore(st), withHolder("replica-b"), long))
		failing := newGatedPlanner(0)
		failing.fail = errors.New("the model is down")
		if _, err := first.Do(ctx, failing, "get them to New York"); err == nil {
			t.Fatal("Do with a failing planner succeeded")
		}
		if info, err := second.Info(ctx); !errors.Is(err, planexec.ErrNoRecord) {
			t.Fatalf("after the failed first round: %+v, %v; want no record", info, err)
		}
		res, err := second.Do(ctx, newGatedPlanner(0, doTripJSON, doAnswerJSON), "get them to New York")
		if err != nil || res.Answer != "Booked BA117." {
			t.Fatalf("the next Do: %+v, %v; want it to plan and answer", res, err)
		}
	})
	t.Run("in a later round: the run is left planning, and free", func(t *testing.T) {
		st, r := memory.New(), &recorder{}
		first, _ := newExecutor(t, r, edits(withStore(st), withHolder("replica-a"), long))
		second, _ := newExecutor(t, r, edits(withStore(st), withHolder("replica-b"), long))
		failing := newGatedPlanner(0, doTripJSON)
		failing.fail, failing.failFrom = errors.New("the model is down"), 2
		if _, err := first.Do(ctx, failing, "get them to New York"); err == nil {
			t.Fatal("Do with a planner failing in round 2 succeeded")
		}
		info, err := second.Info(ctx)
		if err != nil || info.Status != planexec.RunPlanning {
			t.Fatalf("after the failed Do: %+v, %v; want the run stored, planning", info, err)
		}
		res, err := second.Do(ctx, newGatedPlanner(0, doAnswerJSON), "get them to New York")
		if err != nil || res.Answer != "Booked BA117." {
			t.Fatalf("the next Do: %+v, %v; want it to plan round 2 and answer", res, err)
		}
		if n := callsOf(r, "book_flight"); n != 1 {
			t.Errorf("book_flight ran %d times, want once", n)
		}
	})
}

// The lease of a run held for its rounds is moved on while its planner
// works: another replica finds it busy long after a lease would have run
// out.
func TestARunHeldWhileItsPlannerWorksIsKeptPastItsLease(t *testing.T) {
	ctx := context.Background()
	const lease = 60 * time.Millisecond
	short := func(s *setup) { s.Config.Lease = lease }
	st, r := memory.New(), &recorder{}
	first, _ := newExecutor(t, r, edits(withStore(st), withHolder("replica-a"), short))
	second, _ := newExecutor(t, r, edits(withStore(st), withHolder("replica-b"), short))
	planner := newGatedPlanner(1, doTripJSON, doAnswerJSON)
	done := make(chan cancelOutcome, 1)
	go func() {
		res, err := first.Do(ctx, planner, "get them to New York")
		done <- cancelOutcome{res, err}
	}()
	cancelWait(t, planner.entered, "the first Do never asked its planner")
	time.Sleep(5 * lease) // past the lease it took, many times over
	if res, err := second.Do(ctx, planner, "get them to New York"); !errors.Is(err, planexec.ErrRunBusy) {
		t.Errorf("another replica's Do while the planner works: %+v, %v; want ErrRunBusy", res, err)
	}
	close(planner.release)
	if out := <-done; out.err != nil || out.res.Answer != "Booked BA117." {
		t.Fatalf("the first Do: %+v, %v", out.res, out.err)
	}
	if n := planner.calls.Load(); n != 2 {
		t.Errorf("the planner was asked %d times, want twice", n)
	}
}

func TestARoundWhoseStepsAllFinishedAsItsContextEndedIsLeftPlanning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := memory.New()
	// The booking, the round's last step, finishes as its caller goes away.
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "book_flight" {
			cancel()
		}
		return nil
	}}
	run, _ := newExecutor(t, r, withStore(st))
	planner := newGatedPlanner(0, doTripJSON, doAnswerJSON)
	if _, err := run.Do(ctx, planner, "get them to New York"); err == nil {
		t.Fatal("Do whose context ended: no error")
	}
	// Planning (the round's end recorded), or interrupted when the end of
	// the context was seen before the last step's; never completed: the
	// planner has not answered.
	info, err := run.Info(context.Background())
	if err != nil || (info.Status != planexec.RunPlanning && info.Status != planexec.RunInterrupted) {
		t.Fatalf("the run after its round finished: %+v, %v; want planning or interrupted, not %s", info, err, planexec.RunCompleted)
	}
	res, err := run.Do(context.Background(), planner, "get them to New York")
	if err != nil || res.Answer != "Booked BA117." {
		t.Fatalf("Do again: %+v, %v; want the planner's answer", res, err)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("book_flight ran %d times, want once", n)
	}
}

// forgetfulStore forgets a run just after it is read, once: as another
// execution that made the run, and never planned its first round, lets it
// go while this one reads it.
type forgetfulStore struct {
	*memory.Store
	once sync.Once
}

func (s *forgetfulStore) LoadPlan(ctx context.Context, tenant, runID string) (*store.PlanRecord, error) {
	rec, err := s.Store.LoadPlan(ctx, tenant, runID)
	if err == nil {
		s.once.Do(func() { _ = s.Store.Forget(ctx, tenant, runID) })
	}
	return rec, err
}

func TestADoThatReadsARunForgottenAsItReadsItIsBusy(t *testing.T) {
	ctx := context.Background()
	st := &forgetfulStore{Store: memory.New()}
	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(st))
	// A run stored planning, its first round not planned: what another
	// execution's Do leaves while it plans.
	failing := newGatedPlanner(0)
	failing.fail, failing.failFrom = errors.New("stop before planning"), 1
	holder, _ := newExecutor(t, r, withStore(st.Store))
	planner := newGatedPlanner(1, doTripJSON, doAnswerJSON)
	done := make(chan cancelOutcome, 1)
	go func() {
		res, err := holder.Do(ctx, planner, "get them to New York")
		done <- cancelOutcome{res, err}
	}()
	cancelWait(t, planner.entered, "the first Do never asked its planner")
	_, err := run.Do(ctx, failing, "get them to New York")
	if !errors.Is(err, planexec.ErrRunBusy) {
		t.Errorf("a Do whose run was forgotten as it read it: %v, want ErrRunBusy", err)
	}
	close(planner.release)
	<-done
}
