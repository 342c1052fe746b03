package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/planexec/planexec/store"
)

// A run's history is its events as the store keeps them, readable from any
// replica and after a restart. The executor writes what a run records with
// the writes it makes anyway: a finished step's events go in the step's own
// transaction (store.StepStore) unless another step's write is carrying the
// history at that moment, the rest in each save of the plan and at the end
// of each call (Plan, Execute, Resume, Do). So a step costs no write of its
// own, steps of one run commit at once, and the stored history lags the
// live one by at most the events since the last write that carried it. One
// execution stores its events in the order Run.Events shows them.

// journal is a run's record of events and what of it the store holds.
type journal struct {
	record
	h           store.EventStore // nil: the history lives in the process only
	tenant, run string

	// The history's writes, one at a time so it is stored in order.
	mu     sync.Mutex
	stored int               // events[:stored] are in the store
	buf    []byte            // the documents of the events being stored
	ends   []int             // where each document ends in buf
	docs   []json.RawMessage // the documents, as the store is handed them
}

// unstored encodes the events not yet in the store, and returns how many
// events the store holds once they are. Callers hold j.mu.
func (j *journal) unstored() ([]json.RawMessage, int) {
	j.record.mu.Lock()
	defer j.record.mu.Unlock()
	n := len(j.events)
	if j.stored >= n {
		return nil, n
	}
	// The documents and their list are the run's own buffers, reused from
	// one write to the next: a store copies what it keeps.
	j.buf, j.ends = j.buf[:0], j.ends[:0]
	for i := j.stored; i < n; i++ {
		e := j.events[i]
		e.Seq = 0 // the store numbers what it keeps
		j.buf = appendEvent(j.buf, &e)
		j.ends = append(j.ends, len(j.buf))
	}
	j.docs = j.docs[:0]
	start := 0
	for _, end := range j.ends {
		j.docs = append(j.docs, j.buf[start:end:end])
		start = end
	}
	return j.docs, n
}

// with makes a write that carries the events not yet stored: write is
// handed them (nil when the store keeps no histories), and once it
// succeeds they are stored. Events it could not store stay pending for the
// next write.
func (j *journal) with(write func(events []json.RawMessage) error) error {
	if j.h == nil {
		return write(nil)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	events, n := j.unstored()
	if err := write(events); err != nil {
		return err
	}
	j.stored = n
	return nil
}

// write makes a finished step's joint write (store.StepStore), with the
// events not yet stored when no other write of the run is carrying events
// now. Steps of one run finishing at once then commit at once: one carries
// the history on, in order, and the others leave it to the run's next
// write (the next step's, or the plan's at the end of the call), rather
// than wait for a commit that is not theirs.
func (j *journal) write(ctx context.Context, step func(context.Context, *store.StepWrite) error, w *store.StepWrite) error {
	if j.h == nil || !j.mu.TryLock() {
		w.Events = nil
		return step(ctx, w)
	}
	defer j.mu.Unlock()
	var n int
	w.Events, n = j.unstored()
	if err := step(ctx, w); err != nil {
		return err
	}
	j.stored = n
	return nil
}

// flush stores the events the store does not hold yet.
func (j *journal) flush(ctx context.Context) error {
	if j.h == nil {
		return nil
	}
	err := j.with(func(events []json.RawMessage) error {
		if len(events) == 0 {
			return nil
		}
		return j.h.AppendEvents(ctx, j.tenant, j.run, events)
	})
	if err != nil {
		return fmt.Errorf("planexec: storing the history of run %s: %w", quote(j.run), err)
	}
	return nil
}

// store stores, as a call ends, the events it recorded that are not in the
// store yet; a failure to is joined to the call's error.
func (j *journal) store(ctx context.Context, err *error) {
	if ferr := j.flush(context.WithoutCancel(ctx)); ferr != nil {
		*err = errors.Join(*err, ferr)
	}
}

// History returns up to limit (at most 10,000) of the run's stored events
// numbered after `after`, in order: its history as any replica sees it, and after a
// restart. Stored events are numbered in the order they were stored (for
// one execution, the order Run.Events shows). It needs a store that keeps
// histories (store.EventStore); with none it is a *ConfigurationError. A
// run with no history has none: not an error.
func (r *Run) History(ctx context.Context, after int64, limit int) ([]Event, error) {
	h := r.ex.st.history
	if h == nil {
		return nil, &ConfigurationError{Why: "the store keeps no histories"}
	}
	if limit <= 0 {
		return nil, nil
	}
	recs, err := h.Events(ctx, r.d.Tenant, r.d.RunID, max(after, 0), min(limit, maxHistoryPage))
	if err != nil {
		return nil, fmt.Errorf("planexec: reading the history of run %s: %w", quote(r.d.RunID), err)
	}
	out := make([]Event, len(recs))
	for i, rec := range recs {
		if err := json.Unmarshal(rec.Event, &out[i]); err != nil || rec.Seq <= after {
			return nil, &store.Error{Op: "read history", Err: fmt.Errorf("event %d of run %s: %w", rec.Seq, quote(r.d.RunID), store.ErrCorruptRecord)}
		}
		out[i].Seq = rec.Seq
		after = rec.Seq
	}
	return out, nil
}

// historyPage is how many events Follow reads at a time.
const historyPage = 256

// maxHistoryPage bounds the events one History call reads: a larger limit
// reads this many.
const maxHistoryPage = 10_000

// Follow yields the run's stored events numbered after `after`, in order,
// and then each event as it is stored, asking the store every
// Config.PollInterval, until ctx is done or the loop stops. A service
// following a run to its end stops at PLAN_COMPLETED or PLAN_FAILED. An
// error reading the store is yielded, and ends the sequence; ctx's end is
// not an error.
func (r *Run) Follow(ctx context.Context, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		var t *time.Timer
		for {
			page, err := r.History(ctx, after, historyPage)
			if err != nil {
				if ctx.Err() == nil {
					yield(Event{}, err)
				}
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
				after = e.Seq
			}
			if len(page) == historyPage {
				continue
			}
			if t == nil {
				t = time.NewTimer(r.ex.cfg.PollInterval)
				defer t.Stop()
			} else {
				t.Reset(r.ex.cfg.PollInterval)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}
