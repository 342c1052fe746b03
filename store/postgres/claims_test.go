package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/storetest"
)

// The memory store is the reference: the same operations, on the same clock,
// must give the same answers here.
func TestClaimsBehaveAsTheMemoryStoreDoesUnderRandomOperations(t *testing.T) {
	t.Parallel()
	clk := storetest.NewClock()
	pg, _ := newStore(t, postgres.WithClock(clk.Now))
	mem := memory.New(memory.WithClock(clk.Now))
	ctx := context.Background()

	rng := rand.New(rand.NewPCG(1, 2))
	keys := []planexec.Key{{Tenant: "acme", Digest: "k1"}, {Tenant: "acme", Digest: "k2"}, {Tenant: "globex", Digest: "k1"}}
	epochs := map[planexec.Key]int64{}
	pick := func() (planexec.Key, int64) {
		k := keys[rng.IntN(len(keys))]
		return k, epochs[k] + int64(rng.IntN(3)) - 1 // the holder's epoch, an older or a newer one
	}
	seen := map[string]int{}
	for i := range 600 {
		var what string
		var memErr, pgErr error
		switch op := rng.IntN(7); op {
		case 0, 1:
			k, _ := pick()
			req := store.ClaimRequest{Key: k, RunID: "run", StepID: "s", Tool: "t", Holder: fmt.Sprintf("h%d", i),
				Lease: time.Duration(1+rng.IntN(3)) * time.Second, TakeOver: rng.IntN(2) == 0}
			what = fmt.Sprintf("Claim(%v, takeover=%v)", k, req.TakeOver)
			mc, merr := mem.Claim(ctx, req)
			pc, perr := pg.Claim(ctx, req)
			if merr != nil || perr != nil {
				t.Fatalf("op %d %s: memory %v, postgres %v", i, what, merr, perr)
			}
			if !storetest.SameClaim(mc, pc) {
				t.Fatalf("op %d %s:\nmemory   %+v\npostgres %+v", i, what, mc, pc)
			}
			seen[fmt.Sprint("state ", mc.State)]++
			if mc.State == store.ClaimAcquired {
				epochs[k] = mc.Epoch
			}
			continue
		case 2:
			k, e := pick()
			what = fmt.Sprintf("Extend(%v, %d)", k, e)
			memErr, pgErr = mem.Extend(ctx, k, e, 2*time.Second), pg.Extend(ctx, k, e, 2*time.Second)
		case 3:
			k, e := pick()
			out := json.RawMessage(fmt.Sprintf(`{"op":%d}`, i))
			what = fmt.Sprintf("Complete(%v, %d)", k, e)
			memErr, pgErr = mem.Complete(ctx, k, e, out), pg.Complete(ctx, k, e, out)
		case 4:
			k, e := pick()
			doubt := rng.IntN(2) == 0
			what = fmt.Sprintf("Release(%v, %d, %v)", k, e, doubt)
			memErr, pgErr = mem.Release(ctx, k, e, doubt), pg.Release(ctx, k, e, doubt)
		case 5:
			k, _ := pick()
			r := planexec.Resolution{Applied: rng.IntN(2) == 0, Outcome: json.RawMessage(fmt.Sprintf(`"resolved %d"`, i))}
			what = fmt.Sprintf("Resolve(%v, %v)", k, r.Applied)
			memErr, pgErr = mem.Resolve(ctx, k, "run", r), pg.Resolve(ctx, k, "run", r)
		case 6:
			d := time.Duration(rng.IntN(1500)) * time.Millisecond
			clk.Advance(d)
			continue
		}
		if kind(memErr) != kind(pgErr) {
			t.Fatalf("op %d %s: memory says %v, postgres says %v", i, what, memErr, pgErr)
		}
		seen[kind(memErr)]++
	}
	// The run must have met every answer, or it proved less than it claims.
	for _, want := range []string{"state 1", "state 2", "state 3", "state 4", "nil",
		store.ErrNoRecord.Error(), store.ErrFenced.Error(), store.ErrInFlight.Error()} {
		if seen[want] == 0 {
			t.Errorf("no operation answered %q: %v", want, seen)
		}
	}
}

// kind names an error by the sentinel it is.
func kind(err error) string {
	for _, s := range []error{store.ErrNoRecord, store.ErrFenced, store.ErrInFlight} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "nil"
}
