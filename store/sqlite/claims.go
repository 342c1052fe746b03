package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

// Claim implements store.IdempotencyStore. A key nobody claimed is taken
// by one insert; any other goes through a transaction that reads the row
// under the write lock (claimRow). The row records whether the effect is
// once per tenant, and when it was written, for Prune. A request that
// peeks (req.Peek) only reads the row, on a read connection: it writes
// nothing.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) (store.Claim, error) {
	if req.Peek {
		return s.peek(ctx, req)
	}
	now := s.now()
	c, n, err := insertClaim(ctx, on{s.ws, nil}, req, now)
	if err != nil {
		return store.Claim{}, storeErr("claim", err)
	}
	if n == 1 {
		return c, nil
	}
	return s.claimRow(ctx, req)
}

// peek answers a request that only looks at the key: from its row as the
// last commit left it, or, when it has none, as a key nobody claimed.
func (s *Store) peek(ctx context.Context, req store.ClaimRequest) (store.Claim, error) {
	row, err := readClaim(ctx, on{s.rs, nil}, req.Key)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		row = store.ClaimRow{}
	case err != nil:
		return store.Claim{}, storeErr("claim", err)
	}
	c, _ := row.Answer(req, s.now()) // never told to take: req peeks
	return c, nil
}

// insertClaim takes req's key from nobody at now, if it has no row; n says
// whether it did.
func insertClaim(ctx context.Context, o on, req store.ClaimRequest, now time.Time) (c store.Claim, n int64, err error) {
	k := req.Key
	var first store.ClaimRow // a key nobody claimed
	c = first.Take(req, now)
	n, err = o.affected(ctx, qClaimNew, k.Tenant, k.Digest, req.Holder, nanos(c.LeaseExpires), req.RunID, req.StepID, req.Tool,
		storecodec.ClaimVersion, req.PerTenant, instant(now))
	return c, n, err
}

// claimRow answers req from the key's row, and takes the key when the row
// says so, in one write transaction. A row Prune deleted since the insert
// met it is a key nobody claimed: it is taken as the insert would have.
func (s *Store) claimRow(ctx context.Context, req store.ClaimRequest) (store.Claim, error) {
	var c store.Claim
	k := req.Key
	err := s.write(ctx, "claim", func(tx on) error {
		row, err := readClaim(ctx, tx, k)
		// Read now again: the write lock may have taken a while.
		now := s.now()
		switch {
		case errors.Is(err, sql.ErrNoRows):
			c, _, err = insertClaim(ctx, tx, req, now)
			return err
		case err != nil:
			return err
		}
		var take bool
		if c, take = row.Answer(req, now); !take {
			return nil
		}
		c = row.Take(req, now)
		_, err = tx.exec(ctx, qClaimTake, row.Epoch, req.Holder, nanos(row.LeaseExpires), req.RunID, req.StepID, req.Tool, storecodec.ClaimVersion,
			req.PerTenant, instant(now), k.Tenant, k.Digest)
		return err
	})
	if err != nil {
		return store.Claim{}, err
	}
	return c, nil
}

// readClaim reads and checks a key's row; sql.ErrNoRows if it has none.
func readClaim(ctx context.Context, tx on, key store.Key) (store.ClaimRow, error) {
	var (
		r      storecodec.ClaimRow
		c      store.ClaimRow
		lease  sql.NullInt64 // Unix nanoseconds
		isNull bool
	)
	err := tx.row(ctx, qClaimGet, key.Tenant, key.Digest).Scan(&r.State, &c.Epoch, &c.Holder, &lease, &r.Outcome, &isNull, &r.Version, &c.Run)
	if err != nil {
		return c, err
	}
	if !isNull && r.Outcome == nil {
		r.Outcome = []byte{} // an empty BLOB scans as nil; it is not NULL
	}
	c.LeaseExpires = fromNanos(lease)
	c.State, c.Outcome, err = storecodec.DecodeClaim(key, r)
	return c, err
}

// held runs q, a write of the holder of epoch (args come first, then the
// key and the epoch), and tells why it changed nothing: ErrNoRecord for a
// key with no row, ErrFenced for one epoch does not hold. A key whose row
// came to be held by epoch between the write and the look (its first claim
// committed in between) is written again: the answer is always true at a
// moment of the call.
func held(ctx context.Context, o on, q string, key store.Key, epoch int64, args ...any) error {
	args = append(args, key.Tenant, key.Digest, epoch)
	for range 3 {
		n, err := o.affected(ctx, q, args...)
		if err != nil || n == 1 {
			return err
		}
		var holds bool
		err = o.row(ctx, qClaimHeldBy, epoch, key.Tenant, key.Digest).Scan(&holds)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNoRecord
		case err != nil:
			return err
		case !holds:
			return store.ErrFenced
		}
	}
	return fmt.Errorf("key %s changed under each of 3 writes", key.Digest)
}

// fenced runs the write q, meant to change the one row that exists (a
// query with the key args) names, and tells why it changed nothing:
// ErrNoRecord when there is no such row, ErrFenced when the row is not the
// writer's to change.
func fenced(ctx context.Context, o on, q string, args []any, exists string, key ...any) error {
	n, err := o.affected(ctx, q, args...)
	if err != nil || n == 1 {
		return err
	}
	var one int
	err = o.row(ctx, exists, key...).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.ErrNoRecord
	case err != nil:
		return err
	}
	return store.ErrFenced
}

// Extend implements store.IdempotencyStore.
func (s *Store) Extend(ctx context.Context, key store.Key, epoch int64, lease time.Duration) error {
	now := s.now()
	return fail("extend", held(ctx, on{s.ws, nil}, qClaimExtend, key, epoch, nanos(now.Add(lease)), instant(now)))
}

// Complete implements store.IdempotencyStore.
func (s *Store) Complete(ctx context.Context, key store.Key, epoch int64, outcome json.RawMessage) error {
	return fail("complete", held(ctx, on{s.ws, nil}, qClaimComplete, key, epoch, storecodec.EncodeOutcome(outcome), instant(s.now())))
}

// Release implements store.IdempotencyStore.
func (s *Store) Release(ctx context.Context, key store.Key, epoch int64, inDoubt bool) error {
	return fail("release", held(ctx, on{s.ws, nil}, qClaimRelease, key, epoch, released(inDoubt), instant(s.now())))
}

func released(inDoubt bool) string {
	if inDoubt {
		return storecodec.StateInDoubt
	}
	return storecodec.StateFree
}

// Resolve implements store.IdempotencyStore.
func (s *Store) Resolve(ctx context.Context, key store.Key, run string, r store.Resolution) error {
	return s.write(ctx, "resolve", func(tx on) error {
		row, err := readClaim(ctx, tx, key)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNoRecord
		case err != nil:
			return err
		}
		now := s.now()
		if err := row.Resolve(run, r, now); err != nil {
			return err
		}
		state, outcome := storecodec.StateFree, []byte(nil)
		if row.State == store.ClaimCompleted {
			state, outcome = storecodec.StateCompleted, storecodec.EncodeOutcome(row.Outcome)
		}
		_, err = tx.exec(ctx, qClaimResolve, state, row.Epoch, outcome, storecodec.ClaimVersion, instant(now), key.Tenant, key.Digest)
		return err
	})
}

// CompleteStep implements store.StepStore: the claim is completed, the
// step recorded and w.Events appended to the run's history in one
// transaction, or none of it is (ErrFenced, ErrNoRecord when the run has
// no plan record, or a *store.Error).
func (s *Store) CompleteStep(ctx context.Context, w *store.StepWrite) error {
	if w == nil {
		return storeErr("complete step", errors.New("a nil step write"))
	}
	return s.writeStep(ctx, "complete step", w, qClaimComplete, storecodec.EncodeOutcome(w.Outcome))
}

// ReleaseStep implements store.StepStore: the claim is released (freed,
// or kept in doubt when w.InDoubt), the step recorded and w.Events
// appended to the run's history in one transaction, or none of it is.
func (s *Store) ReleaseStep(ctx context.Context, w *store.StepWrite) error {
	if w == nil {
		return storeErr("release step", errors.New("a nil step write"))
	}
	return s.writeStep(ctx, "release step", w, qClaimRelease, released(w.InDoubt))
}

// writeStep runs CompleteStep's or ReleaseStep's transaction: q, the
// holder's write of the claim with its argument arg, then the step's
// record and the events.
func (s *Store) writeStep(ctx context.Context, op string, w *store.StepWrite, q string, arg any) error {
	doc, err := storecodec.EncodeStep(w.Record)
	if err != nil {
		return storeErr(op, err)
	}
	tenant := w.Key.Tenant
	return s.write(ctx, op, func(tx on) error {
		now := s.now()
		if err := held(ctx, tx, q, w.Key, w.Epoch, arg, instant(now)); err != nil {
			return err
		}
		if err := saveStep(ctx, tx, tenant, w.RunID, w.Record, doc); err != nil {
			return err
		}
		return appendEvents(ctx, tx, tenant, w.RunID, w.Events, now)
	})
}
