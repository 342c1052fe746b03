package planexec_test

// A claim holds for a lease: it is renewed while its tool runs (even after
// the caller gave up, and without waiting on a hung store), a claim whose
// holder vanished is taken over only when the step is reversible, and a
// holder whose claim was taken over writes nothing over its successor's.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// ---- helpers (prefixed lease) ----

// leaseStore is a memory store on a clock the test moves. Like a store across
// a network, it refuses any call whose context is already done. It reports
// each renewal that succeeded, with the time on the store's clock just
// before the renewal was written.
type leaseStore struct {
	*memory.Store
	clk     *planexec.FakeClock
	renewed chan time.Time
}

func newLeaseStore() *leaseStore {
	clk := planexec.NewFakeClock()
	return &leaseStore{Store: memory.New(memory.WithClock(clk.Now)), clk: clk, renewed: make(chan time.Time, 1)}
}

func (s *leaseStore) Claim(ctx context.Context, req store.ClaimRequest) (store.Claim, error) {
	if err := ctx.Err(); err != nil {
		return store.Claim{}, err
	}
	return s.Store.Claim(ctx, req)
}

func (s *leaseStore) Extend(ctx context.Context, key planexec.Key, epoch int64, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	at := s.clk.Now()
	if err := s.Store.Extend(ctx, key, epoch, lease); err != nil {
		return err
	}
	// Only the latest renewal matters to the test: replace an unread one.
	for {
		select {
		case s.renewed <- at:
			return nil
		default:
			select {
			case <-s.renewed:
			default:
			}
		}
	}
}

func (s *leaseStore) CompleteStep(ctx context.Context, w *store.StepWrite) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.CompleteStep(ctx, w)
}

func (s *leaseStore) ReleaseStep(ctx context.Context, w *store.StepWrite) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.ReleaseStep(ctx, w)
}

// awaitRenewal waits for a renewal written at or after since on the store's
// clock.
func (s *leaseStore) awaitRenewal(t *testing.T, since time.Time) {
	t.Helper()
	giveUp := time.After(patience)
	for {
		select {
		case at := <-s.renewed:
			if !at.Before(since) {
				return
			}
		case <-giveUp:
			t.Fatalf("no renewal of the claim after %v", since)
		}
	}
}

func leaseOf(d time.Duration) func(*setup) {
	return func(s *setup) { s.Lease = d }
}

// ---- renewal ----

func TestAClaimIsRenewedWhileItsToolRuns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel bool // the caller gives up while the tool runs
	}{
		{"while the caller waits", false},
		{"after the caller gave up", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const lease = 30 * time.Millisecond
			db := newLeaseStore()
			hold := newHoldFirst()
			defer hold.open()
			// The tool does not watch its context: it finishes its work
			// whatever the caller does. search_flights is reversible: a
			// second holder would take it over if the lease ran out.
			r := &recorder{fail: func(string, any) error {
				hold.hold()
				return nil
			}}
			plan := iOne(iSearch("s1", "LHR"))
			// Once per tenant: other runs meet the key while it is held.
			perTenant := withContracts(r, map[string][]planexec.ContractOption{"search_flights": {planexec.OncePerTenant()}})

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first, _ := newExecutor(t, r, edits(withStore(db), withHolder("worker-a"), leaseOf(lease), perTenant))
			done := make(chan error, 1)
			go func() {
				_, err := first.Execute(ctx, plan)
				done <- err
			}()
			<-hold.entered
			if tc.cancel {
				cancel()
			}
			// Three times nine tenths of a lease pass on the store's clock,
			// each followed by a renewal: the claim outlives its first lease
			// more than twice over only if it is renewed.
			for range 3 {
				db.clk.Advance(lease * 9 / 10)
				db.awaitRenewal(t, db.clk.Now())
			}
			db.clk.Advance(lease * 9 / 10)

			second, _ := newExecutor(t, r, edits(withStore(db), withHolder("worker-b"), leaseOf(lease), perTenant, iRun("acme", "run-2")))
			_, err := second.Execute(context.Background(), plan)
			hold.open()
			ferr := <-done

			var ioe *planexec.IndeterminateOutcomeError
			if !errors.As(err, &ioe) {
				t.Fatalf("second executor: err = %v, want *IndeterminateOutcomeError (the key still held)", err)
			}
			if ioe.InDoubt || !errors.Is(err, planexec.ErrInFlight) || !strings.HasPrefix(ioe.Holder, "worker-a/") {
				t.Errorf("error = %+v, want held in flight by worker-a", ioe)
			}
			if tc.cancel {
				if !errors.Is(ferr, context.Canceled) {
					t.Errorf("first executor: err = %v, want context.Canceled", ferr)
				}
			} else if ferr != nil {
				t.Errorf("first executor: %v", ferr)
			}
			// The first holder's outcome is recorded, cancelled or not.
			third, _ := newExecutor(t, r, edits(withStore(db), perTenant, iRun("acme", "run-3")))
			res, err := third.Execute(context.Background(), plan)
			if err != nil || !res.Steps["s1"].Replayed {
				t.Errorf("a later run: %+v, %v; want s1 replayed from the first holder's record", res, err)
			}
			if n := callsOf(r, "search_flights"); n != 1 {
				t.Errorf("search_flights ran %d times, want once", n)
			}
		})
	}
}

// leaseHungStore is a memory store whose Extend hangs until its context is
// done, as a store behind a dead connection would.
type leaseHungStore struct {
	*memory.Store
	extending chan struct{} // closed when the first Extend begins
	once      sync.Once
}

func (s *leaseHungStore) Extend(ctx context.Context, _ planexec.Key, _ int64, _ time.Duration) error {
	s.once.Do(func() { close(s.extending) })
	<-ctx.Done()
	return ctx.Err()
}

func TestAHungLeaseRenewalDoesNotHoldTheStep(t *testing.T) {
	db := &leaseHungStore{Store: memory.New(), extending: make(chan struct{})}
	// The tool returns once a renewal is hanging in the store.
	r := &recorder{fail: func(string, any) error {
		select {
		case <-db.extending:
			return nil
		case <-time.After(patience):
			return errors.New("the lease was never renewed")
		}
	}}
	run, _ := newExecutor(t, r, edits(withStore(db), leaseOf(30*time.Millisecond)))
	out := cancelWithin(t, "Execute with a hung renewal", func() (*planexec.Result, error) {
		return run.Execute(context.Background(), iOne(iSearch("s1", "LHR")))
	})
	if out.err != nil {
		t.Fatalf("Execute: %v", out.err)
	}
	if s1 := out.res.Steps["s1"]; s1.Status != planexec.StepDone {
		t.Errorf("s1 = %+v, want done", s1)
	}
}

// ---- a holder that vanished ----

func TestAnExpiredClaimIsTakenOverForAReversibleStepButLeftInDoubtForAnIrreversibleOne(t *testing.T) {
	// A holder that crashed: its claim's lease has run out and it never
	// completed or released the key.
	for _, tc := range []struct {
		name    string
		step    planexec.Step
		inDoubt bool
	}{
		{"reversible", iSearch("s1", "LHR"), false},
		{"irreversible", iBooking("b1"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			key := iLearnKey(t, tc.step)
			clk := planexec.NewFakeClock()
			db := memory.New(memory.WithClock(clk.Now))
			crashed, err := db.Claim(ctx, store.ClaimRequest{Key: key, Holder: "crashed-replica", Lease: time.Second})
			if err != nil || crashed.State != store.ClaimAcquired {
				t.Fatalf("pre-claim: %+v, %v", crashed, err)
			}
			clk.Advance(2 * time.Second)

			r := &recorder{}
			run, _ := newExecutor(t, r, edits(withStore(db), withHolder("worker-b")))
			res, err := run.Execute(ctx, iOne(tc.step))
			if !tc.inDoubt {
				if err != nil {
					t.Fatalf("want the expired claim taken over, got %v", err)
				}
				if n := len(r.Calls()); n != 1 || res.Steps[tc.step.ID].Replayed {
					t.Fatalf("want the tool called once by the new holder, got %v", toolNames(r.Calls()))
				}
				return
			}
			var ioe *planexec.IndeterminateOutcomeError
			if !errors.As(err, &ioe) || !ioe.InDoubt || !errors.Is(err, planexec.ErrInDoubt) || ioe.Holder != "crashed-replica" {
				t.Fatalf("want *IndeterminateOutcomeError in doubt, left by crashed-replica; got %v", err)
			}
			if n := len(r.Calls()); n != 0 {
				t.Fatalf("the irreversible tool was called %d times after its holder vanished", n)
			}
		})
	}
}

func TestAHolderWhoseClaimWasTakenOverWritesNothingOverTheNewHoldersRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		db   func(*memory.Store) store.Store
	}{
		{"claim and record in one transaction", func(m *memory.Store) store.Store { return m }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := planexec.NewFakeClock()
			mem := memory.New(memory.WithClock(clock.Now))
			st := tc.db(mem)
			hold := newHoldFirst()
			defer hold.open()
			r := &recorder{}
			var searches atomic.Int32
			slowSearch := func(s *setup) {
				s.Tools[0] = planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, a Search) ([]string, error) {
					late := searches.Add(1) == 1
					hold.hold() // the first caller stalls past its lease
					if late {
						return []string{"LATE"}, r.record(ctx, "search_flights", a)
					}
					return []string{"FAST"}, r.record(ctx, "search_flights", a)
				})
				s.Lease = time.Hour
				s.Now = clock.Now
			}
			plan := planexec.Plan{ID: "p1", Steps: []planexec.Step{iSearch("s1", "LHR")}}

			first, _ := newExecutor(t, r, edits(withStore(st), withHolder("slow"), slowSearch))
			done := make(chan error, 1)
			go func() {
				_, err := first.Execute(ctx, plan)
				done <- err
			}()
			select {
			case <-hold.entered:
			case <-time.After(patience):
				t.Fatal("the first holder never started")
			}
			clock.Advance(2 * time.Hour) // its lease runs out; a reversible step may be taken over
			second, _ := newExecutor(t, r, edits(withStore(st), withHolder("fast"), slowSearch))
			if res, err := second.Execute(ctx, plan); err != nil || !res.Complete {
				t.Fatalf("the second holder: %v", err)
			}
			hold.open()
			var err error
			select {
			case err = <-done:
			case <-time.After(patience):
				t.Fatal("the first holder never returned")
			}
			if !errors.Is(err, store.ErrFenced) {
				t.Errorf("the late holder's error = %v, want ErrFenced", err)
			}
			rec, lerr := mem.LoadPlan(ctx, "acme", "run-1")
			if lerr != nil {
				t.Fatal(lerr)
			}
			if rec.Status != store.RunCompleted || rec.Steps["s1"].Status != planexec.StepDone || string(rec.Steps["s1"].Outcome) != `["FAST"]` {
				t.Errorf("after the late holder returned: plan %s, step %+v; want the new holder's: completed, done with [\"FAST\"]", rec.Status, rec.Steps["s1"])
			}
			third, _ := newExecutor(t, r, edits(withStore(st), slowSearch))
			res, err := third.Execute(ctx, plan)
			if err != nil || string(res.Steps["s1"].Outcome) != `["FAST"]` || !res.Steps["s1"].Replayed {
				t.Errorf("a later run: %+v, %v; want the new holder's outcome replayed", res, err)
			}
		})
	}
}
