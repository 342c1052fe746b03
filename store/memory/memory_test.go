package memory_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

// clock is a clock the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const lease = 10 * time.Second

var key = planexec.Key{Tenant: "acme", Digest: "sha256:0a1b"}

// onClock is a store on a clock the test moves.
func onClock() (*memory.Store, *clock) {
	clk := &clock{t: time.Date(2030, time.March, 4, 9, 0, 0, 0, time.UTC)}
	return memory.New(memory.WithClock(clk.Now)), clk
}

// claim claims key for holder.
func claim(t *testing.T, s *memory.Store, holder string, takeOver bool) planexec.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), planexec.ClaimRequest{Key: key, RunID: "run-1", StepID: "s1", Tool: "book_flight", Holder: holder, Lease: lease, TakeOver: takeOver})
	if err != nil {
		t.Fatalf("Claim by %s: %v", holder, err)
	}
	return c
}

// ---- claims ----

func TestAClaimOfANewKeyIsAcquiredAtEpochOne(t *testing.T) {
	s, clk := onClock()
	c := claim(t, s, "worker-a", false)
	if c.State != planexec.ClaimAcquired || c.Epoch != 1 || c.Holder != "worker-a" {
		t.Fatalf("claim = %+v, want acquired at epoch 1 by worker-a", c)
	}
	if want := clk.Now().Add(lease); !c.LeaseExpires.Equal(want) {
		t.Errorf("lease expires %v, want %v", c.LeaseExpires, want)
	}
}

func TestAClaimOfAKeyInFlightIsHeldWithItsHolderAndLease(t *testing.T) {
	s, clk := onClock()
	first := claim(t, s, "worker-a", false)
	clk.Advance(lease / 2)
	for _, takeOver := range []bool{false, true} {
		c := claim(t, s, "worker-b", takeOver)
		if c.State != planexec.ClaimHeld || c.Holder != "worker-a" || !c.LeaseExpires.Equal(first.LeaseExpires) {
			t.Errorf("TakeOver %v: claim = %+v, want held by worker-a until %v", takeOver, c, first.LeaseExpires)
		}
	}
}

func TestAnExpiredLeaseIsInDoubtWithoutTakeOverAndTakenOverWithIt(t *testing.T) {
	s, clk := onClock()
	claim(t, s, "worker-a", false)
	clk.Advance(lease)

	if c := claim(t, s, "worker-b", false); c.State != planexec.ClaimInDoubt || c.Holder != "worker-a" {
		t.Errorf("without TakeOver: claim = %+v, want in doubt (worker-a's effect may have landed)", c)
	}
	c := claim(t, s, "worker-b", true)
	if c.State != planexec.ClaimAcquired || c.Holder != "worker-b" || c.Epoch <= 1 {
		t.Fatalf("with TakeOver: claim = %+v, want acquired by worker-b at an epoch above 1", c)
	}
	if again := claim(t, s, "worker-c", true); again.State != planexec.ClaimHeld || again.Holder != "worker-b" {
		t.Errorf("after the take-over: claim = %+v, want held by worker-b", again)
	}
}

func TestWritesFromATakenOverHolderAreFenced(t *testing.T) {
	ctx := context.Background()
	s, clk := onClock()
	old := claim(t, s, "worker-a", true)
	clk.Advance(lease + time.Second)
	cur := claim(t, s, "worker-b", true)
	if cur.State != planexec.ClaimAcquired || cur.Epoch <= old.Epoch {
		t.Fatalf("take-over = %+v, want acquired above epoch %d", cur, old.Epoch)
	}

	if err := s.Extend(ctx, key, old.Epoch, time.Hour); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("Extend by the old holder: want ErrFenced, got %v", err)
	}
	if err := s.Complete(ctx, key, old.Epoch, json.RawMessage(`"from the zombie"`)); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("Complete by the old holder: want ErrFenced, got %v", err)
	}
	if err := s.Release(ctx, key, old.Epoch, false); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("Release by the old holder: want ErrFenced, got %v", err)
	}
	if err := s.Release(ctx, key, old.Epoch, true); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("Release in doubt by the old holder: want ErrFenced, got %v", err)
	}
	// The new holder's claim is untouched: still held by it, same lease.
	if c := claim(t, s, "worker-c", true); c.State != planexec.ClaimHeld || c.Holder != "worker-b" || !c.LeaseExpires.Equal(cur.LeaseExpires) {
		t.Errorf("after the zombie's writes: claim = %+v, want held by worker-b until %v", c, cur.LeaseExpires)
	}
	if err := s.Complete(ctx, key, cur.Epoch, json.RawMessage(`"from the holder"`)); err != nil {
		t.Fatalf("Complete by the current holder: %v", err)
	}
	if c := claim(t, s, "worker-c", true); c.State != planexec.ClaimCompleted || string(c.Outcome) != `"from the holder"` {
		t.Errorf("claim = %+v, want completed with the current holder's outcome", c)
	}
	if err := s.Complete(ctx, key, old.Epoch, json.RawMessage(`"from the zombie"`)); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("Complete by the old holder after completion: want ErrFenced, got %v", err)
	}
	if c := claim(t, s, "worker-c", true); string(c.Outcome) != `"from the holder"` {
		t.Errorf("the zombie overwrote the outcome: %s", c.Outcome)
	}
}

func TestACompletedKeyReturnsItsOutcomeToLaterClaims(t *testing.T) {
	ctx := context.Background()
	s, clk := onClock()
	c := claim(t, s, "worker-a", false)
	if err := s.Complete(ctx, key, c.Epoch, json.RawMessage(`{"pnr":"PNR-BA117"}`)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	clk.Advance(24 * time.Hour) // a completed key does not expire with the lease
	for _, takeOver := range []bool{false, true} {
		got := claim(t, s, "worker-b", takeOver)
		if got.State != planexec.ClaimCompleted || string(got.Outcome) != `{"pnr":"PNR-BA117"}` {
			t.Errorf("TakeOver %v: claim = %+v, want completed with the outcome", takeOver, got)
		}
	}
	if err := s.Complete(ctx, key, c.Epoch, json.RawMessage(`"twice"`)); err == nil {
		t.Errorf("completing a completed key again was accepted")
	}
}

func TestCompleteKeepsItsOwnCopyOfTheOutcome(t *testing.T) {
	ctx := context.Background()
	s, _ := onClock()
	c := claim(t, s, "worker-a", false)
	out := json.RawMessage(`"PNR-BA117"`)
	if err := s.Complete(ctx, key, c.Epoch, out); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	copy(out, `"XXX`)
	if got := claim(t, s, "worker-b", false); string(got.Outcome) != `"PNR-BA117"` {
		t.Errorf("outcome on record = %s after the caller reused its buffer", got.Outcome)
	}
}

func TestAnOutcomeHandedOutByClaimCannotChangeTheRecord(t *testing.T) {
	ctx := context.Background()
	s, _ := onClock()
	c := claim(t, s, "worker-a", false)
	if err := s.Complete(ctx, key, c.Epoch, json.RawMessage(`"PNR-BA117"`)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	first := claim(t, s, "worker-b", false)
	copy(first.Outcome, `"XXX`)
	if got := claim(t, s, "worker-c", false); string(got.Outcome) != `"PNR-BA117"` {
		t.Errorf("outcome on record = %s after a claimant changed the bytes it was given", got.Outcome)
	}
}

func TestAReleasedKeyIsClaimableAgainUnderAHigherEpoch(t *testing.T) {
	ctx := context.Background()
	s, _ := onClock()
	zombie := claim(t, s, "worker-a", false)
	if err := s.Release(ctx, key, zombie.Epoch, false); err != nil {
		t.Fatalf("Release: %v", err)
	}
	again := claim(t, s, "worker-b", false)
	if again.State != planexec.ClaimAcquired || again.Epoch <= zombie.Epoch {
		t.Fatalf("claim after release = %+v, want acquired above epoch %d", again, zombie.Epoch)
	}
	// Epochs never go back, so the first holder cannot write now.
	if err := s.Complete(ctx, key, zombie.Epoch, json.RawMessage(`"zombie"`)); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("Complete under the released epoch: want ErrFenced, got %v", err)
	}
	if err := s.Extend(ctx, key, zombie.Epoch, lease); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("Extend under the released epoch: want ErrFenced, got %v", err)
	}
	if c := claim(t, s, "worker-c", false); c.State != planexec.ClaimHeld || c.Holder != "worker-b" {
		t.Errorf("claim = %+v, want still held by worker-b", c)
	}
	// A second release and claim climbs again.
	if err := s.Release(ctx, key, again.Epoch, false); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if third := claim(t, s, "worker-c", false); third.State != planexec.ClaimAcquired || third.Epoch <= again.Epoch {
		t.Errorf("third claim = %+v, want acquired above epoch %d", third, again.Epoch)
	}
}

func TestAKeyReleasedInDoubtIsNeverTakenOver(t *testing.T) {
	ctx := context.Background()
	s, clk := onClock()
	c := claim(t, s, "worker-a", true)
	if err := s.Release(ctx, key, c.Epoch, true); err != nil {
		t.Fatalf("Release in doubt: %v", err)
	}
	clk.Advance(24 * time.Hour)
	for _, takeOver := range []bool{false, true} {
		if got := claim(t, s, "worker-b", takeOver); got.State != planexec.ClaimInDoubt || got.Holder != "worker-a" {
			t.Errorf("TakeOver %v: claim = %+v, want in doubt, left by worker-a", takeOver, got)
		}
	}
	if err := s.Complete(ctx, key, c.Epoch, json.RawMessage(`"late"`)); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("Complete after releasing in doubt: want ErrFenced, got %v", err)
	}
}

func TestExtendKeepsAClaimHeldPastItsFirstLease(t *testing.T) {
	ctx := context.Background()
	s, clk := onClock()
	c := claim(t, s, "worker-a", true)
	for range 5 {
		clk.Advance(lease / 2)
		if err := s.Extend(ctx, key, c.Epoch, lease); err != nil {
			t.Fatalf("Extend: %v", err)
		}
	}
	// 2.5 leases have passed since the claim.
	got := claim(t, s, "worker-b", true)
	if got.State != planexec.ClaimHeld || got.Holder != "worker-a" {
		t.Fatalf("claim = %+v, want still held by worker-a", got)
	}
	if want := clk.Now().Add(lease); !got.LeaseExpires.Equal(want) {
		t.Errorf("lease expires %v, want %v (renewed from the last Extend)", got.LeaseExpires, want)
	}
}

func TestWritesToAKeyNobodyClaimedAreErrNoRecord(t *testing.T) {
	s, _ := onClock()
	ctx := context.Background()
	if err := s.Extend(ctx, key, 1, lease); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("Extend: want ErrNoRecord, got %v", err)
	}
	if err := s.Complete(ctx, key, 1, json.RawMessage(`1`)); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("Complete: want ErrNoRecord, got %v", err)
	}
	if err := s.Release(ctx, key, 1, true); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("Release: want ErrNoRecord, got %v", err)
	}
}

func TestKeysOfDifferentTenantsAreSeparate(t *testing.T) {
	s, _ := onClock()
	ctx := context.Background()
	a := claim(t, s, "worker-a", false)
	other := planexec.Key{Tenant: "globex", Digest: key.Digest}
	b, err := s.Claim(ctx, planexec.ClaimRequest{Key: other, Holder: "worker-b", Lease: lease})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if a.State != planexec.ClaimAcquired || b.State != planexec.ClaimAcquired {
		t.Errorf("claims = %+v and %+v, want both acquired: the same digest of two tenants is two keys", a, b)
	}
}

func TestExactlyOneOfManyConcurrentClaimsAcquiresTheKey(t *testing.T) {
	s := memory.New() // on the real clock
	const n = 50
	states := make([]planexec.ClaimState, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			c, err := s.Claim(context.Background(), planexec.ClaimRequest{Key: key, Holder: "worker", Lease: time.Hour, TakeOver: true})
			states[i], errs[i] = c.State, err
		})
	}
	close(start)
	wg.Wait()
	acquired, held := 0, 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		switch states[i] {
		case planexec.ClaimAcquired:
			acquired++
		case planexec.ClaimHeld:
			held++
		}
	}
	if acquired != 1 || held != n-1 {
		t.Fatalf("%d acquired and %d held of %d claims, want exactly 1 and %d", acquired, held, n, n-1)
	}
}

// ---- resolving ----

func TestResolveOfAnUnknownKeyIsErrNoRecord(t *testing.T) {
	s, _ := onClock()
	for _, r := range []planexec.Resolution{{Applied: true, Outcome: json.RawMessage(`1`)}, {Applied: false}} {
		if err := s.Resolve(context.Background(), key, r); !errors.Is(err, planexec.ErrNoRecord) {
			t.Errorf("Resolve(%+v) of an unknown key: want ErrNoRecord, got %v", r, err)
		}
	}
	if c := claim(t, s, "worker-a", false); c.State != planexec.ClaimAcquired || c.Epoch != 1 {
		t.Errorf("claim after resolving an unknown key = %+v, want a fresh acquisition", c)
	}
}

func TestResolvingADoubtAsAppliedCompletesTheKey(t *testing.T) {
	ctx := context.Background()
	s, _ := onClock()
	c := claim(t, s, "worker-a", false)
	if err := s.Release(ctx, key, c.Epoch, true); err != nil {
		t.Fatalf("Release: %v", err)
	}
	out := json.RawMessage(`"PNR-FOUND"`)
	if err := s.Resolve(ctx, key, planexec.Resolution{Applied: true, Outcome: out}); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	copy(out, `"XXX`)
	if got := claim(t, s, "worker-b", true); got.State != planexec.ClaimCompleted || string(got.Outcome) != `"PNR-FOUND"` {
		t.Errorf("claim = %+v, want completed with the resolved outcome", got)
	}
}

func TestResolvingADoubtAsNotAppliedFreesTheKeyUnderAHigherEpoch(t *testing.T) {
	ctx := context.Background()
	s, _ := onClock()
	c := claim(t, s, "worker-a", false)
	if err := s.Release(ctx, key, c.Epoch, true); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := s.Resolve(ctx, key, planexec.Resolution{Applied: false}); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	got := claim(t, s, "worker-b", false)
	if got.State != planexec.ClaimAcquired || got.Epoch <= c.Epoch || got.Holder != "worker-b" {
		t.Errorf("claim = %+v, want acquired by worker-b above epoch %d", got, c.Epoch)
	}
}

func TestResolveRefusesALiveHolderAndFencesOneWhoseLeaseRanOut(t *testing.T) {
	ctx := context.Background()
	s, clk := onClock()
	held := claim(t, s, "worker-a", true)
	if held.State != planexec.ClaimAcquired {
		t.Fatalf("claim = %+v, want acquired", held)
	}

	// The holder's lease is live: its outcome is about to be known.
	clk.Advance(lease / 2)
	for _, r := range []planexec.Resolution{{Applied: true, Outcome: json.RawMessage(`"PNR-X"`)}, {Applied: false}} {
		if err := s.Resolve(ctx, key, r); !errors.Is(err, planexec.ErrInFlight) {
			t.Errorf("Resolve(%+v) while the lease is live: want ErrInFlight, got %v", r, err)
		}
	}
	if c := claim(t, s, "worker-b", true); c.State != planexec.ClaimHeld || c.Holder != "worker-a" || c.Epoch != held.Epoch || !c.LeaseExpires.Equal(held.LeaseExpires) {
		t.Errorf("after the refused resolutions: claim = %+v, want still held by worker-a at epoch %d until %v", c, held.Epoch, held.LeaseExpires)
	}
	if err := s.Extend(ctx, key, held.Epoch, lease); err != nil {
		t.Errorf("the live holder's Extend after the refused resolutions: %v", err)
	}

	// The lease runs out: the holder is gone, and someone who knows settles it.
	clk.Advance(lease + time.Second)
	if err := s.Resolve(ctx, key, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`"PNR-X"`)}); err != nil {
		t.Fatalf("Resolve after the lease ran out: %v", err)
	}
	if err := s.Complete(ctx, key, held.Epoch, json.RawMessage(`"PNR-LATE"`)); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("the old holder's Complete: want ErrFenced, got %v", err)
	}
	if err := s.Extend(ctx, key, held.Epoch, lease); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("the old holder's Extend: want ErrFenced, got %v", err)
	}
	c := claim(t, s, "worker-c", true)
	if c.State != planexec.ClaimCompleted || string(c.Outcome) != `"PNR-X"` {
		t.Errorf("claim = %+v, want completed with the resolved outcome", c)
	}
	if c.Epoch <= held.Epoch {
		t.Errorf("epoch after the resolution = %d, want above the old holder's %d", c.Epoch, held.Epoch)
	}
}

func TestResolvingAKeyDoneIsErrCompletedAndKeepsItsOutcome(t *testing.T) {
	ctx := context.Background()
	s, clk := onClock()
	c := claim(t, s, "worker-a", false)
	if err := s.Complete(ctx, key, c.Epoch, json.RawMessage(`"PNR-BA117"`)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	clk.Advance(24 * time.Hour)
	for _, r := range []planexec.Resolution{{Applied: false}, {Applied: true, Outcome: json.RawMessage(`"PNR-OTHER"`)}} {
		if err := s.Resolve(ctx, key, r); !errors.Is(err, planexec.ErrCompleted) {
			t.Errorf("Resolve(%+v) of a key done: want ErrCompleted, got %v", r, err)
		}
	}
	if got := claim(t, s, "worker-b", true); got.State != planexec.ClaimCompleted || string(got.Outcome) != `"PNR-BA117"` || got.Epoch != c.Epoch {
		t.Errorf("claim = %+v, want still completed with the first outcome at epoch %d", got, c.Epoch)
	}
}

// ---- plans and steps ----

// samplePlan is a search, then a booking.
func samplePlan(id string) planexec.Plan {
	return planexec.Plan{ID: id, Revision: 1, Goal: "get them to New York", Steps: []planexec.Step{
		{ID: "s1", Tool: "search_flights", Arguments: json.RawMessage(`{"origin":"LHR","destination":"JFK"}`)},
		{ID: "s2", Tool: "book_flight", Arguments: json.RawMessage(`{"flight":"BA117","seats":1}`), DependsOn: []string{"s1"}},
	}}
}

// storedRun is a store holding run-1 of acme, plan p1, with s1 done.
func storedRun(t *testing.T) *memory.Store {
	t.Helper()
	ctx := context.Background()
	s := memory.New()
	rec := &planexec.PlanRecord{
		Version: planexec.PlanRecordVersion, Tenant: "acme", RunID: "run-1", Status: planexec.PlanRunning,
		Plan: samplePlan("p1"), Created: time.Unix(1700000000, 0), Updated: time.Unix(1700000000, 0),
	}
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	s1 := planexec.StepRecord{StepID: "s1", PlanID: "p1", Tool: "search_flights", Status: planexec.StepDone,
		Outcome: json.RawMessage(`["BA117","VS3"]`), Finished: time.Unix(1700000060, 0)}
	if err := s.SaveStep(ctx, "acme", "run-1", s1); err != nil {
		t.Fatalf("SaveStep: %v", err)
	}
	return s
}

func TestALoadedPlanRecordIsACopy(t *testing.T) {
	ctx := context.Background()
	s := storedRun(t)
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	got.Status = planexec.PlanCompleted
	got.Plan.Goal = "somewhere else"
	got.Plan.Steps[0].Tool = "refund"
	got.Plan.Steps[1].Arguments[2] = 'X'
	got.Plan.Steps[1].DependsOn[0] = "s9"
	got.Steps["s2"] = planexec.StepRecord{StepID: "s2", Status: planexec.StepDone}
	delete(got.Steps, "s1")

	again, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan again: %v", err)
	}
	want := samplePlan("p1")
	if again.Status != planexec.PlanRunning || again.Plan.Goal != want.Goal {
		t.Errorf("status %q goal %q changed through a loaded copy", again.Status, again.Plan.Goal)
	}
	if again.Plan.Steps[0].Tool != "search_flights" || string(again.Plan.Steps[1].Arguments) != string(want.Steps[1].Arguments) || again.Plan.Steps[1].DependsOn[0] != "s1" {
		t.Errorf("stored plan steps changed through a loaded copy: %+v", again.Plan.Steps)
	}
	if _, ok := again.Steps["s1"]; !ok {
		t.Errorf("deleting from a loaded copy removed s1 from the store")
	}
	if _, ok := again.Steps["s2"]; ok {
		t.Errorf("adding to a loaded copy added s2 to the store")
	}
}

func TestALoadedStepOutcomeIsACopy(t *testing.T) {
	ctx := context.Background()
	s := storedRun(t)
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	copy(got.Steps["s1"].Outcome, `["XX`)
	again, _ := s.LoadPlan(ctx, "acme", "run-1")
	if want := `["BA117","VS3"]`; string(again.Steps["s1"].Outcome) != want {
		t.Errorf("stored outcome became %s through a loaded copy, want %s", again.Steps["s1"].Outcome, want)
	}
}

func TestAStoredStepDoesNotChangeWhenTheCallersBytesDo(t *testing.T) {
	ctx := context.Background()
	s := storedRun(t)
	outcome := json.RawMessage(`"PNR-BA117"`)
	if err := s.SaveStep(ctx, "acme", "run-1", planexec.StepRecord{StepID: "s2", PlanID: "p1", Tool: "book_flight", Status: planexec.StepDone, Outcome: outcome}); err != nil {
		t.Fatalf("SaveStep: %v", err)
	}
	copy(outcome, `"XXX`)
	got, _ := s.LoadPlan(ctx, "acme", "run-1")
	if string(got.Steps["s2"].Outcome) != `"PNR-BA117"` {
		t.Errorf("stored outcome became %s after the caller reused its buffer", got.Steps["s2"].Outcome)
	}
}

func TestAStoredPlanDoesNotChangeWhenTheCallersPlanDoes(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	plan := samplePlan("p1")
	if err := s.SavePlan(ctx, &planexec.PlanRecord{Tenant: "acme", RunID: "run-1", Plan: plan, Status: planexec.PlanRunning}); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	plan.Steps[0].Tool = "refund"
	copy(plan.Steps[1].Arguments, `{"XX`)
	plan.Steps[1].DependsOn[0] = "s9"
	got, _ := s.LoadPlan(ctx, "acme", "run-1")
	want := samplePlan("p1")
	if got.Plan.Steps[0].Tool != "search_flights" || string(got.Plan.Steps[1].Arguments) != string(want.Steps[1].Arguments) || got.Plan.Steps[1].DependsOn[0] != "s1" {
		t.Errorf("stored plan changed with the caller's: %+v", got.Plan.Steps)
	}
}

func TestSavingTheSamePlanAgainKeepsItsStepsAndANewPlanDropsThem(t *testing.T) {
	ctx := context.Background()
	s := storedRun(t)
	same := &planexec.PlanRecord{Tenant: "acme", RunID: "run-1", Status: planexec.PlanFailed, Plan: samplePlan("p1")}
	if err := s.SavePlan(ctx, same); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	got, _ := s.LoadPlan(ctx, "acme", "run-1")
	if got.Status != planexec.PlanFailed || got.Steps["s1"].Status != planexec.StepDone {
		t.Errorf("re-saving plan p1: status %q, s1 %+v; want failed with s1 kept", got.Status, got.Steps["s1"])
	}
	if !got.Created.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("re-saving plan p1 moved its creation to %v", got.Created)
	}
	other := &planexec.PlanRecord{Tenant: "acme", RunID: "run-1", Status: planexec.PlanRunning, Plan: samplePlan("p2")}
	if err := s.SavePlan(ctx, other); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	got, _ = s.LoadPlan(ctx, "acme", "run-1")
	if got.Plan.ID != "p2" || len(got.Steps) != 0 {
		t.Errorf("after saving plan p2: plan %q with steps %v; want p2 with none of p1's steps", got.Plan.ID, got.Steps)
	}
}

func TestARunOfOneTenantIsNotAnothers(t *testing.T) {
	ctx := context.Background()
	s := storedRun(t)
	if _, err := s.LoadPlan(ctx, "globex", "run-1"); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("LoadPlan of another tenant: want ErrNoRecord, got %v", err)
	}
	if err := s.SaveStep(ctx, "globex", "run-1", planexec.StepRecord{StepID: "s2", PlanID: "p1", Status: planexec.StepDone}); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("SaveStep into another tenant's run: want ErrNoRecord, got %v", err)
	}
	if err := s.Forget(ctx, "globex", "run-1"); err != nil {
		t.Errorf("Forget of a run the tenant does not have: %v", err)
	}
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil || len(got.Steps) != 1 {
		t.Errorf("acme's run after globex's writes: %+v, %v; want it as it was", got, err)
	}
	if err := s.Forget(ctx, "acme", "run-1"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := s.LoadPlan(ctx, "acme", "run-1"); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("LoadPlan after Forget: want ErrNoRecord, got %v", err)
	}
}

// ---- a step's claim and record, together ----

func TestCompleteStepWritesTheClaimAndTheRecordOrNeither(t *testing.T) {
	ctx := context.Background()
	s := storedRun(t)
	rec := planexec.StepRecord{StepID: "s2", PlanID: "p1", Tool: "book_flight", Status: planexec.StepDone, Outcome: json.RawMessage(`"PNR-BA117"`), Key: key.Digest}

	// A run the store does not hold: nothing is written, the claim stays held.
	c := claim(t, s, "worker-a", false)
	if err := s.CompleteStep(ctx, key, c.Epoch, rec.Outcome, "run-9", rec); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("CompleteStep for an unknown run: want ErrNoRecord, got %v", err)
	}
	if got := claim(t, s, "worker-b", false); got.State != planexec.ClaimHeld || got.Holder != "worker-a" {
		t.Errorf("after the refused write: claim = %+v, want still held by worker-a", got)
	}

	// A stale epoch: nothing is written, the record stays as it was.
	if err := s.CompleteStep(ctx, key, c.Epoch+1, rec.Outcome, "run-1", rec); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("CompleteStep under another epoch: want ErrFenced, got %v", err)
	}
	if got, _ := s.LoadPlan(ctx, "acme", "run-1"); len(got.Steps) != 1 {
		t.Errorf("a fenced CompleteStep wrote the record: %+v", got.Steps)
	}

	// Both.
	if err := s.CompleteStep(ctx, key, c.Epoch, rec.Outcome, "run-1", rec); err != nil {
		t.Fatalf("CompleteStep: %v", err)
	}
	if got := claim(t, s, "worker-b", false); got.State != planexec.ClaimCompleted || string(got.Outcome) != `"PNR-BA117"` {
		t.Errorf("claim = %+v, want completed with the outcome", got)
	}
	if got, _ := s.LoadPlan(ctx, "acme", "run-1"); got.Steps["s2"].Status != planexec.StepDone || got.Steps["s2"].Key != key.Digest {
		t.Errorf("s2 on record = %+v, want done under the key", got.Steps["s2"])
	}
}

func TestReleaseStepWritesTheClaimAndTheRecordOrNeither(t *testing.T) {
	ctx := context.Background()
	s := storedRun(t)
	rec := planexec.StepRecord{StepID: "s2", PlanID: "p1", Tool: "book_flight", Status: planexec.StepInDoubt, Key: key.Digest, Error: "gateway timeout"}
	c := claim(t, s, "worker-a", false)

	if err := s.ReleaseStep(ctx, key, c.Epoch, true, "run-9", rec); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("ReleaseStep for an unknown run: want ErrNoRecord, got %v", err)
	}
	if got := claim(t, s, "worker-b", false); got.State != planexec.ClaimHeld {
		t.Errorf("after the refused write: claim = %+v, want still held", got)
	}
	if err := s.ReleaseStep(ctx, key, c.Epoch+1, true, "run-1", rec); !errors.Is(err, planexec.ErrFenced) {
		t.Errorf("ReleaseStep under another epoch: want ErrFenced, got %v", err)
	}
	if got, _ := s.LoadPlan(ctx, "acme", "run-1"); len(got.Steps) != 1 {
		t.Errorf("a fenced ReleaseStep wrote the record: %+v", got.Steps)
	}

	if err := s.ReleaseStep(ctx, key, c.Epoch, true, "run-1", rec); err != nil {
		t.Fatalf("ReleaseStep: %v", err)
	}
	if got := claim(t, s, "worker-b", true); got.State != planexec.ClaimInDoubt {
		t.Errorf("claim = %+v, want in doubt", got)
	}
	if got, _ := s.LoadPlan(ctx, "acme", "run-1"); got.Steps["s2"].Status != planexec.StepInDoubt {
		t.Errorf("s2 on record = %+v, want in doubt", got.Steps["s2"])
	}
}

// ---- decisions ----

func TestADecisionIsKeptPerTenantAndReplacedByTheNextForItsRequest(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	if _, err := s.Decision(ctx, "acme", "req-1"); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("Decision before any: want ErrNoRecord, got %v", err)
	}
	approved := planexec.Decision{RequestID: "req-1", Status: planexec.Approved, Approver: "dana", DecidedAt: time.Unix(1700000000, 0)}
	if err := s.SaveDecision(ctx, "acme", approved); err != nil {
		t.Fatalf("SaveDecision: %v", err)
	}
	if _, err := s.Decision(ctx, "globex", "req-1"); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("another tenant's Decision: want ErrNoRecord, got %v", err)
	}
	if got, err := s.Decision(ctx, "acme", "req-1"); err != nil || got != approved {
		t.Errorf("Decision = %+v, %v; want %+v", got, err, approved)
	}
	denied := planexec.Decision{RequestID: "req-1", Status: planexec.Denied, Approver: "dana", Why: "changed my mind", DecidedAt: time.Unix(1700000060, 0)}
	if err := s.SaveDecision(ctx, "acme", denied); err != nil {
		t.Fatalf("SaveDecision: %v", err)
	}
	if got, err := s.Decision(ctx, "acme", "req-1"); err != nil || got != denied {
		t.Errorf("Decision = %+v, %v; want the later %+v", got, err, denied)
	}
}
