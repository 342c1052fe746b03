package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// diffDecision lists how got differs from want, field by field.
func diffDecision(got, want planexec.Decision) []string {
	var d []string
	if got.RequestID != want.RequestID || got.Status != want.Status || got.Approver != want.Approver || got.Why != want.Why {
		d = append(d, fmt.Sprintf("decision %q %q by %q (%q), want %q %q by %q (%q)",
			got.RequestID, got.Status, got.Approver, got.Why, want.RequestID, want.Status, want.Approver, want.Why))
	}
	if !sameInstant(got.DecidedAt, want.DecidedAt) {
		d = append(d, fmt.Sprintf("DecidedAt = %v, want %v to the millisecond", got.DecidedAt, want.DecidedAt))
	}
	if !sameInstant(got.Expires, want.Expires) {
		d = append(d, fmt.Sprintf("Expires = %v, want %v to the millisecond (zero is never)", got.Expires, want.Expires))
	}
	return d
}

func runApprovalStore(t *testing.T, open Open) {
	t.Run("Decision of a record never decided is ErrNoRecord", func(t *testing.T) {
		k := setup(t, open)
		if d, err := k.Approvals.Decision(k.ctx, "acme", "rec-1"); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("Decision: want ErrNoRecord, got %+v, %v", d, err)
		}
	})

	t.Run("SaveDecision then Decision gives back every field", func(t *testing.T) {
		k := setup(t, open)
		granted := planexec.Decision{RequestID: "rec-1", Status: planexec.Approved, Approver: "dana",
			Why: "within budget", DecidedAt: k.clk.Now(), Expires: k.clk.Now().Add(90 * time.Minute)}
		denied := planexec.Decision{RequestID: "rec-2", Status: planexec.Denied, Approver: "lee",
			Why: "not this fare", DecidedAt: k.clk.Now().Add(time.Second)} // Expires zero: never
		for _, d := range []planexec.Decision{granted, denied} {
			if err := k.Approvals.SaveDecision(k.ctx, "acme", d); err != nil {
				t.Fatalf("SaveDecision %s: %v", d.RequestID, err)
			}
		}
		for _, want := range []planexec.Decision{granted, denied} {
			got, err := k.Approvals.Decision(k.ctx, "acme", want.RequestID)
			if err != nil {
				t.Fatalf("Decision %s: %v", want.RequestID, err)
			}
			for _, d := range diffDecision(got, want) {
				t.Errorf("%s: %s", want.RequestID, d)
			}
		}
	})

	t.Run("An approver and a reason come back exactly as written, whatever they hold", func(t *testing.T) {
		k := setup(t, open)
		pending := planexec.Decision{RequestID: "rec-1", Status: planexec.Pending, Approver: plannerText,
			Why: plannerText, DecidedAt: k.clk.Now()}
		denied := planexec.Decision{RequestID: "rec-1", Status: planexec.Denied, Approver: "\x00" + plannerText,
			Why: printableText + "\x00", DecidedAt: k.clk.Now().Add(time.Second)}
		// Replacing a decision reads or overwrites what the first save wrote.
		for _, want := range []planexec.Decision{pending, denied} {
			if err := k.Approvals.SaveDecision(k.ctx, "acme", want); err != nil {
				t.Fatalf("SaveDecision (%s): %v", want.Status, err)
			}
			got, err := k.Approvals.Decision(k.ctx, "acme", "rec-1")
			if err != nil {
				t.Fatalf("Decision (%s): %v", want.Status, err)
			}
			for _, d := range diffDecision(got, want) {
				t.Error(d)
			}
		}
	})

	t.Run("The first decision stands: a later one is ErrDecided until an approval expires", func(t *testing.T) {
		k := setup(t, open)
		first := planexec.Decision{RequestID: "rec-1", Status: planexec.Approved, Approver: "dana",
			DecidedAt: k.clk.Now(), Expires: k.clk.Now().Add(time.Hour)}
		if err := k.Approvals.SaveDecision(k.ctx, "acme", first); err != nil {
			t.Fatalf("SaveDecision: %v", err)
		}
		k.clk.Advance(time.Minute)
		withdrawn := planexec.Decision{RequestID: "rec-1", Status: planexec.Denied, Approver: "lee",
			Why: "withdrawn", DecidedAt: k.clk.Now()}
		if err := k.Approvals.SaveDecision(k.ctx, "acme", withdrawn); !errors.Is(err, store.ErrDecided) {
			t.Fatalf("a denial after a live approval: SaveDecision = %v, want ErrDecided", err)
		}
		got, err := k.Approvals.Decision(k.ctx, "acme", "rec-1")
		if err != nil {
			t.Fatalf("Decision: %v", err)
		}
		for _, d := range diffDecision(got, first) {
			t.Error(d)
		}
		// Once the approval expired, a new decision takes its place.
		k.clk.Advance(time.Hour)
		withdrawn.DecidedAt = k.clk.Now()
		if err := k.Approvals.SaveDecision(k.ctx, "acme", withdrawn); err != nil {
			t.Fatalf("a denial after the approval expired: SaveDecision = %v", err)
		}
		if got, err = k.Approvals.Decision(k.ctx, "acme", "rec-1"); err != nil {
			t.Fatalf("Decision: %v", err)
		}
		for _, d := range diffDecision(got, withdrawn) {
			t.Error(d)
		}
	})

	t.Run("A decision that settles its request is kept: ErrDecided, nothing changes", func(t *testing.T) {
		k := setup(t, open)
		now := k.clk.Now()
		approved := planexec.Decision{RequestID: "rec-1", Status: planexec.Approved, Approver: "dana", DecidedAt: now, Expires: now.Add(time.Hour)}
		denied := planexec.Decision{RequestID: "rec-2", Status: planexec.Denied, Approver: "lee", Why: "no", DecidedAt: now}
		for _, d := range []planexec.Decision{approved, denied} {
			if err := k.Approvals.SaveDecision(k.ctx, "acme", d); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name string
			next planexec.Decision
			kept planexec.Decision
		}{
			{"an approval over a live approval", planexec.Decision{RequestID: "rec-1", Status: planexec.Approved, Approver: "eve", DecidedAt: now.Add(time.Minute)}, approved},
			{"an approval over a denial", planexec.Decision{RequestID: "rec-2", Status: planexec.Approved, Approver: "eve", DecidedAt: now.Add(time.Minute)}, denied},
			{"a denial over a denial", planexec.Decision{RequestID: "rec-2", Status: planexec.Denied, Approver: "eve", DecidedAt: now.Add(time.Minute)}, denied},
		} {
			if err := k.Approvals.SaveDecision(k.ctx, "acme", c.next); !errors.Is(err, store.ErrDecided) {
				t.Errorf("%s: err = %v, want ErrDecided", c.name, err)
			}
			got, err := k.Approvals.Decision(k.ctx, "acme", c.next.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffDecision(got, c.kept) {
				t.Errorf("%s: %s", c.name, d)
			}
		}
		// An approval that expired is replaced, by an approval too.
		again := planexec.Decision{RequestID: "rec-1", Status: planexec.Approved, Approver: "eve", DecidedAt: now.Add(2 * time.Hour)}
		if err := k.Approvals.SaveDecision(k.ctx, "acme", again); err != nil {
			t.Errorf("an approval over an expired one: %v", err)
		}
	})

	t.Run("Of people deciding one request at once, one decision is recorded", func(t *testing.T) {
		k := setup(t, open)
		const people = 8
		var wg sync.WaitGroup
		var won atomic.Int64
		for i := range people {
			wg.Go(func() {
				d := planexec.Decision{RequestID: "rec-1", Status: planexec.Approved, Approver: fmt.Sprint("person-", i), DecidedAt: k.clk.Now()}
				switch err := k.Approvals.SaveDecision(k.ctx, "acme", d); {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, store.ErrDecided):
					t.Errorf("SaveDecision: %v", err)
				}
			})
		}
		wg.Wait()
		if n := won.Load(); n != 1 {
			t.Errorf("%d decisions recorded, want 1", n)
		}
	})

	t.Run("Tenants are isolated: one tenant never reads another's decision", func(t *testing.T) {
		k := setup(t, open)
		acme := planexec.Decision{RequestID: "rec-1", Status: planexec.Approved, Approver: "dana", DecidedAt: k.clk.Now()}
		if err := k.Approvals.SaveDecision(k.ctx, "acme", acme); err != nil {
			t.Fatalf("SaveDecision acme: %v", err)
		}
		if d, err := k.Approvals.Decision(k.ctx, "globex", "rec-1"); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("globex reading acme's record id: want ErrNoRecord, got %+v, %v", d, err)
		}
		globex := planexec.Decision{RequestID: "rec-1", Status: planexec.Denied, Approver: "lee", Why: "no", DecidedAt: k.clk.Now()}
		if err := k.Approvals.SaveDecision(k.ctx, "globex", globex); err != nil {
			t.Fatalf("SaveDecision globex: %v", err)
		}
		for tenant, want := range map[string]planexec.Decision{"acme": acme, "globex": globex} {
			got, err := k.Approvals.Decision(k.ctx, tenant, "rec-1")
			if err != nil {
				t.Fatalf("Decision %s: %v", tenant, err)
			}
			for _, d := range diffDecision(got, want) {
				t.Errorf("%s: %s", tenant, d)
			}
		}
	})
}
