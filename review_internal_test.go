package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestMemoryResolveRefusesALiveHolderAndFencesOneWhoseLeaseRanOut(t *testing.T) {
	ctx := context.Background()
	clk := NewFakeClock()
	s := &MemoryIdempotencyStore{now: clk.Now}
	key := Key{Tenant: "acme", Digest: "sha256:5eed"}
	const lease = 10 * time.Second
	claim := func(holder string) Claim {
		t.Helper()
		c, err := s.Claim(ctx, ClaimRequest{Key: key, RunID: "run-1", StepID: "b1", Tool: "book_flight", Holder: holder, Lease: lease, TakeOver: true})
		if err != nil {
			t.Fatalf("Claim by %s: %v", holder, err)
		}
		return c
	}
	held := claim("worker-a")
	if held.State != ClaimAcquired {
		t.Fatalf("claim = %+v, want acquired", held)
	}

	// The holder's lease is live: its outcome is about to be known.
	clk.Advance(lease / 2)
	for _, r := range []Resolution{{Applied: true, Outcome: json.RawMessage(`"PNR-X"`)}, {Applied: false}} {
		if err := s.Resolve(ctx, key, r); !errors.Is(err, ErrClaimHeld) {
			t.Errorf("Resolve(%+v) while the lease is live: want ErrClaimHeld, got %v", r, err)
		}
	}
	if c := claim("worker-b"); c.State != ClaimHeld || c.Holder != "worker-a" || c.Epoch != held.Epoch || !c.LeaseExpires.Equal(held.LeaseExpires) {
		t.Errorf("after the refused resolutions: claim = %+v, want still held by worker-a at epoch %d until %v", c, held.Epoch, held.LeaseExpires)
	}
	if err := s.Extend(ctx, key, held.Epoch, lease); err != nil {
		t.Errorf("the live holder's Extend after the refused resolutions: %v", err)
	}

	// The lease runs out: the holder is gone, and someone who knows settles it.
	clk.Advance(lease + time.Second)
	if err := s.Resolve(ctx, key, Resolution{Applied: true, Outcome: json.RawMessage(`"PNR-X"`)}); err != nil {
		t.Fatalf("Resolve after the lease ran out: %v", err)
	}
	if err := s.Complete(ctx, key, held.Epoch, json.RawMessage(`"PNR-LATE"`)); !errors.Is(err, ErrFenced) {
		t.Errorf("the old holder's Complete: want ErrFenced, got %v", err)
	}
	if err := s.Extend(ctx, key, held.Epoch, lease); !errors.Is(err, ErrFenced) {
		t.Errorf("the old holder's Extend: want ErrFenced, got %v", err)
	}
	c := claim("worker-c")
	if c.State != ClaimCompleted || string(c.Outcome) != `"PNR-X"` {
		t.Errorf("claim = %+v, want completed with the resolved outcome", c)
	}
	if c.Epoch <= held.Epoch {
		t.Errorf("epoch after the resolution = %d, want above the old holder's %d", c.Epoch, held.Epoch)
	}
}
