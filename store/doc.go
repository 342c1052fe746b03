// Package store is what a planexec store is made of: the records, claims and
// errors a store exchanges with the executor, and the claim state machine
// every store shares. It is for those who write a store, as
// database/sql/driver is for those who write a database driver; a service
// that uses a store needs only the store's own package (store/memory,
// store/sqlite, store/postgres) and planexec.
//
// A store implements the interfaces planexec defines, planexec.PlanStore
// and planexec.IdempotencyStore, with planexec.ApprovalStore and this
// package's StepStore as capabilities the executor finds on it. Each takes
// and returns the types below: a store never needs to understand a plan,
// which it keeps as the JSON document the executor wrote (PlanRecord.Plan).
//
// # Claims
//
// A claim is one key's record of one effect. What a request gets from a key,
// and how a key moves between states, is decided by ClaimRow's methods
// (Answer, Take, Resolve, Holds), so that every store keeps the same rules:
// a store reads the key's row, asks ClaimRow, and writes back what it says.
// A store that decides in SQL instead (a conditional upsert) must agree with
// them; package storetest checks that it does.
//
// # Errors
//
// A store returns ErrNoRecord, ErrFenced, ErrInFlight and ErrCompleted where
// the interfaces say, unwrapped or wrapped, and wraps everything else in a
// *Error naming the store and the operation. A record it cannot read wraps
// ErrNewerRecord (written by a newer version) or ErrCorruptRecord (damaged):
// never misread, never replayed, never taken for "not run".
package store
