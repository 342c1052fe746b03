package planexec_test

// A store that keeps plans and claims in one database writes a step's claim
// and its record in one transaction: both or neither.

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// stepsCounting is a memory store that counts how each step was written.
type stepsCounting struct {
	*memory.Store

	mu                        sync.Mutex
	together, apart, released int
	failNextComplete          error
}

func newStepsCounting() *stepsCounting { return &stepsCounting{Store: memory.New()} }

func (s *stepsCounting) Complete(ctx context.Context, k planexec.Key, e int64, o json.RawMessage) error {
	s.mu.Lock()
	s.apart++
	s.mu.Unlock()
	return s.Store.Complete(ctx, k, e, o)
}

func (s *stepsCounting) CompleteStep(ctx context.Context, w *store.StepWrite) error {
	s.mu.Lock()
	s.together++
	fail := s.failNextComplete
	s.failNextComplete = nil
	s.mu.Unlock()
	if fail != nil {
		return fail // neither is written
	}
	return s.Store.CompleteStep(ctx, w)
}

func (s *stepsCounting) ReleaseStep(ctx context.Context, w *store.StepWrite) error {
	s.mu.Lock()
	s.released++
	s.mu.Unlock()
	return s.Store.ReleaseStep(ctx, w)
}

func (s *stepsCounting) counts() (together, apart, released int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.together, s.apart, s.released
}

func TestAStoreHoldingPlansAndClaimsWritesEachStepInOneTransaction(t *testing.T) {
	db := newStepsCounting()
	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(db))
	res, err := run.Execute(context.Background(), tripPlan())
	if err != nil || !res.Complete {
		t.Fatalf("Execute: %v", err)
	}
	if together, apart, _ := db.counts(); together != 2 || apart != 0 {
		t.Errorf("steps written together %d times and apart %d times, want 2 and 0", together, apart)
	}
	rec, err := db.LoadPlan(context.Background(), "acme", "run-1")
	if err != nil || rec.Steps["s2"].Status != planexec.StepDone || rec.Steps["s2"].Key != res.Steps["s2"].Key.Digest {
		t.Fatalf("record = %+v, %v", rec, err)
	}
}

func TestAFailedStepIsReleasedAndRecordedInOneTransaction(t *testing.T) {
	db := newStepsCounting()
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "book_flight" {
			return errors.New("gateway timeout")
		}
		return nil
	}}
	run, _ := newExecutor(t, r, withStore(db))
	if _, err := run.Execute(context.Background(), tripPlan()); err == nil {
		t.Fatal("Execute succeeded with a failing booking")
	}
	if _, _, released := db.counts(); released != 1 {
		t.Errorf("ReleaseStep called %d times, want 1", released)
	}
	rec, _ := db.LoadPlan(context.Background(), "acme", "run-1")
	if rec.Steps["s2"].Status != planexec.StepInDoubt {
		t.Errorf("s2 recorded as %q, want in_doubt", rec.Steps["s2"].Status)
	}
}

func TestWhenTheJointWriteFailsNothingIsRecordedAsDone(t *testing.T) {
	db := newStepsCounting()
	db.failNextComplete = errors.New("connection reset")
	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(db))
	_, err := run.Execute(context.Background(), iOne(iBooking("s1")))
	var ind *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ind) || !ind.InDoubt {
		t.Fatalf("err = %v, want the irreversible step in doubt", err)
	}
	rec, _ := db.LoadPlan(context.Background(), "acme", "run-1")
	if s := rec.Steps["s1"]; s.Status == planexec.StepDone {
		t.Errorf("s1 recorded as done although its write failed: %+v", s)
	}
}
