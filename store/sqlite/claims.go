package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/internal/storecodec"
)

// Claim implements planexec.IdempotencyStore. A key nobody claimed is taken
// by one insert; any other goes through a transaction that reads the row
// under the write lock.
func (s *Store) Claim(ctx context.Context, req planexec.ClaimRequest) (planexec.Claim, error) {
	const op = "claim"
	now := s.now()
	expires := now.Add(req.Lease)
	k := req.Key
	n, err := on{s.ws, nil}.affected(ctx, qClaimNew, k.Tenant, k.Digest, req.Holder, nanos(expires), req.RunID, req.StepID, req.Tool, storecodec.ClaimVersion)
	if err != nil {
		return planexec.Claim{}, storeErr(op, err)
	}
	if n == 1 {
		return planexec.Claim{State: planexec.ClaimAcquired, Epoch: 1, Holder: req.Holder, LeaseExpires: expires}, nil
	}
	var c planexec.Claim
	err = s.write(ctx, op, func(tx on) error {
		// Rows are never deleted, so the one the insert met is there.
		r, err := readClaim(ctx, tx, k)
		if err != nil {
			return err
		}
		state, outcome, err := storecodec.DecodeClaim(k, r.ClaimRow)
		if err != nil {
			return err
		}
		// Read now again: the write lock may have taken a while.
		now = s.now()
		switch state {
		case planexec.ClaimCompleted:
			c = planexec.Claim{State: planexec.ClaimCompleted, Epoch: r.epoch, Outcome: outcome}
			return nil
		case planexec.ClaimInDoubt:
			c = planexec.Claim{State: planexec.ClaimInDoubt, Epoch: r.epoch, Holder: r.holder}
			return nil
		case planexec.ClaimAcquired:
			if live(now, r.lease) {
				c = planexec.Claim{State: planexec.ClaimHeld, Epoch: r.epoch, Holder: r.holder, LeaseExpires: fromNanos(r.lease)}
				return nil
			}
			if !req.TakeOver {
				// An expired holder of an irreversible step may have done
				// it: in doubt until someone resolves it.
				c = planexec.Claim{State: planexec.ClaimInDoubt, Epoch: r.epoch, Holder: r.holder, LeaseExpires: fromNanos(r.lease)}
				return nil
			}
		}
		expires = now.Add(req.Lease)
		_, err = tx.exec(ctx, qClaimTake, r.epoch+1, req.Holder, nanos(expires), req.RunID, req.StepID, req.Tool, storecodec.ClaimVersion, k.Tenant, k.Digest)
		c = planexec.Claim{State: planexec.ClaimAcquired, Epoch: r.epoch + 1, Holder: req.Holder, LeaseExpires: expires}
		return err
	})
	if err != nil {
		return planexec.Claim{}, err
	}
	return c, nil
}

// claimRow is a row of the claims table as read.
type claimRow struct {
	storecodec.ClaimRow
	epoch  int64
	holder string
	lease  sql.NullInt64 // Unix nanoseconds
}

// readClaim reads a key's row; sql.ErrNoRows if it has none.
func readClaim(ctx context.Context, tx on, key planexec.Key) (claimRow, error) {
	var (
		r      claimRow
		isNull bool
	)
	err := tx.row(ctx, qClaimGet, key.Tenant, key.Digest).Scan(&r.State, &r.epoch, &r.holder, &r.lease, &r.Outcome, &isNull, &r.Version)
	if err == nil && !isNull && r.Outcome == nil {
		r.Outcome = []byte{} // an empty BLOB scans as nil; it is not NULL
	}
	return r, err
}

// live reports whether a lease ending at lease still holds at now.
func live(now time.Time, lease sql.NullInt64) bool {
	return lease.Valid && nanos(now).Int64 < lease.Int64
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
	return fail("complete", held(ctx, on{s.ws, nil}, qClaimComplete, key, epoch, storecodec.EncodeOutcome(outcome)))
}

// Release implements planexec.IdempotencyStore.
func (s *Store) Release(ctx context.Context, key planexec.Key, epoch int64, inDoubt bool) error {
	return fail("release", held(ctx, on{s.ws, nil}, qClaimRelease, key, epoch, released(inDoubt)))
}

func released(inDoubt bool) string {
	if inDoubt {
		return storecodec.StateInDoubt
	}
	return storecodec.StateFree
}

// Resolve implements planexec.IdempotencyStore.
func (s *Store) Resolve(ctx context.Context, key planexec.Key, r planexec.Resolution) error {
	return s.write(ctx, "resolve", func(tx on) error {
		row, err := readClaim(ctx, tx, key)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return planexec.ErrNoRecord
		case err != nil:
			return err
		}
		state, _, err := storecodec.DecodeClaim(key, row.ClaimRow)
		switch {
		case err != nil:
			return err
		case state == planexec.ClaimAcquired && live(s.now(), row.lease):
			return planexec.ErrInFlight
		case state == planexec.ClaimCompleted:
			return planexec.ErrCompleted
		}
		next, outcome := storecodec.StateFree, []byte(nil)
		if r.Applied {
			next, outcome = storecodec.StateCompleted, storecodec.EncodeOutcome(r.Outcome)
		}
		_, err = tx.exec(ctx, qClaimResolve, next, outcome, storecodec.ClaimVersion, key.Tenant, key.Digest)
		return err
	})
}

// CompleteStep implements planexec.StepStore: the claim is completed and the
// step recorded in one transaction, or neither is (ErrFenced, ErrNoRecord
// when the run has no plan record, or a *planexec.StoreError).
func (s *Store) CompleteStep(ctx context.Context, key planexec.Key, epoch int64, outcome json.RawMessage, runID string, rec planexec.StepRecord) error {
	const op = "complete step"
	doc, err := storecodec.EncodeStep(rec)
	if err != nil {
		return storeErr(op, err)
	}
	return s.write(ctx, op, func(tx on) error {
		if err := held(ctx, tx, qClaimComplete, key, epoch, storecodec.EncodeOutcome(outcome)); err != nil {
			return err
		}
		return saveStep(ctx, tx, key.Tenant, runID, rec, doc)
	})
}

// ReleaseStep implements planexec.StepStore: the claim is released (freed,
// or kept in doubt) and the step recorded in one transaction, or neither is.
func (s *Store) ReleaseStep(ctx context.Context, key planexec.Key, epoch int64, inDoubt bool, runID string, rec planexec.StepRecord) error {
	const op = "release step"
	doc, err := storecodec.EncodeStep(rec)
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
