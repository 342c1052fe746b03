package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// lease is the lease of every claim in the suite. Leases are let run out by
// a second more than their length, so a store that keeps times to the
// millisecond, rounding either way, is not caught out.
const lease = 10 * time.Second

var theKey = planexec.Key{Tenant: "acme", Digest: "sha256:0a1b"}

// otherKey is a second key of the same tenant.
var otherKey = planexec.Key{Tenant: "acme", Digest: "sha256:2c3d"}

// claim asks for key as holder.
func (k kit) claim(t *testing.T, key planexec.Key, holder string, takeOver bool) store.Claim {
	t.Helper()
	c, err := k.Idempotency.Claim(k.ctx, store.ClaimRequest{Key: key, RunID: "run-1", StepID: "s1", Tool: "book_flight", Holder: holder, Lease: lease, TakeOver: takeOver})
	if err != nil {
		t.Fatalf("Claim by %s (TakeOver %v): %v", holder, takeOver, err)
	}
	return c
}

// acquire claims key as holder and fails unless it is acquired.
func (k kit) acquire(t *testing.T, key planexec.Key, holder string, takeOver bool) store.Claim {
	t.Helper()
	c := k.claim(t, key, holder, takeOver)
	if c.State != store.ClaimAcquired || c.Epoch < 1 {
		t.Fatalf("Claim by %s = %s, want acquired at an epoch of 1 or more", holder, showClaim(c))
	}
	return c
}

// expectHeld fails unless a claim finds key held by holder until expires.
func (k kit) expectHeld(t *testing.T, key planexec.Key, holder string, expires time.Time) {
	t.Helper()
	for _, takeOver := range []bool{false, true} {
		c := k.claim(t, key, "onlooker", takeOver)
		if c.State != store.ClaimHeld || c.Holder != holder || !sameInstant(c.LeaseExpires, expires) {
			t.Errorf("Claim (TakeOver %v) = %s, want held by %s until %v", takeOver, showClaim(c), holder, expires)
		}
	}
}

// expectFenced fails unless every write under epoch is refused with ErrFenced.
func (k kit) expectFenced(t *testing.T, key planexec.Key, epoch int64, who string) {
	t.Helper()
	if err := k.Idempotency.Extend(k.ctx, key, epoch, time.Hour); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Extend by %s: want ErrFenced, got %v", who, err)
	}
	if err := k.Idempotency.Complete(k.ctx, key, epoch, json.RawMessage(`"from a zombie"`)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Complete by %s: want ErrFenced, got %v", who, err)
	}
	for _, inDoubt := range []bool{false, true} {
		if err := k.Idempotency.Release(k.ctx, key, epoch, inDoubt); !errors.Is(err, store.ErrFenced) {
			t.Errorf("Release (in doubt %v) by %s: want ErrFenced, got %v", inDoubt, who, err)
		}
	}
}

// expectCompleted fails unless every claim finds key completed with outcome.
func (k kit) expectCompleted(t *testing.T, key planexec.Key, outcome string) {
	t.Helper()
	for _, takeOver := range []bool{false, true} {
		c := k.claim(t, key, "latecomer", takeOver)
		if c.State != store.ClaimCompleted || !jsonEqual(c.Outcome, []byte(outcome)) {
			t.Errorf("Claim (TakeOver %v) = %s, want completed with %s", takeOver, showClaim(c), outcome)
		}
	}
}

// expectInDoubt fails unless every claim finds key in doubt.
func (k kit) expectInDoubt(t *testing.T, key planexec.Key) {
	t.Helper()
	for _, takeOver := range []bool{false, true} {
		if c := k.claim(t, key, "latecomer", takeOver); c.State != store.ClaimInDoubt {
			t.Errorf("Claim (TakeOver %v) = %s, want in doubt", takeOver, showClaim(c))
		}
	}
}

func showClaim(c store.Claim) string {
	state := map[store.ClaimState]string{
		store.ClaimAcquired: "acquired", store.ClaimCompleted: "completed",
		store.ClaimHeld: "held", store.ClaimInDoubt: "in doubt",
	}[c.State]
	if state == "" {
		state = fmt.Sprintf("state %d", c.State)
	}
	return fmt.Sprintf("{%s epoch %d holder %q lease until %v outcome %s}", state, c.Epoch, c.Holder, c.LeaseExpires, c.Outcome)
}

func runIdempotencyStore(t *testing.T, open Open) {
	t.Run("The first claim of a key is acquired at an epoch of 1 or more with a lease from now", func(t *testing.T) {
		k := setup(t, open)
		c := k.acquire(t, theKey, "worker-a", false)
		if want := k.clk.Now().Add(lease); !sameInstant(c.LeaseExpires, want) {
			t.Errorf("lease expires %v, want %v", c.LeaseExpires, want)
		}
	})

	t.Run("A claim while the lease is live is held, with the holder and the lease", func(t *testing.T) {
		k := setup(t, open)
		first := k.acquire(t, theKey, "worker-a", false)
		k.clk.Advance(lease / 2)
		k.expectHeld(t, theKey, "worker-a", first.LeaseExpires)
	})

	t.Run("After the lease runs out a claim without TakeOver is in doubt and one with it acquires a higher epoch", func(t *testing.T) {
		k := setup(t, open)
		first := k.acquire(t, theKey, "worker-a", false)
		k.clk.Advance(lease + time.Second)
		if c := k.claim(t, theKey, "worker-b", false); c.State != store.ClaimInDoubt {
			t.Errorf("without TakeOver: claim = %s, want in doubt (worker-a's effect may have landed)", showClaim(c))
		}
		c := k.acquire(t, theKey, "worker-b", true)
		if c.Epoch <= first.Epoch {
			t.Errorf("take-over at epoch %d, want above %d", c.Epoch, first.Epoch)
		}
		if want := k.clk.Now().Add(lease); !sameInstant(c.LeaseExpires, want) {
			t.Errorf("take-over lease expires %v, want %v", c.LeaseExpires, want)
		}
		k.expectHeld(t, theKey, "worker-b", c.LeaseExpires)
	})

	t.Run("Extend keeps a claim held past its first lease", func(t *testing.T) {
		k := setup(t, open)
		c := k.acquire(t, theKey, "worker-a", true)
		for range 5 {
			k.clk.Advance(lease / 2)
			if err := k.Idempotency.Extend(k.ctx, theKey, c.Epoch, lease); err != nil {
				t.Fatalf("Extend: %v", err)
			}
		}
		// Two and a half leases have passed since the claim.
		k.expectHeld(t, theKey, "worker-a", k.clk.Now().Add(lease))
	})

	t.Run("A holder whose claim was taken over is fenced: its Extend, Complete and Release change nothing", func(t *testing.T) {
		k := setup(t, open)
		old := k.acquire(t, theKey, "worker-a", true)
		k.clk.Advance(lease + time.Second)
		cur := k.acquire(t, theKey, "worker-b", true)
		if cur.Epoch <= old.Epoch {
			t.Fatalf("take-over at epoch %d, want above %d", cur.Epoch, old.Epoch)
		}
		k.expectFenced(t, theKey, old.Epoch, "the old holder")
		k.expectHeld(t, theKey, "worker-b", cur.LeaseExpires)
		if err := k.Idempotency.Complete(k.ctx, theKey, cur.Epoch, json.RawMessage(`"from the holder"`)); err != nil {
			t.Fatalf("Complete by the current holder: %v", err)
		}
		k.expectFenced(t, theKey, old.Epoch, "the old holder after completion")
		k.expectCompleted(t, theKey, `"from the holder"`)
	})

	t.Run("A completed key gives its exact outcome to every later claim", func(t *testing.T) {
		k := setup(t, open)
		c := k.acquire(t, theKey, "worker-a", false)
		outcome := json.RawMessage(`{"pnr":"PNR-BA117","fare":412.50,"big":9007199254740993,"note":"<&>"}`)
		want := string(outcome)
		if err := k.Idempotency.Complete(k.ctx, theKey, c.Epoch, outcome); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		copy(outcome, `{"XXX":`)      // the caller reuses its buffer
		k.clk.Advance(24 * time.Hour) // a completed key does not run out with the lease
		k.expectCompleted(t, theKey, want)
		got := k.claim(t, theKey, "latecomer", false)
		copy(got.Outcome, `{"XXX":`) // a claimant scribbles on what it was given
		k.expectCompleted(t, theKey, want)
		if err := k.Idempotency.Complete(k.ctx, theKey, c.Epoch, json.RawMessage(`"twice"`)); !errors.Is(err, store.ErrFenced) {
			t.Errorf("completing a completed key again: want ErrFenced, got %v", err)
		}
		k.expectCompleted(t, theKey, want)
	})

	t.Run("A key completed with no outcome gives none back, and is still completed", func(t *testing.T) {
		k := setup(t, open)
		c := k.acquire(t, theKey, "worker-a", false)
		if err := k.Idempotency.Complete(k.ctx, theKey, c.Epoch, nil); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		for _, takeOver := range []bool{false, true} {
			got := k.claim(t, theKey, "latecomer", takeOver)
			if got.State != store.ClaimCompleted || len(got.Outcome) != 0 {
				t.Errorf("Claim (TakeOver %v) = %s, want completed with no outcome", takeOver, showClaim(got))
			}
		}
	})

	t.Run("A key released as not applied is claimable again under a higher epoch", func(t *testing.T) {
		k := setup(t, open)
		first := k.acquire(t, theKey, "worker-a", false)
		if err := k.Idempotency.Release(k.ctx, theKey, first.Epoch, false); err != nil {
			t.Fatalf("Release: %v", err)
		}
		second := k.acquire(t, theKey, "worker-b", false)
		if second.Epoch <= first.Epoch {
			t.Errorf("claim after the release at epoch %d, want above %d", second.Epoch, first.Epoch)
		}
		k.expectFenced(t, theKey, first.Epoch, "the holder that released")
		k.expectHeld(t, theKey, "worker-b", second.LeaseExpires)
		if err := k.Idempotency.Release(k.ctx, theKey, second.Epoch, false); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if third := k.acquire(t, theKey, "worker-c", false); third.Epoch <= second.Epoch {
			t.Errorf("third claim at epoch %d, want above %d", third.Epoch, second.Epoch)
		}
	})

	t.Run("A key released in doubt stays in doubt, also long after its lease", func(t *testing.T) {
		k := setup(t, open)
		c := k.acquire(t, theKey, "worker-a", true)
		if err := k.Idempotency.Release(k.ctx, theKey, c.Epoch, true); err != nil {
			t.Fatalf("Release in doubt: %v", err)
		}
		k.expectInDoubt(t, theKey)
		k.clk.Advance(24 * time.Hour)
		k.expectInDoubt(t, theKey)
		k.expectFenced(t, theKey, c.Epoch, "the holder that released in doubt")
		k.expectInDoubt(t, theKey)
	})

	t.Run("Resolve of a key never claimed is ErrNoRecord and claims nothing", func(t *testing.T) {
		k := setup(t, open)
		for _, r := range []planexec.Resolution{{Applied: true, Outcome: json.RawMessage(`1`)}, {Applied: false}} {
			if err := k.Idempotency.Resolve(k.ctx, theKey, "run-1", r); !errors.Is(err, store.ErrNoRecord) {
				t.Errorf("Resolve(%+v) of a key never claimed: want ErrNoRecord, got %v", r, err)
			}
		}
		k.acquire(t, theKey, "worker-a", false)
	})

	t.Run("Resolve refuses a key whose holder's lease is live and changes nothing", func(t *testing.T) {
		k := setup(t, open)
		held := k.acquire(t, theKey, "worker-a", true)
		k.clk.Advance(lease / 2)
		for _, r := range []planexec.Resolution{{Applied: true, Outcome: json.RawMessage(`"PNR-X"`)}, {Applied: false}} {
			if err := k.Idempotency.Resolve(k.ctx, theKey, "run-1", r); !errors.Is(err, store.ErrInFlight) {
				t.Errorf("Resolve(%+v) while the lease is live: want ErrInFlight, got %v", r, err)
			}
		}
		k.expectHeld(t, theKey, "worker-a", held.LeaseExpires)
		if err := k.Idempotency.Extend(k.ctx, theKey, held.Epoch, lease); err != nil {
			t.Errorf("the live holder's Extend after the refused resolutions: %v", err)
		}
		if err := k.Idempotency.Complete(k.ctx, theKey, held.Epoch, json.RawMessage(`"PNR-A"`)); err != nil {
			t.Errorf("the live holder's Complete after the refused resolutions: %v", err)
		}
		k.expectCompleted(t, theKey, `"PNR-A"`)
	})

	t.Run("Resolve refuses a key already recorded as done, so its effect cannot run twice", func(t *testing.T) {
		k := setup(t, open)
		held := k.acquire(t, theKey, "worker-a", false)
		if err := k.Idempotency.Complete(k.ctx, theKey, held.Epoch, json.RawMessage(`"PNR-A"`)); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		k.clk.Advance(10 * lease)
		for _, r := range []planexec.Resolution{{Applied: false}, {Applied: true, Outcome: json.RawMessage(`"PNR-X"`)}} {
			if err := k.Idempotency.Resolve(k.ctx, theKey, "run-1", r); !errors.Is(err, store.ErrCompleted) {
				t.Errorf("Resolve(%+v) of a completed key: want ErrCompleted, got %v", r, err)
			}
		}
		k.expectCompleted(t, theKey, `"PNR-A"`)
	})

	// Resolve settles a key whose holder vanished (its lease ran out) or
	// released it in doubt; either way the old holder is fenced after.
	leftBy := []struct {
		name  string
		leave func(t *testing.T, k kit, c store.Claim)
	}{
		{"a holder whose lease ran out", func(t *testing.T, k kit, c store.Claim) { k.clk.Advance(lease + time.Second) }},
		{"a holder that released it in doubt", func(t *testing.T, k kit, c store.Claim) {
			if err := k.Idempotency.Release(k.ctx, theKey, c.Epoch, true); err != nil {
				t.Fatalf("Release in doubt: %v", err)
			}
		}},
	}
	for _, l := range leftBy {
		t.Run("Resolve as applied completes a key left by "+l.name+" with the outcome given", func(t *testing.T) {
			k := setup(t, open)
			c := k.acquire(t, theKey, "worker-a", false)
			l.leave(t, k, c)
			out := json.RawMessage(`{"pnr":"PNR-FOUND","fare":412.50}`)
			if err := k.Idempotency.Resolve(k.ctx, theKey, "run-1", planexec.Resolution{Applied: true, Outcome: out}); err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			copy(out, `{"XXX":`)
			k.expectFenced(t, theKey, c.Epoch, "the old holder")
			k.expectCompleted(t, theKey, `{"pnr":"PNR-FOUND","fare":412.50}`)
		})
		t.Run("Resolve as not applied frees a key left by "+l.name+" under a higher epoch", func(t *testing.T) {
			k := setup(t, open)
			c := k.acquire(t, theKey, "worker-a", false)
			l.leave(t, k, c)
			if err := k.Idempotency.Resolve(k.ctx, theKey, "run-1", planexec.Resolution{Applied: false}); err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			k.expectFenced(t, theKey, c.Epoch, "the old holder")
			again := k.acquire(t, theKey, "worker-b", false)
			if again.Epoch <= c.Epoch {
				t.Errorf("claim after the resolution at epoch %d, want above %d", again.Epoch, c.Epoch)
			}
			k.expectFenced(t, theKey, c.Epoch, "the old holder")
			k.expectHeld(t, theKey, "worker-b", again.LeaseExpires)
		})
	}

	t.Run("Keys of two tenants with the same digest are two keys", func(t *testing.T) {
		k := setup(t, open)
		other := planexec.Key{Tenant: "globex", Digest: theKey.Digest}
		a := k.acquire(t, theKey, "worker-a", false)
		b := k.acquire(t, other, "worker-b", false)
		if err := k.Idempotency.Complete(k.ctx, other, b.Epoch, json.RawMessage(`"globex's"`)); err != nil {
			t.Fatalf("Complete globex: %v", err)
		}
		k.expectHeld(t, theKey, "worker-a", a.LeaseExpires)
		if err := k.Idempotency.Release(k.ctx, theKey, a.Epoch, true); err != nil {
			t.Fatalf("Release acme in doubt: %v", err)
		}
		k.expectCompleted(t, other, `"globex's"`)
		k.expectInDoubt(t, theKey)
		third := planexec.Key{Tenant: "initech", Digest: theKey.Digest}
		if err := k.Idempotency.Resolve(k.ctx, third, "run-1", planexec.Resolution{Applied: false}); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("Resolve by a third tenant: want ErrNoRecord, got %v", err)
		}
		k.expectInDoubt(t, theKey)
	})

	t.Run("Writes under a key never claimed are refused and claim nothing", func(t *testing.T) {
		k := setup(t, open)
		refused := func(err error) bool {
			return errors.Is(err, store.ErrNoRecord) || errors.Is(err, store.ErrFenced)
		}
		if err := k.Idempotency.Extend(k.ctx, theKey, 1, lease); !refused(err) {
			t.Errorf("Extend: want ErrNoRecord or ErrFenced, got %v", err)
		}
		if err := k.Idempotency.Complete(k.ctx, theKey, 1, json.RawMessage(`1`)); !refused(err) {
			t.Errorf("Complete: want ErrNoRecord or ErrFenced, got %v", err)
		}
		if err := k.Idempotency.Release(k.ctx, theKey, 1, true); !refused(err) {
			t.Errorf("Release: want ErrNoRecord or ErrFenced, got %v", err)
		}
		k.acquire(t, theKey, "worker-a", false)
	})

	t.Run("Of 50 concurrent claims of one key exactly one acquires it", func(t *testing.T) {
		k := setup(t, open)
		const n = 50
		states := make([]store.ClaimState, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				c, err := k.Idempotency.Claim(k.ctx, store.ClaimRequest{Key: theKey, RunID: "run-1", StepID: "s1", Tool: "book_flight",
					Holder: fmt.Sprintf("worker-%d", i), Lease: lease, TakeOver: i%2 == 0})
				states[i], errs[i] = c.State, err
			})
		}
		close(start)
		wg.Wait()
		acquired, held := 0, 0
		for i := range n {
			if errs[i] != nil {
				t.Errorf("claim %d: %v", i, errs[i])
				continue
			}
			switch states[i] {
			case store.ClaimAcquired:
				acquired++
			case store.ClaimHeld:
				held++
			}
		}
		if acquired != 1 || held != n-1 {
			t.Fatalf("%d acquired and %d held of %d claims, want exactly 1 and %d", acquired, held, n, n-1)
		}
	})
}
