package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"
)

const iLease = 10 * time.Second

var iKey = Key{Tenant: "acme", Digest: "sha256:0a1b"}

// iMemStore is a memory store on a fake clock.
func iMemStore() (*MemoryIdempotencyStore, *FakeClock) {
	clk := NewFakeClock()
	return &MemoryIdempotencyStore{now: clk.Now}, clk
}

// iClaim claims iKey for holder.
func iClaim(t *testing.T, s *MemoryIdempotencyStore, holder string, takeOver bool) Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), ClaimRequest{Key: iKey, RunID: "run-1", StepID: "s1", Tool: "book_flight", Holder: holder, Lease: iLease, TakeOver: takeOver})
	if err != nil {
		t.Fatalf("Claim by %s: %v", holder, err)
	}
	return c
}

func TestMemoryClaimOfANewKeyIsAcquiredAtEpochOne(t *testing.T) {
	s, clk := iMemStore()
	c := iClaim(t, s, "worker-a", false)
	if c.State != ClaimAcquired || c.Epoch != 1 || c.Holder != "worker-a" {
		t.Fatalf("claim = %+v, want acquired at epoch 1 by worker-a", c)
	}
	if want := clk.Now().Add(iLease); !c.LeaseExpires.Equal(want) {
		t.Errorf("lease expires %v, want %v", c.LeaseExpires, want)
	}
}

func TestMemoryClaimOfAKeyInFlightIsHeldWithItsHolderAndLease(t *testing.T) {
	s, clk := iMemStore()
	first := iClaim(t, s, "worker-a", false)
	clk.Advance(iLease / 2)
	for _, takeOver := range []bool{false, true} {
		c := iClaim(t, s, "worker-b", takeOver)
		if c.State != ClaimHeld || c.Holder != "worker-a" || !c.LeaseExpires.Equal(first.LeaseExpires) {
			t.Errorf("TakeOver %v: claim = %+v, want held by worker-a until %v", takeOver, c, first.LeaseExpires)
		}
	}
}

func TestMemoryAnExpiredLeaseIsInDoubtWithoutTakeOverAndTakenOverWithIt(t *testing.T) {
	s, clk := iMemStore()
	iClaim(t, s, "worker-a", false)
	clk.Advance(iLease)

	if c := iClaim(t, s, "worker-b", false); c.State != ClaimInDoubt || c.Holder != "worker-a" {
		t.Errorf("without TakeOver: claim = %+v, want in doubt (worker-a's effect may have landed)", c)
	}
	c := iClaim(t, s, "worker-b", true)
	if c.State != ClaimAcquired || c.Holder != "worker-b" || c.Epoch <= 1 {
		t.Fatalf("with TakeOver: claim = %+v, want acquired by worker-b at an epoch above 1", c)
	}
	if again := iClaim(t, s, "worker-c", true); again.State != ClaimHeld || again.Holder != "worker-b" {
		t.Errorf("after the take-over: claim = %+v, want held by worker-b", again)
	}
}

func TestMemoryWritesFromATakenOverHolderAreFenced(t *testing.T) {
	ctx := context.Background()
	s, clk := iMemStore()
	old := iClaim(t, s, "worker-a", true)
	clk.Advance(iLease + time.Second)
	cur := iClaim(t, s, "worker-b", true)
	if cur.State != ClaimAcquired || cur.Epoch <= old.Epoch {
		t.Fatalf("take-over = %+v, want acquired above epoch %d", cur, old.Epoch)
	}

	if err := s.Extend(ctx, iKey, old.Epoch, time.Hour); !errors.Is(err, ErrFenced) {
		t.Errorf("Extend by the old holder: want ErrFenced, got %v", err)
	}
	if err := s.Complete(ctx, iKey, old.Epoch, json.RawMessage(`"from the zombie"`)); !errors.Is(err, ErrFenced) {
		t.Errorf("Complete by the old holder: want ErrFenced, got %v", err)
	}
	if err := s.Release(ctx, iKey, old.Epoch, false); !errors.Is(err, ErrFenced) {
		t.Errorf("Release by the old holder: want ErrFenced, got %v", err)
	}
	if err := s.Release(ctx, iKey, old.Epoch, true); !errors.Is(err, ErrFenced) {
		t.Errorf("Release in doubt by the old holder: want ErrFenced, got %v", err)
	}
	// The new holder's claim is untouched: still held by it, same lease.
	if c := iClaim(t, s, "worker-c", true); c.State != ClaimHeld || c.Holder != "worker-b" || !c.LeaseExpires.Equal(cur.LeaseExpires) {
		t.Errorf("after the zombie's writes: claim = %+v, want held by worker-b until %v", c, cur.LeaseExpires)
	}
	if err := s.Complete(ctx, iKey, cur.Epoch, json.RawMessage(`"from the holder"`)); err != nil {
		t.Fatalf("Complete by the current holder: %v", err)
	}
	if c := iClaim(t, s, "worker-c", true); c.State != ClaimCompleted || string(c.Outcome) != `"from the holder"` {
		t.Errorf("claim = %+v, want completed with the current holder's outcome", c)
	}
	if err := s.Complete(ctx, iKey, old.Epoch, json.RawMessage(`"from the zombie"`)); !errors.Is(err, ErrFenced) {
		t.Errorf("Complete by the old holder after completion: want ErrFenced, got %v", err)
	}
	if c := iClaim(t, s, "worker-c", true); string(c.Outcome) != `"from the holder"` {
		t.Errorf("the zombie overwrote the outcome: %s", c.Outcome)
	}
}

func TestMemoryACompletedKeyReturnsItsOutcomeToLaterClaims(t *testing.T) {
	ctx := context.Background()
	s, clk := iMemStore()
	c := iClaim(t, s, "worker-a", false)
	if err := s.Complete(ctx, iKey, c.Epoch, json.RawMessage(`{"pnr":"PNR-BA117"}`)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	clk.Advance(24 * time.Hour) // a completed key does not expire with the lease
	for _, takeOver := range []bool{false, true} {
		got := iClaim(t, s, "worker-b", takeOver)
		if got.State != ClaimCompleted || string(got.Outcome) != `{"pnr":"PNR-BA117"}` {
			t.Errorf("TakeOver %v: claim = %+v, want completed with the outcome", takeOver, got)
		}
	}
	if err := s.Complete(ctx, iKey, c.Epoch, json.RawMessage(`"twice"`)); err == nil {
		t.Errorf("completing a completed key again was accepted")
	}
}

func TestMemoryCompleteKeepsItsOwnCopyOfTheOutcome(t *testing.T) {
	ctx := context.Background()
	s, _ := iMemStore()
	c := iClaim(t, s, "worker-a", false)
	out := json.RawMessage(`"PNR-BA117"`)
	if err := s.Complete(ctx, iKey, c.Epoch, out); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	copy(out, `"XXX`)
	if got := iClaim(t, s, "worker-b", false); string(got.Outcome) != `"PNR-BA117"` {
		t.Errorf("outcome on record = %s after the caller reused its buffer", got.Outcome)
	}
}

func TestMemoryAnOutcomeHandedOutByClaimCannotChangeTheRecord(t *testing.T) {
	ctx := context.Background()
	s, _ := iMemStore()
	c := iClaim(t, s, "worker-a", false)
	if err := s.Complete(ctx, iKey, c.Epoch, json.RawMessage(`"PNR-BA117"`)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	first := iClaim(t, s, "worker-b", false)
	copy(first.Outcome, `"XXX`)
	if got := iClaim(t, s, "worker-c", false); string(got.Outcome) != `"PNR-BA117"` {
		t.Errorf("outcome on record = %s after a claimant changed the bytes it was given", got.Outcome)
	}
}

func TestMemoryAReleasedKeyIsClaimableAgainUnderAHigherEpoch(t *testing.T) {
	ctx := context.Background()
	s, _ := iMemStore()
	zombie := iClaim(t, s, "worker-a", false)
	if err := s.Release(ctx, iKey, zombie.Epoch, false); err != nil {
		t.Fatalf("Release: %v", err)
	}
	again := iClaim(t, s, "worker-b", false)
	if again.State != ClaimAcquired || again.Epoch <= zombie.Epoch {
		t.Fatalf("claim after release = %+v, want acquired above epoch %d", again, zombie.Epoch)
	}
	// Epochs never go back, so the first holder cannot write now.
	if err := s.Complete(ctx, iKey, zombie.Epoch, json.RawMessage(`"zombie"`)); !errors.Is(err, ErrFenced) {
		t.Errorf("Complete under the released epoch: want ErrFenced, got %v", err)
	}
	if err := s.Extend(ctx, iKey, zombie.Epoch, iLease); !errors.Is(err, ErrFenced) {
		t.Errorf("Extend under the released epoch: want ErrFenced, got %v", err)
	}
	if c := iClaim(t, s, "worker-c", false); c.State != ClaimHeld || c.Holder != "worker-b" {
		t.Errorf("claim = %+v, want still held by worker-b", c)
	}
	// A second release and claim climbs again.
	if err := s.Release(ctx, iKey, again.Epoch, false); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if third := iClaim(t, s, "worker-c", false); third.State != ClaimAcquired || third.Epoch <= again.Epoch {
		t.Errorf("third claim = %+v, want acquired above epoch %d", third, again.Epoch)
	}
}

func TestMemoryAKeyReleasedInDoubtIsNeverTakenOver(t *testing.T) {
	ctx := context.Background()
	s, clk := iMemStore()
	c := iClaim(t, s, "worker-a", true)
	if err := s.Release(ctx, iKey, c.Epoch, true); err != nil {
		t.Fatalf("Release in doubt: %v", err)
	}
	clk.Advance(24 * time.Hour)
	for _, takeOver := range []bool{false, true} {
		if got := iClaim(t, s, "worker-b", takeOver); got.State != ClaimInDoubt || got.Holder != "worker-a" {
			t.Errorf("TakeOver %v: claim = %+v, want in doubt, left by worker-a", takeOver, got)
		}
	}
	if err := s.Complete(ctx, iKey, c.Epoch, json.RawMessage(`"late"`)); !errors.Is(err, ErrFenced) {
		t.Errorf("Complete after releasing in doubt: want ErrFenced, got %v", err)
	}
}

func TestMemoryResolveOfAnUnknownKeyIsErrNoRecord(t *testing.T) {
	s, _ := iMemStore()
	for _, r := range []Resolution{{Applied: true, Outcome: json.RawMessage(`1`)}, {Applied: false}} {
		if err := s.Resolve(context.Background(), iKey, r); !errors.Is(err, ErrNoRecord) {
			t.Errorf("Resolve(%+v) of an unknown key: want ErrNoRecord, got %v", r, err)
		}
	}
	if c := iClaim(t, s, "worker-a", false); c.State != ClaimAcquired || c.Epoch != 1 {
		t.Errorf("claim after resolving an unknown key = %+v, want a fresh acquisition", c)
	}
}

func TestMemoryResolvingADoubtAsAppliedCompletesTheKey(t *testing.T) {
	ctx := context.Background()
	s, _ := iMemStore()
	c := iClaim(t, s, "worker-a", false)
	if err := s.Release(ctx, iKey, c.Epoch, true); err != nil {
		t.Fatalf("Release: %v", err)
	}
	out := json.RawMessage(`"PNR-FOUND"`)
	if err := s.Resolve(ctx, iKey, Resolution{Applied: true, Outcome: out}); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	copy(out, `"XXX`)
	if got := iClaim(t, s, "worker-b", true); got.State != ClaimCompleted || string(got.Outcome) != `"PNR-FOUND"` {
		t.Errorf("claim = %+v, want completed with the resolved outcome", got)
	}
}

func TestMemoryResolvingADoubtAsNotAppliedFreesTheKeyUnderAHigherEpoch(t *testing.T) {
	ctx := context.Background()
	s, _ := iMemStore()
	c := iClaim(t, s, "worker-a", false)
	if err := s.Release(ctx, iKey, c.Epoch, true); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := s.Resolve(ctx, iKey, Resolution{Applied: false}); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	got := iClaim(t, s, "worker-b", false)
	if got.State != ClaimAcquired || got.Epoch <= c.Epoch || got.Holder != "worker-b" {
		t.Errorf("claim = %+v, want acquired by worker-b above epoch %d", got, c.Epoch)
	}
}

func TestMemoryExtendKeepsAClaimHeldPastItsFirstLease(t *testing.T) {
	ctx := context.Background()
	s, clk := iMemStore()
	c := iClaim(t, s, "worker-a", true)
	for range 5 {
		clk.Advance(iLease / 2)
		if err := s.Extend(ctx, iKey, c.Epoch, iLease); err != nil {
			t.Fatalf("Extend: %v", err)
		}
	}
	// 2.5 leases have passed since the claim.
	got := iClaim(t, s, "worker-b", true)
	if got.State != ClaimHeld || got.Holder != "worker-a" {
		t.Fatalf("claim = %+v, want still held by worker-a", got)
	}
	if want := clk.Now().Add(iLease); !got.LeaseExpires.Equal(want) {
		t.Errorf("lease expires %v, want %v (renewed from the last Extend)", got.LeaseExpires, want)
	}
}

func TestMemoryExtendOfAnUnknownKeyFails(t *testing.T) {
	s, _ := iMemStore()
	ctx := context.Background()
	if err := s.Extend(ctx, iKey, 1, iLease); !errors.Is(err, ErrNoRecord) {
		t.Errorf("Extend: want ErrNoRecord, got %v", err)
	}
	if err := s.Complete(ctx, iKey, 1, json.RawMessage(`1`)); !errors.Is(err, ErrNoRecord) {
		t.Errorf("Complete: want ErrNoRecord, got %v", err)
	}
	if err := s.Release(ctx, iKey, 1, true); !errors.Is(err, ErrNoRecord) {
		t.Errorf("Release: want ErrNoRecord, got %v", err)
	}
}

func TestMemoryKeysOfDifferentTenantsAreSeparate(t *testing.T) {
	s, _ := iMemStore()
	ctx := context.Background()
	a := iClaim(t, s, "worker-a", false)
	other := Key{Tenant: "globex", Digest: iKey.Digest}
	b, err := s.Claim(ctx, ClaimRequest{Key: other, Holder: "worker-b", Lease: iLease})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if a.State != ClaimAcquired || b.State != ClaimAcquired {
		t.Errorf("claims = %+v and %+v, want both acquired: the same digest of two tenants is two keys", a, b)
	}
}

func TestMemoryExactlyOneOfManyConcurrentClaimsAcquiresTheKey(t *testing.T) {
	s := &MemoryIdempotencyStore{} // the zero value, on the real clock
	const n = 50
	states := make([]ClaimState, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			c, err := s.Claim(context.Background(), ClaimRequest{Key: iKey, Holder: "worker", Lease: time.Hour, TakeOver: true})
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
		case ClaimAcquired:
			acquired++
		case ClaimHeld:
			held++
		}
	}
	if acquired != 1 || held != n-1 {
		t.Fatalf("%d acquired and %d held of %d claims, want exactly 1 and %d", acquired, held, n, n-1)
	}
}
