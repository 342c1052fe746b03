package memory_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

const lease = 10 * time.Second

var key = planexec.Key{Tenant: "acme", Digest: "sha256:0a1b"}

// claim claims key for holder.
func claim(t *testing.T, s *memory.Store, holder string, takeOver bool) store.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), store.ClaimRequest{Key: key, RunID: "run-1", StepID: "s1", Tool: "book_flight", Holder: holder, Lease: lease, TakeOver: takeOver})
	if err != nil {
		t.Fatalf("Claim by %s: %v", holder, err)
	}
	return c
}

// ---- claims ----

func TestCompleteKeepsItsOwnCopyOfTheOutcome(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
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
	s := memory.New()
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
