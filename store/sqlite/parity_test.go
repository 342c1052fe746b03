package sqlite_test

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
	"github.com/planexec/planexec/store/sqlite"
	"github.com/planexec/planexec/storetest"
)

// errClass names which of the SDK's sentinels err is.
func errClass(err error) string {
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

// The claims of the SQLite store behave as the in-memory store's, which is
// the reference, over random sequences of claims, renewals, completions,
// releases, resolutions and a clock that moves past leases.
func TestClaimsBehaveAsTheInMemoryStoresOverRandomSequences(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			clk := storetest.NewClock()
			ref := memory.New(memory.WithClock(clk.Now))
			got, _ := openNew(t, sqlite.WithClock(clk.Now))
			keys := []planexec.Key{{Tenant: "acme", Digest: "a"}, {Tenant: "acme", Digest: "b"}, {Tenant: "globex", Digest: "a"}}
			epochs := map[planexec.Key]int64{}
			leases := []time.Duration{0, time.Minute, 2 * time.Minute}
			epoch := func(k planexec.Key) int64 {
				if rng.IntN(10) < 7 {
					return epochs[k]
				}
				return rng.Int64N(6)
			}
			for i := range 400 {
				k := keys[rng.IntN(len(keys))]
				var op string
				var e1, e2 error
				switch rng.IntN(7) {
				case 0, 1:
					req := store.ClaimRequest{Key: k, Holder: fmt.Sprint("h", i), Lease: leases[rng.IntN(3)], TakeOver: rng.IntN(2) == 0,
						RunID: "run", StepID: "s", Tool: "t"}
					op = fmt.Sprintf("Claim(%v, takeover %v, lease %v)", k, req.TakeOver, req.Lease)
					c1, err1 := ref.Claim(ctx, req)
					c2, err2 := got.Claim(ctx, req)
					e1, e2 = err1, err2
					if !storetest.SameClaim(c1, c2) {
						t.Fatalf("op %d %s: memory %+v, sqlite %+v", i, op, c1, c2)
					}
					if c1.State == store.ClaimAcquired {
						epochs[k] = c1.Epoch
					}
				case 2:
					e, l := epoch(k), leases[rng.IntN(3)]
					op = fmt.Sprintf("Extend(%v, %d, %v)", k, e, l)
					e1, e2 = ref.Extend(ctx, k, e, l), got.Extend(ctx, k, e, l)
				case 3:
					e, out := epoch(k), json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
					if rng.IntN(4) == 0 {
						out = nil
					}
					op = fmt.Sprintf("Complete(%v, %d, %s)", k, e, out)
					e1, e2 = ref.Complete(ctx, k, e, out), got.Complete(ctx, k, e, out)
				case 4:
					e, doubt := epoch(k), rng.IntN(2) == 0
					op = fmt.Sprintf("Release(%v, %d, in doubt %v)", k, e, doubt)
					e1, e2 = ref.Release(ctx, k, e, doubt), got.Release(ctx, k, e, doubt)
				case 5:
					r := planexec.Resolution{Applied: rng.IntN(2) == 0, Outcome: json.RawMessage(fmt.Sprintf(`"r%d"`, i))}
					op = fmt.Sprintf("Resolve(%v, %+v)", k, r)
					e1, e2 = ref.Resolve(ctx, k, "run", r), got.Resolve(ctx, k, "run", r)
				case 6:
					d := []time.Duration{0, 30 * time.Second, 90 * time.Second}[rng.IntN(3)]
					op = fmt.Sprintf("Advance(%v)", d)
					clk.Advance(d)
				}
				if errClass(e1) != errClass(e2) {
					t.Fatalf("op %d %s: memory %v, sqlite %v", i, op, e1, e2)
				}
			}
		})
	}
}
