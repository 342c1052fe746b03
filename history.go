package planexec

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"time"

	"github.com/planexec/planexec/store"
)

// A run's history is its events as the store keeps them, readable from any
// replica and after a restart. The executor writes what a run records with
// the writes it makes anyway: a finished step's events go in the step's own
// transaction (store.StepStore), the rest in each save of the plan and at
// the end of each call (Plan, Execute, Resume, Do). So a step costs no
// write of its own, and the stored history lags the live one by at most
// the events since the last write. One execution stores its events in the
// order Run.Events shows them.

// unstored encodes the events not yet in the store, and returns how many
// events the store holds once they are. Callers hold r.flushMu.
func (r *Run) unstored() ([]json.RawMessage, int) {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	n := len(r.rec.events)
	if r.stored >= n {
		return nil, n
	}
	// The documents and their list are the run's own buffers, reused from
	// one write to the next: a store copies what it keeps.
	r.buf, r.ends = r.buf[:0], r.ends[:0]
	for i := r.stored; i < n; i++ {
		e := r.rec.events[i]
		e.Seq = 0 // the store numbers what it keeps
		r.buf = appendEvent(r.buf, &e)
		r.ends = append(r.ends, len(r.buf))
	}
	r.docs = r.docs[:0]
	start := 0
	for _, end := range r.ends {
		r.docs = append(r.docs, r.buf[start:end:end])
		start = end
	}
	return r.docs, n
}

// flush stores the events the store does not hold yet. Events it could not
// store stay pending for the next write.
func (r *Run) flush(ctx context.Context) error {
	h := r.ex.history
	if h == nil {
		return nil
	}
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	docs, n := r.unstored()
	if len(docs) == 0 {
		return nil
	}
	if err := h.AppendEvents(ctx, r.d.Tenant, r.d.RunID, docs); err != nil {
		return fmt.Errorf("planexec: storing the history of run %s: %w", quote(r.d.RunID), err)
	}
	r.stored = n
	return nil
}

// writeStep makes a finished step's joint write (store.StepStore) with the
// events not yet stored.
func (r *Run) writeStep(ctx context.Context, w *store.StepWrite, write func(context.Context, *store.StepWrite) error) error {
	if r.ex.history == nil {
		return write(ctx, w)
	}
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	var n int
	w.Events, n = r.unstored()
	if err := write(ctx, w); err != nil {
		return err
	}
	r.stored = n
	return nil
}

// History returns up to limit of the run's stored events numbered after
// `after`, in order: its history as any replica sees it, and after a
// restart. Stored events are numbered in the order they were stored (for
// one execution, the order Run.Events shows). It needs a store that keeps
// histories (store.EventStore); with none it is a *ConfigurationError. A
// run with no history has none: not an error.
func (r *Run) History(ctx context.Context, after int64, limit int) ([]Event, error) {
	h := r.ex.history
	if h == nil {
		return nil, &ConfigurationError{Why: "the store keeps no histories"}
	}
	if limit <= 0 {
		return nil, nil
	}
	recs, err := h.Events(ctx, r.d.Tenant, r.d.RunID, after, limit)
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
