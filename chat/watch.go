package chat

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// pageSize is how many entries one read of the transcript asks for.
const pageSize = 1000

// Transcript returns up to limit of the session's entries after seq after,
// in order: the whole conversation, whatever was compacted for the model
// (limit <= 0 reads to the end). A session not stored for the tenant is
// ErrNoSession.
func (c *Chat) Transcript(ctx context.Context, tenant, session string, after int64, limit int) ([]Output, error) {
	var out []Output
	for limit <= 0 || len(out) < limit {
		n := pageSize
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		page, err := c.cfg.Store.Transcript(ctx, tenant, session, after, n)
		if errors.Is(err, store.ErrNoRecord) {
			return nil, ErrNoSession
		}
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			o, err := decodeEntry(e)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
			after = e.Seq
		}
		if len(page) < n {
			break
		}
	}
	return out, nil
}

// transcript reads the entries after `after` up to and including upTo.
func (c *Chat) transcript(ctx context.Context, k sessionKey, after, upTo int64) ([]Output, error) {
	if upTo <= after {
		return nil, nil
	}
	return c.Transcript(ctx, k.tenant, k.id, after, int(upTo-after))
}

// Watch yields the session's outputs after seq after, in order: those
// stored, then each as it is stored, by any process, until ctx is done (the
// iteration then ends with ctx's error). An assistant message is yielded
// twice with one Seq: as KindText, then as KindMessage.
//
// A watcher never holds a turn up: the turn writes and goes on, and a
// watcher reads. One that has caught up with the session and then falls
// more than Config.WatchLag entries behind it is dropped with
// ErrWatcherDropped; watching again after the last Seq it saw goes on
// without a gap (catching up from the store is never dropped). A session not stored for the
// tenant is ErrNoSession.
func (c *Chat) Watch(ctx context.Context, tenant, session string, after int64) iter.Seq2[Output, error] {
	return func(yield func(Output, error) bool) {
		k := sessionKey{tenant, session}
		batch := min(c.cfg.WatchLag, 256)
		live := false // caught up once: from then on, falling behind drops the watcher
		for {
			wake := c.woken(k) // before reading, so no entry stored after the read is missed
			page, err := c.cfg.Store.Transcript(ctx, tenant, session, after, batch)
			if errors.Is(err, store.ErrNoRecord) {
				err = ErrNoSession
			}
			if err != nil {
				yield(Output{}, err)
				return
			}
			if len(page) < batch {
				live = true
			} else if live {
				rec, err := c.cfg.Store.Session(ctx, tenant, session)
				if err != nil {
					yield(Output{}, err)
					return
				}
				if rec.Seq-after > int64(c.cfg.WatchLag) {
					yield(Output{}, ErrWatcherDropped)
					return
				}
			}
			for _, e := range page {
				o, err := decodeEntry(e)
				if err != nil {
					yield(Output{}, err)
					return
				}
				if o.Kind == KindMessage && o.Role == "assistant" {
					text := Output{Seq: o.Seq, At: o.At, Kind: KindText, Turn: o.Turn, Text: o.Text}
					if !yield(text, nil) {
						return
					}
				}
				if !yield(o, nil) {
					return
				}
				after = e.Seq
			}
			if len(page) > 0 {
				continue
			}
			// Caught up: wait for the session to go on, reading only its
			// record (one read a poll) until it holds an entry past after.
			for {
				rec, doc, err := c.load(ctx, tenant, session)
				if err != nil {
					yield(Output{}, err)
					return
				}
				if rec.Seq > after {
					break
				}
				if rec.Turn.Holder != "" && !rec.Turn.Held(c.cfg.Now()) {
					// Its turn's process stopped: the repair ends the turn.
					if err := c.repair(ctx, rec, doc); err != nil && !errors.Is(err, store.ErrTurnHeld) {
						yield(Output{}, err)
						return
					}
					continue
				}
				timer := time.NewTimer(c.cfg.PollInterval)
				select {
				case <-ctx.Done():
					timer.Stop()
					yield(Output{}, ctx.Err())
					return
				case <-wake:
				case <-timer.C:
				}
				timer.Stop()
				wake = c.woken(k) // before the next read, so no entry stored after it is missed
			}
		}
	}
}

// TranscriptFor is Transcript as person may see it: what they could not
// have read themselves (results and applied outcomes read under another
// person's authority that theirs would not allow, and the answers, calls,
// results and proposals the planner made of them for others) is withheld,
// in fixed words, as it is from the planner working for them (see
// Authority in the package documentation). A person's client reads the
// session this way; Transcript is the whole record, for the service.
func (c *Chat) TranscriptFor(ctx context.Context, person planexec.Delegation, session string, after int64, limit int) ([]Output, error) {
	v, err := c.viewerFor(ctx, person, session, after)
	if err != nil {
		return nil, err
	}
	out, err := c.Transcript(ctx, person.Tenant, session, after, limit)
	if err != nil {
		return nil, err
	}
	for i := range out {
		v.show(&out[i])
	}
	return out, nil
}

// WatchFor is Watch as person may see it, withheld as TranscriptFor says.
func (c *Chat) WatchFor(ctx context.Context, person planexec.Delegation, session string, after int64) iter.Seq2[Output, error] {
	return func(yield func(Output, error) bool) {
		v, err := c.viewerFor(ctx, person, session, after)
		if err != nil {
			yield(Output{}, err)
			return
		}
		var text *Output // the text of the message that follows it
		for o, err := range c.Watch(ctx, person.Tenant, session, after) {
			if err != nil {
				yield(o, err)
				return
			}
			if o.Kind == KindText {
				text = &o
				continue
			}
			v.show(&o)
			if text != nil {
				t := *text
				t.Text, text = o.Text, nil
				if !yield(t, nil) {
					return
				}
			}
			if !yield(o, nil) {
				return
			}
		}
	}
}

// viewerFor is a viewer for person of the session's entries after after:
// it has read those before, so what they withheld is known.
func (c *Chat) viewerFor(ctx context.Context, person planexec.Delegation, session string, after int64) (*viewer, error) {
	j, err := c.judgeFor(ctx, person, session)
	if err != nil {
		return nil, err
	}
	v := &viewer{person: person, may: j.mayRead}
	if after > 0 {
		before, err := c.Transcript(ctx, person.Tenant, session, 0, int(after))
		if err != nil {
			return nil, err
		}
		for i := range before {
			v.show(&before[i])
		}
	}
	return v, nil
}

// repair ends a turn whose process stopped (its lease ran out with no end
// written): its calls with no result are answered as interrupted, and it is
// done with an error, in one write that takes and frees the session.
func (c *Chat) repair(ctx context.Context, rec *store.SessionRecord, doc *sessionDoc) error {
	entries, err := c.repairEntries(ctx, rec, doc)
	if err != nil {
		return err
	}
	now := c.cfg.Now()
	_, err = c.cfg.Store.TakeTurn(ctx, &store.TurnWrite{
		Tenant: rec.Tenant, Session: rec.ID, Epoch: rec.Turn.Epoch, Holder: c.cfg.Holder, Now: now, Entries: entries, End: true,
	})
	if err == nil {
		c.notify(sessionKey{rec.Tenant, rec.ID})
	}
	return err
}

// repairEntries are the entries that close the session's last turn, whose
// process stopped: a result for each call that has none, an error in fixed
// words, and done.
func (c *Chat) repairEntries(ctx context.Context, rec *store.SessionRecord, doc *sessionDoc) ([]json.RawMessage, error) {
	k := sessionKey{rec.Tenant, rec.ID}
	turn, err := c.transcript(ctx, k, doc.TurnStart-1, rec.Seq)
	if err != nil {
		return nil, err
	}
	var open []Call
	answered := map[string]bool{}
	rounds := 0
	prev := Kind("")
	for _, o := range turn {
		switch o.Kind {
		case KindToolCall:
			open = append(open, *o.Call)
		case KindToolResult:
			answered[o.Result.Call] = true
			if prev != KindToolResult && prev != KindProposal {
				rounds++ // the results of one round are written one after another
			}
		}
		prev = o.Kind
	}
	var out []Output
	for _, call := range open {
		if !answered[call.ID] {
			out = append(out, Output{Kind: KindToolResult, Turn: doc.Turns, Result: &Result{
				Call: call.ID, Tool: call.Tool, Status: CallNotRun,
				Error: &ToolError{Code: "interrupted", Message: "The turn was interrupted (its process stopped) before this call's result was recorded. Call it again if it is still needed."},
			}})
		}
	}
	out = append(out,
		Output{Kind: KindError, Turn: doc.Turns, Text: "The turn was interrupted: the service stopped while it ran. Send a message to continue."},
		Output{Kind: KindDone, Turn: doc.Turns, Done: &Done{Reason: Failed, Rounds: rounds}})
	raw := make([]json.RawMessage, len(out))
	for i := range out {
		raw[i] = encodeEntry(&out[i])
	}
	return raw, nil
}
