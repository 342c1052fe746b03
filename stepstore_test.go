package planexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
)

// sharedStore is one value that is both stores, as a database-backed store
// is; it counts how each step was written.
type sharedStore struct {
	*planexec.MemoryPlanStore
	idem *planexec.MemoryIdempotencyStore

	mu                        sync.Mutex
	together, apart, released int
	failNextComplete          error
}

func newSharedStore() *sharedStore {
	return &sharedStore{MemoryPlanStore: &planexec.MemoryPlanStore{}, idem: &planexec.MemoryIdempotencyStore{}}
}

func (s *sharedStore) Claim(ctx context.Context, r planexec.ClaimRequest) (planexec.Claim, error) {
	return s.idem.Claim(ctx, r)
}
func (s *sharedStore) Extend(ctx context.Context, k planexec.Key, e int64, l time.Duration) error {
	return s.idem.Extend(ctx, k, e, l)
}
func (s *sharedStore) Complete(ctx context.Context, k planexec.Key, e int64, o json.RawMessage) error {
	s.mu.Lock()
	s.apart++
	s.mu.Unlock()
	return s.idem.Complete(ctx, k, e, o)
}
func (s *sharedStore) Release(ctx context.Context, k planexec.Key, e int64, inDoubt bool) error {
	return s.idem.Release(ctx, k, e, inDoubt)
}
func (s *sharedStore) Resolve(ctx context.Context, k planexec.Key, r planexec.Resolution) error {
	return s.idem.Resolve(ctx, k, r)
}

func (s *sharedStore) CompleteStep(ctx context.Context, k planexec.Key, e int64, o json.RawMessage, run string, rec planexec.StepRecord) error {
	s.mu.Lock()
	s.together++
	fail := s.failNextComplete
	s.failNextComplete = nil
	s.mu.Unlock()
	if fail != nil {
		return fail // neither is written
	}
	if err := s.idem.Complete(ctx, k, e, o); err != nil {
		return err
	}
	return s.SaveStep(ctx, k.Tenant, run, rec)
}

func (s *sharedStore) ReleaseStep(ctx context.Context, k planexec.Key, e int64, inDoubt bool, run string, rec planexec.StepRecord) error {
	s.mu.Lock()
	s.released++
	s.mu.Unlock()
	if err := s.idem.Release(ctx, k, e, inDoubt); err != nil {
		return err
	}
	return s.SaveStep(ctx, k.Tenant, run, rec)
}

func TestAStoreHoldingPlansAndClaimsWritesEachStepInOneTransaction(t *testing.T) {
	store := newSharedStore()
	r := &recorder{}
	ex, _ := newExecutor(t, r, edits(withPlans(store), withIdempotency(store)))
	res, err := ex.Execute(context.Background(), tripPlan())
	if err != nil || !res.Complete {
		t.Fatalf("Execute: %v", err)
	}
	if store.together != 2 || store.apart != 0 {
		t.Errorf("steps written together %d times and apart %d times, want 2 and 0", store.together, store.apart)
	}
	rec, err := store.LoadPlan(context.Background(), "acme", "run-1")
	if err != nil || rec.Steps["s2"].Status != planexec.StepDone || rec.Steps["s2"].Key != res.Steps["s2"].Key.Digest {
		t.Fatalf("record = %+v, %v", rec, err)
	}
}

func TestAFailedStepIsReleasedAndRecordedInOneTransaction(t *testing.T) {
	store := newSharedStore()
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "book_flight" {
			return errors.New("gateway timeout")
		}
		return nil
	}}
	ex, _ := newExecutor(t, r, edits(withPlans(store), withIdempotency(store)))
	if _, err := ex.Execute(context.Background(), tripPlan()); err == nil {
		t.Fatal("Execute succeeded with a failing booking")
	}
	if store.released != 1 {
		t.Errorf("ReleaseStep called %d times, want 1", store.released)
	}
	rec, _ := store.LoadPlan(context.Background(), "acme", "run-1")
	if rec.Steps["s2"].Status != planexec.StepInDoubt {
		t.Errorf("s2 recorded as %q, want in_doubt", rec.Steps["s2"].Status)
	}
}

func TestWhenTheJointWriteFailsNothingIsRecordedAsDone(t *testing.T) {
	store := newSharedStore()
	store.failNextComplete = errors.New("connection reset")
	r := &recorder{}
	ex, _ := newExecutor(t, r, edits(withPlans(store), withIdempotency(store)))
	_, err := ex.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{step("s1", "book_flight", `{"flight":"BA117","seats":1}`)}})
	var ind *planexec.IndeterminateOutcomeError
	if !errors.As(err, &ind) || !ind.InDoubt {
		t.Fatalf("err = %v, want the irreversible step in doubt", err)
	}
	rec, _ := store.LoadPlan(context.Background(), "acme", "run-1")
	if s := rec.Steps["s1"]; s.Status == planexec.StepDone {
		t.Errorf("s1 recorded as done although its write failed: %+v", s)
	}
}
