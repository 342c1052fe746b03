package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/store"
)

// Stores is the store under test.
type Stores struct {
	Store store.Store
	// Tamper, if set, writes into the same backing what the store never
	// would, so the suite can check what it makes of it. Durable stores
	// should give one; without it those checks are skipped.
	Tamper Tamper
}

// Open returns stores over a fresh, empty backing private to t, whose leases run on now.
type Open func(t testing.TB, now func() time.Time) Stores

// Run runs the conformance suite: every behaviour a store must have, as subtests.
//
// Each subtest opens its own stores with a clock it moves by hand, so leases
// run out when the test says and not before. The subtests run one after
// another.
func Run(t *testing.T, open Open) {
	t.Run("PlanStore", func(t *testing.T) { runPlanStore(t, open) })
	t.Run("IdempotencyStore", func(t *testing.T) { runIdempotencyStore(t, open) })
	t.Run("ApprovalStore", func(t *testing.T) { runApprovalStore(t, open) })
	t.Run("StepStore", func(t *testing.T) { runStepStore(t, open) })
	t.Run("RecordFields", func(t *testing.T) { runRecordFields(t, open) })
	t.Run("History", func(t *testing.T) { runHistory(t, open) })
	t.Run("Listing", func(t *testing.T) { runListing(t, open) })
	t.Run("Ceilings", func(t *testing.T) { runCeilings(t, open) })
	t.Run("Prune", func(t *testing.T) { runPrune(t, open) })
	t.Run("Recovery", func(t *testing.T) { runRecovery(t, open) })
	t.Run("DamagedRecords", func(t *testing.T) { runDamagedRecords(t, open) })
	t.Run("Executor", func(t *testing.T) { runExecutor(t, open) })
	t.Run("Cancellation", func(t *testing.T) { runCancellation(t, open) })
	t.Run("Rounds", func(t *testing.T) { runRounds(t, open) })
	t.Run("Transcripts", func(t *testing.T) { runTranscripts(t, open) })
	t.Run("Boundaries", func(t *testing.T) { runBoundaries(t, open) })
}

// Clock is a clock a test moves by hand, for stores' WithClock options. It
// starts with a fraction of a millisecond so that a store keeping less than
// milliseconds is caught.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at a fixed instant.
func NewClock() *Clock {
	return &Clock{t: time.Date(2030, time.March, 4, 9, 0, 0, 123_456_789, time.UTC)}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// kit is what one subtest works with: a fresh store, seen through each of
// its interfaces, and the clock it runs on.
type kit struct {
	Stores
	Plans       store.PlanStore
	Idempotency store.IdempotencyStore
	Approvals   store.ApprovalStore
	clk         *Clock
	ctx         context.Context
}

// setup opens a fresh store for t on a clock of its own.
func setup(t *testing.T, open Open) kit {
	t.Helper()
	clk := NewClock()
	s := open(t, clk.Now)
	if s.Store == nil {
		t.Fatalf("Open returned no store")
	}
	return kit{Stores: s, Plans: s.Store, Idempotency: s.Store, Approvals: s.Store, clk: clk, ctx: t.Context()}
}

// stepStoreOf returns s's store: every store writes a step's claim and
// record together.
func stepStoreOf(s Stores) (store.Store, bool) { return s.Store, s.Store != nil }

// store is the value an executor is configured with over s.
func (s Stores) store() store.Store { return s.Store }

// sameWaits reports whether a store gave back the waits it was given: the
// same fields, the documents as the same JSON.
func sameWaits(a, b []store.Wait) bool {
	return slices.EqualFunc(a, b, func(x, y store.Wait) bool {
		return x.StepID == y.StepID && x.Tool == y.Tool && x.Request == y.Request && x.Key == y.Key && x.Call == y.Call &&
			(len(x.Detail) == 0) == (len(y.Detail) == 0) && (len(x.Detail) == 0 || jsonEqual(x.Detail, y.Detail))
	})
}

// sameInstant reports whether a and b are the same instant to the
// millisecond. A zero time matches only a zero time: a store must give back
// "never" as the zero time.
func sameInstant(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	d := a.Sub(b)
	return d > -time.Millisecond && d < time.Millisecond
}

// jsonEqual reports whether a and b are the same JSON value: objects equal
// whatever their key order and spacing, numbers equal by exact decimal value
// (never through float64), strings equal whatever their escaping.
func jsonEqual(a, b []byte) bool {
	va, ok := decodeJSON(a)
	if !ok {
		return false
	}
	vb, ok := decodeJSON(b)
	if !ok {
		return false
	}
	return sameJSON(va, vb)
}

func decodeJSON(raw []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if dec.More() {
		return nil, false
	}
	return v, true
}

func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !sameJSON(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		da, err1 := decimal.NewFromString(string(a))
		db, err2 := decimal.NewFromString(string(b))
		return err1 == nil && err2 == nil && da.Equal(db)
	default:
		return a == b
	}
}

// SameClaim reports whether two stores answered a claim alike: the same
// state, epoch, holder and outcome, and lease expiries equal to the
// microsecond (the finest a durable store is asked to keep). Parity tests
// of a store against MemoryIdempotencyStore use it.
func SameClaim(a, b store.Claim) bool {
	return a.State == b.State && a.Epoch == b.Epoch && a.Holder == b.Holder &&
		bytes.Equal(a.Outcome, b.Outcome) &&
		a.LeaseExpires.Truncate(time.Microsecond).Equal(b.LeaseExpires.Truncate(time.Microsecond))
}
