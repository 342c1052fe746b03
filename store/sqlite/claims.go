package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/planexec/planexec"
)

// Claim states as the claims table spells them.
const (
	stateFree      = "free" // given up; the row keeps its epoch so fencing still holds
	stateAcquired  = "acquired"
	stateCompleted = "completed"
	stateInDoubt   = "in_doubt"
)

// Claim implements planexec.IdempotencyStore. A key nobody claimed is taken
// by one insert; any other goes through a transaction that reads the row
// under the write lock.
func (s *Store) Claim(ctx context.Context, req planexec.ClaimRequest) (planexec.Claim, error) {
	const op = "claim"
	now := s.now()
	expires := now.Add(req.Lease)
	k := req.Key
	n, err := on{s.ws, nil}.affected(ctx, qClaimNew, k.Tenant, k.Digest, req.Holder, nanos(expires), req.RunID, req.StepID, req.Tool)
	if err != nil {
		return planexec.Claim{}, storeErr(op, err)
	}
	if n == 1 {
		return planexec.Claim{State: planexec.ClaimAcquired, Epoch: 1, Holder: req.Holder, LeaseExpires: expires}, nil
	}
	var c planexec.Claim
	err = s.write(ctx, op, func(tx on) error {
		var (
			state, holder string
			epoch         int64
			lease         sql.NullInt64
			outcome       []byte
		)
		err := tx.row(ctx, qClaimGet, k.Tenant, k.Digest).Scan(&state, &epoch, &holder, &lease, &outcome)
		if err != nil {
			// Rows are never deleted, so the one the insert met is there.
			return err
		}
		// Read now again: the write lock may have taken a while.
		now = s.now()
		switch state {
		case stateCompleted:
			c = planexec.Claim{State: planexec.ClaimCompleted, Epoch: epoch, Outcome: raw(outcome)}
			return nil
		case stateInDoubt:
			c = planexec.Claim{State: planexec.ClaimInDoubt, Epoch: epoch, Holder: holder}
			return nil
		case stateAcquired:
			if live(now, lease) {
				c = planexec.Claim{State: planexec.ClaimHeld, Epoch: epoch, Holder: holder, LeaseExpires: fromNanos(lease)}
				return nil
			}
			if !req.TakeOver {
				// An expired holder of an irreversible step may have done
				// it: in doubt until someone resolves it.
				c = planexec.Claim{State: planexec.ClaimInDoubt, Epoch: epoch, Holder: holder, LeaseExpires: fromNanos(lease)}
				return nil
			}
		}
		expires = now.Add(req.Lease)
		_, err = tx.exec(ctx, qClaimTake, epoch+1, req.Holder, nanos(expires), req.RunID, req.StepID, req.Tool, k.Tenant, k.Digest)
		c = planexec.Claim{State: planexec.ClaimAcquired, Epoch: epoch + 1, Holder: req.Holder, LeaseExpires: expires}
		return err
	})
	if err != nil {
		return planexec.Claim{}, err
	}
	return c, nil
}

// live reports whether a lease ending at lease still holds at now.
func live(now time.Time, lease sql.NullInt64) bool {
	return lease.Valid && nanos(now).Int64 < lease.Int64
}

// raw is a stored outcome (a copy: Scan copies into a []byte); empty is
// none.
func raw(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}

// held runs q, a write of the holder of epoch (args come first, then the
// key and the epoch), and tells why it changed nothing: ErrNoRecord for a key
// never claimed, ErrFenced otherwise. Claim rows are never deleted, so the
// second look cannot be misled by one going away in between.
func held(ctx context.Context, o on, q string, key planexec.Key, epoch int64, args ...any) error {
	n, err := o.affected(ctx, q, append(args, key.Tenant, key.Digest, epoch)...)
	if err != nil || n == 1 {
		return err
	}
	var one int
	err = o.row(ctx, qClaimExists, key.Tenant, key.Digest).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return planexec.ErrNoRecord
	case err != nil:
		return err
	}
	return planexec.ErrFenced
}

// Extend implements planexec.IdempotencyStore.
func (s *Store) Extend(ctx context.Context, key planexec.Key, epoch int64, lease time.Duration) error {
	return fail("extend", held(ctx, on{s.ws, nil}, qClaimExtend, key, epoch, nanos(s.now().Add(lease))))
}

// Complete implements planexec.IdempotencyStore.
func (s *Store) Complete(ctx context.Context, key planexec.Key, epoch int64, outcome json.RawMessage) error {
	return fail("complete", held(ctx, on{s.ws, nil}, qClaimComplete, key, epoch, blob(outcome)))
}

// Release implements planexec.IdempotencyStore.
func (s *Store) Release(ctx context.Context, key planexec.Key, epoch int64, inDoubt bool) error {
	return fail("release", held(ctx, on{s.ws, nil}, qClaimRelease, key, epoch, released(inDoubt)))
}

func released(inDoubt bool) string {
	if inDoubt {
		return stateInDoubt
	}
	return stateFree
}

// blob is an outcome as stored: NULL when empty.
func blob(outcome json.RawMessage) []byte {
	if len(outcome) == 0 {
		return nil
	}
	return outcome
}

// Resolve implements planexec.IdempotencyStore.
func (s *Store) Resolve(ctx context.Context, key planexec.Key, r planexec.Resolution) error {
	return s.write(ctx, "resolve", func(tx on) error {
		var (
			state, holder string
			epoch         int64
			lease         sql.NullInt64
			outcome       []byte
		)
		err := tx.row(ctx, qClaimGet, key.Tenant, key.Digest).Scan(&state, &epoch, &holder, &lease, &outcome)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return planexec.ErrNoRecord
		case err != nil:
			return err
		case state == stateAcquired && live(s.now(), lease):
			return planexec.ErrInFlight
		case state == stateCompleted:
			return planexec.ErrCompleted
		}
		state, outcome = stateFree, nil
		if r.Applied {
			state, outcome = stateCompleted, blob(r.Outcome)
		}
		_, err = tx.exec(ctx, qClaimResolve, state, outcome, key.Tenant, key.Digest)
		return err
	})
}

// CompleteStep implements planexec.StepStore: the claim is completed and the
// step recorded in one transaction, or neither is (ErrFenced, ErrNoRecord
// when the run has no plan record, or a *planexec.StoreError).
func (s *Store) CompleteStep(ctx context.Context, key planexec.Key, epoch int64, outcome json.RawMessage, runID string, rec planexec.StepRecord) error {
	const op = "complete step"
	doc, err := encode(rec)
	if err != nil {
		return storeErr(op, err)
	}
	return s.write(ctx, op, func(tx on) error {
		if err := held(ctx, tx, qClaimComplete, key, epoch, blob(outcome)); err != nil {
			return err
		}
		return saveStep(ctx, tx, key.Tenant, runID, rec, doc)
	})
}

// ReleaseStep implements planexec.StepStore: the claim is released (freed,
// or kept in doubt) and the step recorded in one transaction, or neither is.
func (s *Store) ReleaseStep(ctx context.Context, key planexec.Key, epoch int64, inDoubt bool, runID string, rec planexec.StepRecord) error {
	const op = "release step"
	doc, err := encode(rec)
	if err != nil {
		return storeErr(op, err)
	}
	return s.write(ctx, op, func(tx on) error {
		if err := held(ctx, tx, qClaimRelease, key, epoch, released(inDoubt)); err != nil {
			return err
		}
		return saveStep(ctx, tx, key.Tenant, runID, rec, doc)
	})
}
