package planexec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/planexec/planexec/internal/lease"
	"github.com/planexec/planexec/store"
)

// Key identifies one effect: the digest of the canonical JSON of the tenant,
// run, tool and validated arguments (or only the contract's key arguments).
// An *IndeterminateOutcomeError names the key of a step in doubt, to resolve
// it by.
type Key = store.Key

// Resolution settles a key in doubt, once someone knows what happened: see
// Run.Resolve.
type Resolution = store.Resolution

// renewer keeps a claim's lease while its tool runs, extending it every
// third of a lease. A worker keeps one for all the steps it runs, so its
// timer is made once.
type renewer struct{ k lease.Keeper }

// start renews the claim of step's key under epoch until stop; a claim
// taken over by another holder (store.ErrFenced) cancels the step's tool
// through lost.
func (r *renewer) start(ctx context.Context, claims store.IdempotencyStore, key Key, epoch int64, ttl time.Duration, step string, lost context.CancelCauseFunc) {
	r.k.Keep(ctx, ttl/3, func(ctx context.Context) bool {
		err := claims.Extend(ctx, key, epoch, ttl)
		if errors.Is(err, store.ErrFenced) {
			lost(fmt.Errorf("planexec: step %s lost its claim to another holder: %w", quote(step), err))
			return false
		}
		return true
	})
}

// stop ends renewal and waits for one in progress.
func (r *renewer) stop() { r.k.Stop() }
