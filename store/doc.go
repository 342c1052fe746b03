// Package store is what a planexec store is made of: the interfaces a store
// implements, the records, claims and decisions it exchanges with the
// executor, its errors, and the claim state machine every store shares. It
// is for those who write a store, as database/sql/driver is for those who
// write a database driver, and like it imports nothing of the package its
// users call; a service that uses a store needs only the store's own package
// (store/memory, store/sqlite, store/postgres) and planexec.
//
// [Store] is what an executor needs: [PlanStore], [IdempotencyStore],
// [ApprovalStore] and [StepStore], a step's claim, record and events in one
// transaction. The executor takes no store with less, since an effect could
// then happen twice. What a store can do beyond that it says by implementing
// the interfaces that name it: [EventStore] (histories), [CeilingStore]
// (windows of autonomy ceilings shared by replicas), [RunLister], [Pruner],
// [Recoverer] and [TranscriptStore]. The executor asks once, as it is built.
// A store never needs to understand a plan, which it keeps as the JSON
// document the executor wrote (PlanRecord.Plan).
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
