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
// timer and its extension are made once.
type renewer struct {
	k      lease.Keeper
	extend func(context.Context) bool // r.renew, bound once

	// The claim being renewed, set by start.
	claims store.IdempotencyStore
	key    Key
	epoch  int64
	ttl    time.Duration
	step   string
	lost   context.CancelCauseFunc // cancels the step's tool when the claim was taken over
}

// start renews the claim of step's key under epoch until stop; a claim
// taken over by another holder (store.ErrFenced) cancels the step's tool
// through lost.
func (r *renewer) start(ctx context.Context, claims store.IdempotencyStore, key Key, epoch int64, ttl time.Duration, step string, lost context.CancelCauseFunc) {
	if r.extend == nil {
		r.extend = r.renew
	}
	r.claims, r.key, r.epoch, r.ttl, r.step, r.lost = claims, key, epoch, ttl, step, lost
	r.k.Keep(ctx, ttl/3, r.extend)
}

// renew extends the claim once; false once it was taken over.
func (r *renewer) renew(ctx context.Context) bool {
	err := r.claims.Extend(ctx, r.key, r.epoch, r.ttl)
	if errors.Is(err, store.ErrFenced) {
		r.lost(fmt.Errorf("planexec: step %s lost its claim to another holder: %w", quote(r.step), err))
		return false
	}
	return true
}

// stop ends renewal and waits for one in progress.
func (r *renewer) stop() {
	r.k.Stop()
	r.claims, r.lost = nil, nil
}
