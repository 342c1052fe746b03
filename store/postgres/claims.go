package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/planexec/planexec/internal/storecodec"
	"github.com/planexec/planexec/store"
)

// claimSQL takes a key: an insert for a new key; an update of the existing
// row when it is free, or when its lease ran out and the caller may take it
// over, and a newer version of this package did not write it. It returns no
// row when the key is not the caller's to take; heldSQL then reads it.
// Parameters: tenant, key, holder, lease (µs), run, step, tool, clock (NULL:
// the database's), take over, the claim layout version, once per tenant.
const claimSQL = `INSERT INTO {s}.claims AS c (tenant, key, state, epoch, holder, lease_expires, run_id, step_id, tool, version, per_tenant, updated)
VALUES ($1, $2, 'acquired', 1, $3, coalesce($8::timestamptz, now()) + $4::bigint * interval '1 microsecond', $5, $6, $7, $10, $11,
	coalesce($8::timestamptz, now()))
ON CONFLICT (tenant, key) DO UPDATE
SET state = 'acquired', epoch = c.epoch + 1, holder = excluded.holder, lease_expires = excluded.lease_expires,
	outcome = NULL, run_id = excluded.run_id, step_id = excluded.step_id, tool = excluded.tool, version = excluded.version,
	per_tenant = excluded.per_tenant, updated = excluded.updated
WHERE (c.state = 'free' OR (c.state = 'acquired' AND c.lease_expires <= coalesce($8::timestamptz, now()) AND $9::boolean))
	AND c.version <= excluded.version
RETURNING c.epoch, c.lease_expires`

// heldSQL reads a key the caller could not take or resolve, with the time
// its lease is judged by. Parameters: tenant, key, clock.
const heldSQL = `SELECT state, epoch, holder, lease_expires, outcome, version, coalesce($3::timestamptz, now()), run_id
FROM {s}.claims WHERE tenant = $1 AND key = $2`

// The fenced writes change a claim only while the caller's epoch holds it.
// Their parameters are the tenant, the key and the epoch, then their own
// from $4, then the clock ({now} stands for the time it gives, or the
// database's). The SET clauses serve CompleteStep and ReleaseStep too.
const (
	completeSet = `state = 'completed', outcome = $4, updated = {now}`
	releaseSet  = `state = CASE WHEN $4::boolean THEN 'in_doubt' ELSE 'free' END, updated = {now}`
	extendSet   = `lease_expires = {now} + $4::bigint * interval '1 microsecond', updated = {now}`
)

// clockAt is the time the clock parameter $n gives, or the database's.
func clockAt(n int) string { return fmt.Sprintf("coalesce($%d::timestamptz, now())", n) }

func fencedSQL(set string) string {
	return `UPDATE {s}.claims SET ` + strings.ReplaceAll(set, "{now}", clockAt(5)) + ` WHERE tenant = $1 AND key = $2 AND epoch = $3 AND state = 'acquired'`
}

// resolveSQL settles a key unless a live holder has it, moving its epoch on.
// It leaves alone a completed key, and a row it cannot read: a newer
// version's, or one in a state this package never writes. Parameters:
// tenant, key, applied, outcome, clock, the claim layout version.
const resolveSQL = `UPDATE {s}.claims SET epoch = epoch + 1,
	state = CASE WHEN $3::boolean THEN 'completed' ELSE 'free' END,
	outcome = CASE WHEN $3::boolean THEN $4::bytea END, version = $6, updated = coalesce($5::timestamptz, now())
WHERE tenant = $1 AND key = $2 AND run_id = $7 AND state IN ('free', 'acquired', 'in_doubt') AND version BETWEEN 1 AND $6
	AND NOT (state = 'acquired' AND lease_expires > coalesce($5::timestamptz, now()))`

// heldBySQL tells, after a fenced write that did not apply, a key nobody
// claimed (NULL) from one another epoch holds (false) and one the writer's
// epoch came to hold since (true). Parameters: tenant, key, epoch.
const heldBySQL = `SELECT (SELECT state = 'acquired' AND epoch = $3 FROM {s}.claims WHERE tenant = $1 AND key = $2)`

// claimAttempts bounds how often Claim tries again when the key changes
// between its two statements.
const claimAttempts = 8

// Claim implements store.IdempotencyStore. Acquiring a key takes one
// round trip; finding it taken, two. A request that peeks (req.Peek)
// takes one, a read of the key's row (heldSQL): it inserts and updates
// nothing, and a key it would take, or one with no row, is reported free.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) (store.Claim, error) {
	const op = "claim"
	k := req.Key
	now := s.now()
	if req.Peek {
		row, at, err := s.held(ctx, k, now)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			row = store.ClaimRow{} // a key nobody claimed
		case err != nil:
			return store.Claim{}, storeErr(op, err)
		}
		c, _ := row.Answer(req, at) // never told to take: req peeks
		return c, nil
	}
	for range claimAttempts {
		var (
			epoch   int64
			expires pgtype.Timestamptz
		)
		err := s.scan(ctx, s.q.claim, []any{k.Tenant, k.Digest, req.Holder, micros(req.Lease), req.RunID, req.StepID, req.Tool, now, req.TakeOver, storecodec.ClaimVersion, req.PerTenant},
			&epoch, &expires)
		if err == nil {
			return store.Claim{State: store.ClaimAcquired, Epoch: epoch, Holder: req.Holder, LeaseExpires: expires.Time}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return store.Claim{}, storeErr(op, err)
		}
		// Claims are never deleted, so the row the insert met is there.
		row, at, err := s.held(ctx, k, now)
		if err != nil {
			return store.Claim{}, storeErr(op, err)
		}
		if c, take := row.Answer(req, at); !take {
			return c, nil
		}
		// Free, or a lease that ran out for a caller who may take it over:
		// the key changed between the two statements. Try again.
	}
	return store.Claim{}, storeErr(op, fmt.Errorf("key %s changed under each of %d attempts", k.Digest, claimAttempts))
}

// held reads and checks a key's row, and the time its lease is judged by.
func (s *Store) held(ctx context.Context, key store.Key, now any) (store.ClaimRow, time.Time, error) {
	var (
		r           storecodec.ClaimRow
		c           store.ClaimRow
		expires, at pgtype.Timestamptz
	)
	err := s.scan(ctx, s.q.held, []any{key.Tenant, key.Digest, now}, &r.State, &c.Epoch, &c.Holder, &expires, &r.Outcome, &r.Version, &at, &c.Run)
	if err != nil {
		return c, at.Time, err
	}
	c.LeaseExpires = expires.Time
	c.State, c.Outcome, err = storecodec.DecodeClaim(key, r)
	return c, at.Time, err
}

// Extend implements store.IdempotencyStore.
func (s *Store) Extend(ctx context.Context, key store.Key, epoch int64, lease time.Duration) error {
	return s.fencedWrite(ctx, "extend", s.q.extend, key, epoch, micros(lease), s.now())
}

// Complete implements store.IdempotencyStore.
func (s *Store) Complete(ctx context.Context, key store.Key, epoch int64, outcome json.RawMessage) error {
	return s.fencedWrite(ctx, "complete", s.q.complete, key, epoch, storecodec.EncodeOutcome(outcome), s.now())
}

// Release implements store.IdempotencyStore.
func (s *Store) Release(ctx context.Context, key store.Key, epoch int64, inDoubt bool) error {
	return s.fencedWrite(ctx, "release", s.q.release, key, epoch, inDoubt, s.now())
}

// fencedWrite runs a fenced write. When it does not apply, it says why:
// ErrNoRecord for a key never claimed, ErrFenced for an epoch that no longer
// holds the key (epochs only go up, so it never will again).
func (s *Store) fencedWrite(ctx context.Context, op, sql string, key store.Key, epoch int64, args ...any) error {
	for range claimAttempts {
		tag, err := s.exec(ctx, sql, append([]any{key.Tenant, key.Digest, epoch}, args...)...)
		switch {
		case err != nil:
			return storeErr(op, err)
		case tag.RowsAffected() == 1:
			return nil
		}
		// Why not, as the key's row stands now: none, or another epoch's.
		// A row that came to be held by epoch since the write (the key's
		// first claim committed in between) is written again.
		var holds *bool
		if err := s.scan(ctx, s.q.heldBy, []any{key.Tenant, key.Digest, epoch}, &holds); err != nil {
			return storeErr(op, err)
		}
		switch {
		case holds == nil:
			return store.ErrNoRecord
		case !*holds:
			return store.ErrFenced
		}
	}
	return storeErr(op, fmt.Errorf("key %s changed under each of %d attempts", key.Digest, claimAttempts))
}

// Resolve implements store.IdempotencyStore.
func (s *Store) Resolve(ctx context.Context, key store.Key, run string, r store.Resolution) error {
	const op = "resolve"
	var outcome []byte
	if r.Applied {
		outcome = storecodec.EncodeOutcome(r.Outcome)
	}
	now := s.now()
	for range claimAttempts {
		tag, err := s.exec(ctx, s.q.resolve, key.Tenant, key.Digest, r.Applied, outcome, now, storecodec.ClaimVersion, run)
		switch {
		case err != nil:
			return storeErr(op, err)
		case tag.RowsAffected() == 1:
			return nil
		}
		// Why not: no such key, another run's, a row this package cannot
		// read, a completed key, or a live holder: what the claim machine
		// says of the row as it is read now. A row it would settle changed
		// between the two statements (a first claim committed, a holder let
		// it go): try again.
		row, at, err := s.held(ctx, key, now)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return store.ErrNoRecord
		case err != nil:
			return storeErr(op, err)
		}
		if err := row.Resolve(run, r, at); err != nil {
			return err
		}
	}
	return storeErr(op, fmt.Errorf("key %s changed under each of %d attempts", key.Digest, claimAttempts))
}
